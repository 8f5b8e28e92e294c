"""A small in-process OpenSearch at the HTTP level, for opensearch-py's transport.

``FakeCluster`` answers the REST calls the adapter makes (index create/exists, search pipeline,
``_bulk``, ``_search`` with ``knn`` + efficient filter / ``bool`` / ``match`` / ``hybrid`` /
``terms``, ``search_after``, ``_count``, ``_delete_by_query``, ``_update_by_query``) with responses
shaped like the OpenSearch docs', scoring exactly (faiss inner-product score, a simple BM25-like
keyword score, min-max + weighted arithmetic mean for hybrid). Every request is recorded.
``serverless=True`` behaves like a Serverless vector collection: custom ``_id`` on index actions,
``refresh``, ``_delete_by_query``/``_update_by_query`` and search pipelines are refused.

Limits, as the service enforces them: a request body over ``max_request_bytes`` (10 MiB, the
smallest HTTP payload limit of OpenSearch Service; Serverless refuses large ``_bulk`` requests alike)
is answered 413, and a ``terms`` query with more values than ``max_terms_count`` (the index setting's
default, 65,536) is answered 400, so a regression that sends either fails a test.

Refresh lag (``refresh_every=n``): searches and counts see the index as of its last refresh, and a
refresh happens before every ``n``-th of them — so a write (index or delete) becomes visible only
some reads later, as on a near-real-time Serverless collection. ``refresh_every=None`` (default):
every write is visible at once.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from typing import Any

from opensearchpy import Connection, OpenSearch

_WORD = re.compile(r"[a-z0-9]+")
MAX_REQUEST_BYTES = 10 * 1024 * 1024
MAX_TERMS_COUNT = 65_536


class _Terms(list):  # type: ignore[type-arg]
    """A ``terms`` query's values with set membership (a 65,536-value list is looked up per doc)."""

    def __init__(self, values: list[Any]) -> None:
        super().__init__(values)
        self._set = set(values)

    def __contains__(self, value: object) -> bool:
        return value in self._set


def _terms_problem(node: Any, limit: int) -> str | None:
    """Wrap every ``terms`` list in :class:`_Terms`; the error OpenSearch gives for one over ``limit``."""
    if isinstance(node, list):
        for item in node:
            if (problem := _terms_problem(item, limit)) is not None:
                return problem
        return None
    if not isinstance(node, dict):
        return None
    for key, value in node.items():
        if key == "terms" and isinstance(value, dict) and len(value) == 1:
            ((field, values),) = value.items()
            if isinstance(values, list):
                if len(values) > limit:
                    return (
                        f"The number of terms [{len(values)}] used in the Terms Query request has "
                        f"exceeded the allowed maximum of [{limit}]. This maximum can be set by changing "
                        "the [index.max_terms_count] index level setting."
                    )
                value[field] = _Terms(values)
        elif (problem := _terms_problem(value, limit)) is not None:
            return problem
    return None


def faiss_ip_score(ip: float) -> float:
    return 1.0 + ip if ip >= 0 else 1.0 / (1.0 - ip)


