"""An in-memory stand-in for the boto3 ``s3vectors`` client (moto has no S3 Vectors query API).

It honours the service's API shapes: every request is validated against the botocore service
model installed in the venv (unknown or missing parameters, list bounds, types), and answers have
the documented response shapes. botocore checks only lower bounds; the upper ones the service
enforces are checked here. Semantics emulated (S3 User Guide: limitations, metadata filtering,
hybrid search, index modes; read 2026-11-29):

* one vector bucket / index, ``distanceMetric`` cosine, ``float32`` data (stored rounded to
  float32 as the service does), key overwrite on ``put_vectors``, strongly consistent reads;
* the index has a mode: ``ENHANCED`` (the default of every index in a bucket created after
  2026-09-30: metadata filters apply before the search) or ``CLASSIC``; and a metadata
  configuration: non-filterable keys (≤ 10) and full-text searchable keys
  (``textSearchConfigurations``, ≤ 10, each with an analyzer: ``standard`` by default, or a
  ``language``). :meth:`FakeS3Vectors.from_template` reads both from the template's
  ``AWS::S3Vectors::Index``, so the tests run against the index the stack creates;
* ``query_vectors``: ``topK`` 1-100; ``queryVector`` alone ranks by cosine distance
  (``1 - cosine``); ``queryTexts`` alone ranks by BM25 over the searchable key; both run a
  **hybrid** search: each ranking's best ``topK`` fused by reciprocal rank fusion
  (Σ 1 / (60 + rank), rank from 1), best ``topK`` returned. ``queryTexts`` needs an ``ENHANCED``
  index and a key configured for full-text search, each entry a distinct key, ≤ 1,024 characters
  of text, ≤ 10 entries. ``returnScores`` adds ``scores`` (``bm25Scores``, and for hybrid results
  ``fused`` and, when the vector search matched, ``vectorDistance``). ``queryMode=CLASSIC`` on an
  ``ENHANCED`` index is refused. Filters: ``$eq $ne $gt $gte $lt $lte $in $nin $exists $and $or``
  (+ ``$startsWith`` on ENHANCED) and the ``{"key": value}`` shorthand; non-filterable keys cannot
  be filtered on;
* metadata: values may not be ``null``; ≤ 50 keys; ≤ 40 KB in all; the filterable part ≤ 2 KB;
* ``put_vectors`` ≤ 500 vectors, ``get_vectors`` ≤ 100 keys, ``delete_vectors`` ≤ 500 keys (missing
  keys are not an error);
* errors are ``botocore.exceptions.ClientError`` with the service's error codes.

What is an assumption, not documented: the RRF constant (60, the usual value) and how many
candidates each ranking contributes (``topK``); BM25 with k1 = 1.2, b = 0.75 (Lucene's defaults);
the ``en`` analyzer approximated by the standard one plus English stop words and a minimal plural
stemmer (:func:`analyze`).
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections import Counter
from collections.abc import Sequence
from typing import Any

import botocore.session
from botocore.exceptions import ClientError, ParamValidationError
from botocore.validate import ParamValidator

_MODEL = botocore.session.get_session().get_service_model("s3vectors")
_OPS = {
    "put_vectors": "PutVectors",
    "query_vectors": "QueryVectors",
    "get_vectors": "GetVectors",
    "delete_vectors": "DeleteVectors",
    "list_vectors": "ListVectors",
}
FILTERABLE_LIMIT = 2048  # bytes of filterable metadata per vector
METADATA_LIMIT = 40 * 1024  # bytes of metadata per vector, filterable and not
MAX_METADATA_KEYS = 50
MAX_NON_FILTERABLE_KEYS = 10
MAX_TOP_K = 100
MAX_PUT = 500
MAX_GET = 100
MAX_DELETE = 500
MAX_QUERY_TEXT = 1024
RRF_K = 60
BM25_K1, BM25_B = 1.2, 0.75

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_EN_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)  # Lucene's English stop set


def analyze(text: str, analyzer: str = "standard") -> list[str]:
    """The terms a text search analyzer makes of ``text``: ``standard`` lower-cases and splits on
    Unicode word boundaries; ``en`` also drops English stop words, the possessive ``'s`` and
    plural endings (an approximation of the English analyzer's stemmer)."""
    terms = [t.lower() for t in _WORD.findall(text)]
    if analyzer != "en":
        return terms
    out = []
    for t in terms:
        t = re.sub(r"['’]s$", "", t)
        if t in _EN_STOP:
            continue
        if len(t) > 4 and t.endswith("ies"):
            t = t[:-3] + "y"
        elif len(t) > 3 and t.endswith("s") and not t.endswith(("ss", "us", "is")):
            t = t[:-1]
        out.append(t)
    return out


class Bm25Field:
    """A BM25 index over one text field (k1 = 1.2, b = 0.75; idf = ln(1 + (N - n + 0.5) / (n + 0.5)),
    as Lucene scores)."""

    def __init__(self, analyzer: str = "standard") -> None:
        self.analyzer = analyzer
        self.docs: dict[str, Counter[str]] = {}
        self.lengths: dict[str, int] = {}
        self.postings: dict[str, set[str]] = {}
        self.total_length = 0

    def put(self, key: str, text: str | None) -> None:
        self.remove(key)
        if text is None:
            return
        terms = Counter(analyze(text, self.analyzer))
        self.docs[key] = terms
        self.lengths[key] = sum(terms.values())
        self.total_length += self.lengths[key]
        for term in terms:
            self.postings.setdefault(term, set()).add(key)

    def remove(self, key: str) -> None:
        terms = self.docs.pop(key, None)
        if terms is None:
            return
        self.total_length -= self.lengths.pop(key)
        for term in terms:
            self.postings[term].discard(key)

    def scores(self, query: str, allowed: set[str] | None = None) -> dict[str, float]:
        """BM25 of every document holding a query term (``allowed``: only those keys)."""
        n_docs = len(self.docs)
        if not n_docs:
            return {}
        avg = self.total_length / n_docs or 1.0
        out: dict[str, float] = {}
        for term, qtf in Counter(analyze(query, self.analyzer)).items():
            holders = self.postings.get(term) or set()
            if not holders:
                continue
            idf = math.log(1 + (n_docs - len(holders) + 0.5) / (len(holders) + 0.5))
            for key in holders if allowed is None else holders & allowed:
                tf = self.docs[key][term]
                norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * self.lengths[key] / avg)
                out[key] = out.get(key, 0.0) + qtf * idf * tf * (BM25_K1 + 1) / norm
        return out


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: Σ 1 / (k + rank) over the rankings a key is in, best first (ties: key)."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for position, key in enumerate(ranking):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + position + 1)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


def _error(code: str, message: str, op: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, op)


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", float(x)))[0])


def _compare(op: str, actual: Any, expected: Any, mode: str) -> bool:
    if op in ("$in", "$nin") and (not isinstance(expected, list) or not expected):
        raise ValueError(f"{op} takes a non-empty array of values")
    if op == "$startsWith" and mode != "ENHANCED":
        raise ValueError("$startsWith needs an ENHANCED index")
    if op == "$exists":
        return (actual is not None) == bool(expected)
    if actual is None:
        return op in ("$ne", "$nin")
    if op == "$eq":
        return bool(actual == expected)
    if op == "$ne":
        return bool(actual != expected)
    if op == "$in":
        return actual in expected
    if op == "$nin":
        return actual not in expected
    if op == "$startsWith":
        return isinstance(actual, str) and actual.startswith(str(expected))
    ordering = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b,
                "$lte": lambda a, b: a <= b}  # fmt: skip
    if op in ordering:
        return bool(ordering[op](actual, expected))
    raise ValueError(f"unsupported filter operator {op}")


def matches(
    flt: dict[str, Any], meta: dict[str, Any], non_filterable: frozenset[str], mode: str = "ENHANCED"
) -> bool:
    """Evaluate an S3 Vectors metadata filter document against one vector's metadata."""
    for key, cond in flt.items():
        if key in ("$and", "$or"):
            results = [matches(sub, meta, non_filterable, mode) for sub in cond]
            if not (all(results) if key == "$and" else any(results)):
                return False
            continue
        if key.startswith("$"):
            raise ValueError(f"unsupported filter operator {key}")
        if key in non_filterable:
            raise ValueError(f"metadata key {key!r} is not filterable")
        conditions = cond if isinstance(cond, dict) else {"$eq": cond}
        if not all(_compare(op, meta.get(key), value, mode) for op, value in conditions.items()):
            return False
    return True