class FakeCluster:
    def __init__(
        self,
        *,
        serverless: bool = False,
        refresh_every: int | None = None,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        max_terms_count: int = MAX_TERMS_COUNT,
    ) -> None:
        self.serverless = serverless
        self.max_request_bytes = max_request_bytes
        self.max_terms_count = max_terms_count
        self.refused: list[tuple[int, str]] = []  # (status, path) of each request refused for a limit
        self.refresh_every = refresh_every
        self.reads = 0  # searches and counts served
        self.visible: dict[str, dict[str, dict[str, Any]]] = {}  # index → docs as of the last refresh
        self.indices: dict[str, dict[str, Any]] = {}  # name → {"body": mapping, "docs": {id: source}}
        self.pipelines: dict[str, Any] = {}
        self.requests: list[tuple[str, str, dict[str, Any], Any]] = []
        self.bulk_failures: dict[str, str] = {}  # note_id → error reason to report for its action
        # A sleeping collection: each entry fails one request before it is served, an HTTP status
        # (503, 429) or "timeout" (the request hangs past its timeout → ConnectionTimeout).
        self.wake_failures: list[int | str] = []
        self.timeouts: list[Any] = []  # the per-request timeout of every request, in order

    def client(self, **kwargs: Any) -> OpenSearch:
        return OpenSearch(
            hosts=[{"host": "fake", "port": 9200}], connection_class=FakeConnection, cluster=self, **kwargs
        )

    # ------------------------------------------------------------------ dispatch
    def handle(self, method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        self.requests.append((method, path, dict(params or {}), body))
        problem = _terms_problem(body, self.max_terms_count)
        if problem is not None:
            self.refused.append((400, path))
            return 400, _err("illegal_argument_exception", problem)
        parts = [p for p in path.split("/") if p]
        if self.serverless and "refresh" in (params or {}):
            return 400, _err("illegal_argument_exception", "refresh is not supported")
        if parts[:2] == ["_search", "pipeline"]:
            if self.serverless:
                return 404, _err("resource_not_found_exception", "no handler for search pipelines")
            self.pipelines[parts[2]] = body
            return 200, {"acknowledged": True}
        name = parts[0]
        if len(parts) == 1:
            if method == "HEAD":
                return (200 if name in self.indices else 404), ""
            if method == "PUT":
                if name in self.indices:
                    return 400, _err("resource_already_exists_exception", f"index [{name}] already exists")
                self.indices[name] = {"body": body, "docs": {}}
                return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}
        if name == "_bulk":
            return self._bulk(body)
        if name not in self.indices:
            return 404, _err("index_not_found_exception", f"no such index [{name}]")
        docs: dict[str, dict[str, Any]] = self.indices[name]["docs"]
        op = parts[1]
        if op in ("_search", "_count"):
            docs = self.searchable(name)
        if op == "_search":
            return 200, self._search(name, docs, body, params or {})
        if op == "_count":
            return 200, {"count": len(self._matching(docs, body.get("query"))), "_shards": _shards()}
        if op in ("_delete_by_query", "_update_by_query"):
            if self.serverless:
                return 404, _err("unsupported_operation_exception", f"{op} is not supported")
            hits = self._matching(docs, body["query"])
            for doc_id in hits:
                if op == "_delete_by_query":
                    del docs[doc_id]
                else:
                    docs[doc_id]["enabled"] = body["script"]["params"]["enabled"]
            key = "deleted" if op == "_delete_by_query" else "updated"
            return 200, {"took": 1, "timed_out": False, "total": len(hits), key: len(hits), "failures": []}
        return 400, _err("illegal_argument_exception", f"unhandled {method} {path}")

    def searchable(self, name: str) -> dict[str, dict[str, Any]]:
        """The docs a search sees now (counts as a read: may refresh first)."""
        docs: dict[str, dict[str, Any]] = self.indices[name]["docs"]
        if self.refresh_every is None:
            return docs
        self.reads += 1
        if self.reads % self.refresh_every == 0 or name not in self.visible:
            self.visible[name] = copy.deepcopy(docs)
        return self.visible[name]

    # ------------------------------------------------------------------ bulk
    def _bulk(self, body: str) -> tuple[int, Any]:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        items: list[dict[str, Any]] = []
        errors = False
        i = 0
        while i < len(lines):
            ((action, meta),) = lines[i].items()
            docs = self.indices.setdefault(meta["_index"], {"body": None, "docs": {}})["docs"]
            if action == "delete":
                found = docs.pop(meta["_id"], None)
                status = 200 if found is not None else 404
                items.append(
                    {
                        "delete": {
                            "_index": meta["_index"],
                            "_id": meta["_id"],
                            "status": status,
                            "result": "deleted" if found else "not_found",
                        }
                    }
                )
                i += 1
                continue
            source = lines[i + 1]
            i += 2
            reason = self.bulk_failures.get(source.get("note_id", ""))
            if self.serverless and "_id" in meta:
                reason = "Document ID is not supported in create/index operation request"
            if reason:
                errors = True
                items.append(
                    {
                        action: {
                            "_index": meta["_index"],
                            "_id": meta.get("_id"),
                            "status": 400,
                            "error": {"type": "mapper_parsing_exception", "reason": reason},
                        }
                    }
                )
                continue
            doc_id = meta.get("_id") or uuid.uuid4().hex
            created = doc_id not in docs
            docs[doc_id] = source
            items.append(
                {
                    action: {
                        "_index": meta["_index"],
                        "_id": doc_id,
                        "_version": 1,
                        "result": "created" if created else "updated",
                        "status": 201 if created else 200,
                    }
                }
            )
        return 200, {"took": 3, "errors": errors, "items": items}

    # ------------------------------------------------------------------ queries
    def _matches(self, src: dict[str, Any], query: dict[str, Any] | None) -> bool:
        if not query or "match_all" in query:
            return True
        ((kind, spec),) = query.items()
        if kind == "term":
            ((field, value),) = spec.items()
            value = value["value"] if isinstance(value, dict) else value
            return src.get(field) == value
        if kind == "terms":
            ((field, values),) = spec.items()
            return src.get(field) in values
        if kind == "bool":
            for clause in _as_list(spec.get("filter")) + _as_list(spec.get("must")):
                if not self._matches(src, clause):
                    return False
            return True
        if kind == "range":  # {"field": {"gte"|"gt"|"lte"|"lt": value, ...}}
            ((field, bounds),) = spec.items()
            value = src.get(field)
            checks = {"gte": lambda a, b: a >= b, "gt": lambda a, b: a > b,
                      "lte": lambda a, b: a <= b, "lt": lambda a, b: a < b}  # fmt: skip
            return value is not None and all(checks[op](value, bound) for op, bound in bounds.items())
        if kind == "match":
            return self._keyword_score(src, spec) > 0
        raise AssertionError(f"fake cluster: unsupported query {kind}")

    def _matching(self, docs: dict[str, dict[str, Any]], query: dict[str, Any] | None) -> list[str]:
        return [doc_id for doc_id, src in docs.items() if self._matches(src, query)]

    @staticmethod
    def _keyword_score(src: dict[str, Any], spec: dict[str, Any]) -> float:
        ((field, q),) = spec.items()
        words = set(_WORD.findall(str(q["query"] if isinstance(q, dict) else q).lower()))
        tokens = _WORD.findall(str(src.get(field, "")).lower())
        return sum(1.0 / (1.0 + 0.1 * len(tokens)) for w in words if w in tokens)

    def _scored(self, docs: dict[str, dict[str, Any]], query: dict[str, Any]) -> list[tuple[str, float]]:
        """(doc id, score) for one scoring query: knn (faiss innerproduct) or bool/match (keyword)."""
        if "knn" in query:
            ((field, spec),) = query["knn"].items()
            allowed = [d for d in docs if self._matches(docs[d], spec.get("filter"))]
            scored = [
                (d, faiss_ip_score(sum(a * b for a, b in zip(spec["vector"], docs[d][field], strict=True))))
                for d in allowed
            ]
            scored.sort(key=lambda x: -x[1])
            return scored[: spec["k"]]
        out = []
        for doc_id, src in docs.items():
            if not self._matches(src, query):
                continue
            musts = _as_list(query.get("bool", {}).get("must")) if "bool" in query else [query]
            score = sum(self._keyword_score(src, m["match"]) for m in musts if "match" in m) or 1.0
            out.append((doc_id, score))
        out.sort(key=lambda x: -x[1])
        return out

    def _search(self, name: str, docs: dict[str, Any], body: dict[str, Any], params: dict[str, Any]) -> Any:
        query = body.get("query", {"match_all": {}})
        if "hybrid" in query:
            pipeline = self.pipelines[params["search_pipeline"]]
            weights = pipeline["phase_results_processors"][0]["normalization-processor"]["combination"][
                "parameters"
            ]["weights"]
            combined: dict[str, float] = {}
            for weight, sub in zip(weights, query["hybrid"]["queries"], strict=True):
                scored = self._scored(docs, sub)
                if not scored:
                    continue
                hi, lo = scored[0][1], scored[-1][1]
                for doc_id, s in scored:
                    norm = (s - lo) / (hi - lo) if hi > lo else 1.0
                    combined[doc_id] = combined.get(doc_id, 0.0) + weight * norm / sum(weights)
            ranked = sorted(combined.items(), key=lambda x: -x[1])
        elif "knn" in query or "match" in json.dumps(query):
            ranked = self._scored(docs, query)
        else:
            ranked = [(d, 1.0) for d in self._matching(docs, query)]
        if "sort" in body:
            ranked.sort(key=lambda x: docs[x[0]]["note_id"])
            if "search_after" in body:
                ranked = [x for x in ranked if docs[x[0]]["note_id"] > body["search_after"][0]]
        ranked = ranked[: body.get("size", 10)]
        hits = []
        for doc_id, score in ranked:
            hit: dict[str, Any] = {
                "_index": name,
                "_id": doc_id,
                "_score": score,
                "_source": _project(docs[doc_id], body.get("_source", True)),
            }
            if "sort" in body:
                hit["sort"] = [docs[doc_id]["note_id"]]
            hits.append(hit)
        return {
            "took": 2,
            "timed_out": False,
            "_shards": _shards(),
            "hits": {
                "total": {"value": len(hits), "relation": "eq"},
                "max_score": hits[0]["_score"] if hits else None,
                "hits": hits,
            },
        }