class FakeS3Vectors:
    """The subset of the ``s3vectors`` client the adapter uses, plus ``list_vectors`` and a call log.

    ``text_search``: the full-text searchable keys and their analyzers (``{"text": "standard"}``);
    ``mode``: ``ENHANCED`` or ``CLASSIC``."""

    def __init__(
        self,
        bucket: str,
        index: str,
        dimension: int,
        *,
        non_filterable: tuple[str, ...] = ("text",),
        text_search: dict[str, str] | None = None,
        mode: str = "ENHANCED",
    ):
        if len(non_filterable) > MAX_NON_FILTERABLE_KEYS:
            raise ValueError("at most 10 non-filterable metadata keys per index")
        self.bucket = bucket
        self.index = index
        self.dimension = dimension
        self.non_filterable = frozenset(non_filterable)
        self.mode = mode
        self.text_search = dict({"text": "standard"} if text_search is None else text_search)
        self._bm25 = {key: Bm25Field(analyzer) for key, analyzer in self.text_search.items()}
        self.vectors: dict[str, tuple[list[float], dict[str, Any]]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._matrix: Any = None  # numpy rows of the stored unit vectors, rebuilt after writes
        self._keys: list[str] = []

    @classmethod
    def from_template(
        cls, resources: dict[str, Any], bucket: str, *, resource: str = "NotesVectorIndex"
    ) -> FakeS3Vectors:
        """The index the template's ``AWS::S3Vectors::Index`` creates (its resources as CloudFormation
        gets them; a new bucket's index is ENHANCED)."""
        props = resources[resource]["Properties"]
        meta = props.get("MetadataConfiguration") or {}
        text_search = {
            c["MetadataKey"]: c.get("Language", "standard")
            for c in meta.get("TextSearchConfigurations") or []
        }
        return cls(
            bucket,
            props["IndexName"],
            int(props["Dimension"]),
            non_filterable=tuple(meta.get("NonFilterableMetadataKeys") or ()),
            text_search=text_search,
        )

    # ------------------------------------------------------------------ plumbing
    def _enter(self, method: str, params: dict[str, Any]) -> None:
        op = _OPS[method]
        report = ParamValidator().validate(params, _MODEL.operation_model(op).input_shape)
        if report.has_errors():
            raise ParamValidationError(report=report.generate_report())
        if params.get("vectorBucketName") != self.bucket or params.get("indexName") != self.index:
            raise _error("NotFoundException", "The specified index could not be found", op)
        self.calls.append((method, params))

    def _vector(self, data: dict[str, Any], op: str) -> list[float]:
        values = data.get("float32")
        if not isinstance(values, list) or len(values) != self.dimension:
            raise _error("ValidationException", f"Invalid vector dimension, expected {self.dimension}", op)
        if not all(math.isfinite(float(x)) for x in values):
            raise _error("ValidationException", "Vector values must be finite", op)
        return [_f32(x) for x in values]

    def _check_metadata(self, meta: dict[str, Any], op: str) -> None:
        if any(v is None for v in meta.values()):
            raise _error("ValidationException", "Metadata values cannot be null", op)
        if len(meta) > MAX_METADATA_KEYS:
            raise _error(
                "ValidationException", f"A vector can have at most {MAX_METADATA_KEYS} metadata keys", op
            )
        if len(json.dumps(meta, ensure_ascii=False).encode()) > METADATA_LIMIT:
            raise _error("ValidationException", "Metadata exceeds 40 KB", op)
        filterable = {k: v for k, v in meta.items() if k not in self.non_filterable}
        if len(json.dumps(filterable, ensure_ascii=False).encode()) > FILTERABLE_LIMIT:
            raise _error("ValidationException", "Filterable metadata exceeds 2 KB", op)

    @staticmethod
    def _at_most(items: Sequence[Any], limit: int, what: str, op: str) -> None:
        if len(items) > limit:
            raise _error("ValidationException", f"At most {limit} {what} per request", op)

    # ------------------------------------------------------------------ API
    def put_vectors(self, **params: Any) -> dict[str, Any]:
        self._enter("put_vectors", params)
        self._at_most(params["vectors"], MAX_PUT, "vectors", "PutVectors")
        staged = {}
        for v in params["vectors"]:
            meta = dict(v.get("metadata") or {})
            self._check_metadata(meta, "PutVectors")
            staged[v["key"]] = (self._vector(v["data"], "PutVectors"), meta)
        self.vectors.update(staged)  # all or nothing
        for key, (_, meta) in staged.items():
            for field, index in self._bm25.items():
                value = meta.get(field)
                index.put(key, value if isinstance(value, str) else None)
        self._matrix = None
        return {}

    def _query_texts(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        texts = list(params.get("queryTexts") or [])
        if not texts:
            return []
        if self.mode != "ENHANCED":
            raise _error(
                "ValidationException", "queryTexts requires an index in ENHANCED mode", "QueryVectors"
            )
        self._at_most(texts, 10, "query texts", "QueryVectors")
        keys = [t["metadataKey"] for t in texts]
        if len(set(keys)) != len(keys):
            raise _error(
                "ValidationException", "Each queryTexts entry must target a distinct key", "QueryVectors"
            )
        for t in texts:
            if t["metadataKey"] not in self.text_search:
                raise _error(
                    "ValidationException",
                    f"Metadata key {t['metadataKey']!r} is not configured for full-text search",
                    "QueryVectors",
                )
            if len(t["text"]) > MAX_QUERY_TEXT:
                raise _error("ValidationException", "A query text is at most 1024 characters", "QueryVectors")
        return texts

    def _filtered(self, flt: dict[str, Any] | None) -> set[str] | None:
        try:
            if flt is None:
                return None
            matches(flt, {}, self.non_filterable, self.mode)  # reject a bad filter even on an empty index
            return {key for key, (_, meta) in self.vectors.items()
                    if matches(flt, meta, self.non_filterable, self.mode)}  # fmt: skip
        except ValueError as exc:
            raise _error("ValidationException", str(exc), "QueryVectors") from exc

    def _distances(self, query: list[float], allowed: set[str] | None) -> list[tuple[float, str]]:
        """(cosine distance, key) of the allowed vectors, nearest first (numpy: an exact scan)."""
        import numpy as np

        if self._matrix is None:
            self._keys = list(self.vectors)
            rows = np.asarray([self.vectors[k][0] for k in self._keys], dtype=np.float32).reshape(
                len(self._keys), self.dimension
            )
            norms = np.linalg.norm(rows, axis=1, keepdims=True)
            self._matrix = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
        q = np.asarray(query, dtype=np.float32)
        qn = float(np.linalg.norm(q))
        cos = self._matrix @ (q / qn) if qn else np.zeros(len(self._keys), dtype=np.float32)
        out = [(_f32(1.0 - float(c)), key) for key, c in zip(self._keys, cos, strict=True)
               if allowed is None or key in allowed]  # fmt: skip
        return sorted(out)

    def query_vectors(self, **params: Any) -> dict[str, Any]:
        self._enter("query_vectors", params)
        top_k = params["topK"]
        if top_k > MAX_TOP_K:
            raise _error("ValidationException", "topK must be between 1 and 100", "QueryVectors")
        if params.get("queryMode") == "CLASSIC" and self.mode == "ENHANCED":
            raise _error("ValidationException", "CLASSIC can't be used on an ENHANCED index", "QueryVectors")
        texts = self._query_texts(params)
        if "queryVector" not in params and not texts:
            raise _error("ValidationException", "Provide queryVector, queryTexts or both", "QueryVectors")
        allowed = self._filtered(params.get("filter"))
        distances: dict[str, float] = {}
        vector_ranking: list[str] = []
        if "queryVector" in params:
            query = self._vector(params["queryVector"], "QueryVectors")
            ranked = self._distances(query, allowed)[:top_k]
            distances = {key: d for d, key in ranked}
            vector_ranking = [key for _, key in ranked]
        bm25: dict[str, dict[str, float]] = {}
        text_rankings: list[list[str]] = []
        for t in texts:
            scored = self._bm25[t["metadataKey"]].scores(t["text"], allowed)
            best = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
            text_rankings.append([key for key, _ in best])
            for key, score in best:
                bm25.setdefault(key, {})[t["metadataKey"]] = score
        if texts and vector_ranking:
            order = rrf([vector_ranking, *text_rankings])[:top_k]
        elif texts:
            totals = {key: sum(s.values()) for key, s in bm25.items()}
            order = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
        else:
            order = [(key, 0.0) for key in vector_ranking]
        out = []
        for key, fused in order:
            item: dict[str, Any] = {"key": key}
            if params.get("returnDistance") and key in distances:
                item["distance"] = distances[key]
            if params.get("returnScores") and texts:
                scores: dict[str, Any] = {
                    "bm25Scores": [{"metadataKey": k, "score": s} for k, s in bm25.get(key, {}).items()]
                }
                if vector_ranking:
                    scores["fused"] = fused
                    if key in distances:
                        scores["vectorDistance"] = distances[key]
                item["scores"] = scores
            if params.get("returnMetadata"):
                item["metadata"] = dict(self.vectors[key][1])
            out.append(item)
        return {"vectors": out, "distanceMetric": "cosine"}

    def get_vectors(self, **params: Any) -> dict[str, Any]:
        self._enter("get_vectors", params)
        self._at_most(params["keys"], MAX_GET, "keys", "GetVectors")
        out = []
        for key in params["keys"]:
            if key not in self.vectors:
                continue
            vec, meta = self.vectors[key]
            item: dict[str, Any] = {"key": key}
            if params.get("returnData"):
                item["data"] = {"float32": list(vec)}
            if params.get("returnMetadata"):
                item["metadata"] = dict(meta)
            out.append(item)
        return {"vectors": out}

    def delete_vectors(self, **params: Any) -> dict[str, Any]:
        self._enter("delete_vectors", params)
        self._at_most(params["keys"], MAX_DELETE, "keys", "DeleteVectors")
        for key in params["keys"]:
            self.vectors.pop(key, None)
            for index in self._bm25.values():
                index.remove(key)
        self._matrix = None
        return {}

    def list_vectors(self, **params: Any) -> dict[str, Any]:
        self._enter("list_vectors", params)
        keys = sorted(self.vectors)
        return {"vectors": [{"key": k} for k in keys]}