def _project(src: dict[str, Any], spec: Any) -> dict[str, Any]:
    if spec is True:
        return dict(src)
    if isinstance(spec, list):
        return {k: v for k, v in src.items() if k in spec}
    if isinstance(spec, dict) and "excludes" in spec:
        return {k: v for k, v in src.items() if k not in spec["excludes"]}
    return dict(src)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _shards() -> dict[str, int]:
    return {"total": 1, "successful": 1, "skipped": 0, "failed": 0}


def _err(kind: str, reason: str) -> dict[str, Any]:
    return {
        "error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason},
        "status": 400,
    }


class FakeConnection(Connection):
    """opensearch-py connection that hands each request to a :class:`FakeCluster` (no sockets)."""

    def __init__(self, cluster: FakeCluster, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster

    def perform_request(  # type: ignore[override]
        self,
        method: str,
        url: str,
        params: dict[str, Any] | None = None,
        body: bytes | None = None,
        timeout: Any = None,
        ignore: Any = (),
        headers: Any = None,
    ) -> tuple[int, dict[str, str], str]:
        self.cluster.timeouts.append(timeout)
        if self.cluster.wake_failures:
            failure = self.cluster.wake_failures.pop(0)
            if failure == "timeout":
                from opensearchpy.exceptions import ConnectionTimeout

                raise ConnectionTimeout("TIMEOUT", f"read timed out ({timeout})", None)
            self._raise_error(int(failure), json.dumps(_err("unavailable", "waking up")))
        size = len(body) if isinstance(body, bytes) else len((body or "").encode())
        if size > self.cluster.max_request_bytes:
            self.cluster.requests.append((method, url.split("?", 1)[0], dict(params or {}), None))
            self.cluster.refused.append((413, url.split("?", 1)[0]))
            self._raise_error(
                413,
                json.dumps(
                    {"message": f"Request size {size} exceeded {self.cluster.max_request_bytes} bytes"}
                ),
            )
        text = body.decode() if isinstance(body, bytes) else body
        parsed: Any = text
        path = url.split("?", 1)[0]
        if text and not path.endswith("_bulk"):
            parsed = json.loads(text)
        status, data = self.cluster.handle(method, path, params or {}, parsed)
        raw = data if isinstance(data, str) else json.dumps(data)
        if not (200 <= status < 300) and status not in (ignore or ()):
            self._raise_error(status, raw)
        return status, {"content-type": "application/json"}, raw
