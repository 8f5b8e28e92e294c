"""Amazon S3 Vectors index (``VectorIndex`` on a vector bucket index, boto3 client ``s3vectors``).

No compute is billed while idle: S3 Vectors charges storage, PUT bytes and per-query fees only.

Layout. The vector key is the note id, so ``put_vectors`` overwrites on a re-run. The index is
created (by the template) with ``distanceMetric: cosine`` and ``text`` as a *non-filterable*
metadata key (filterable metadata is limited to 2 KB per vector; the chunk text is not). The
filterable metadata is ``owner``, ``document_id``, ``collection``, ``enabled``, ``chunk_index``;
keys whose value is ``None`` are left out (so ``collection $eq "work"`` never matches a note with
no collection). Vectors are stored and queried at unit length; the service returns the cosine
*distance* (``1 - cosine``), which this adapter turns back into ``Hit.score`` = cosine similarity.

What the API does not offer, and what the adapter does instead:

* **No delete/update by filter.** ``delete_document`` and ``set_enabled`` need no query: a
  document's vector keys are its note ids, ``<documentId>-00000v<tag>``, ``-00001v<tag>``, … (one
  per chunk index, contiguous from 0 once a version is split and stored; ``<tag>`` names the content
  version, so during a replacement the previous version's keys sit beside the new one's). The
  caller names the version tags (``tags``: the new version's in finalize, the tags of the notes it
  holds otherwise); for each, and for the ids without a tag that documents ingested before ids were
  per version have, the adapter reads the keys with ``get_vectors`` :data:`GET_BATCH` at a time until
  a batch finds none (missing keys are not an error; reads are strongly consistent), keeps those
  whose ``owner`` matches, and deletes them (:data:`DELETE_BATCH` per call) or puts them back with
  the flag flipped. A 3,901-chunk document costs 42 reads (40 that find its keys, then one that finds
  none for its tag and one for the untagged ids) and 8 deletes — no paid queries (the
  filtered top-100 query rounds this replaced took 40). A key past a run of :data:`GET_BATCH`
  missing chunk indexes is not seen: only a batch stored while the document was being deleted could
  leave one, and the services also delete every note id they hold.
* **No count.** ``count`` runs one filtered query with ``topK`` = :data:`MAX_TOP_K`: exact up to
  that many, a lower bound beyond (the only caller asks "is the knowledge base empty?").

Hybrid search (``RETRIEVAL_MODE=hybrid``). The template creates the index with ``text`` as a
full-text searchable key (``textSearchConfigurations``; it stays non-filterable, so the 2 KB of
filterable metadata hold only ``owner``, ``document_id``, ``collection``, ``enabled`` and
``chunk_index``), in a bucket whose indexes are ``ENHANCED`` (filters apply before the search: a
workspace's notes are found however few they are among all the others). ``hybrid_search`` sends
one ``QueryVectors`` with ``queryTexts`` (the question, cut at a word to the API's 1,024
characters) and ``queryVector``: the service ranks by BM25 and by cosine and fuses the two by
reciprocal rank fusion. ``Hit.score`` is the fused score (the ranking); ``Hit.similarity`` is the
cosine, which the answerability decision reads: the service returns it as ``vectorDistance`` for
the results its vector search matched, and the few found by keyword alone are read back with one
``GetVectors`` (``returnData``) and compared here. A hybrid query on a ``CLASSIC`` index (one in a
bucket created before 2026-09-30) is refused by the service; docs/deploy.md says how to switch it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from ragchat.domain.ids import tagged_note_id
from ragchat.domain.models import Hit, SearchFilter, VectorRecord

MAX_TOP_K = 100  # QueryVectors topK ceiling
MAX_QUERY_TEXT = 1024  # characters of one queryTexts entry
TEXT_KEY = "text"  # the metadata key holding the chunk text (non-filterable, full-text searchable)
PUT_BATCH = (
    200  # vectors per PutVectors call (the API allows 500; this keeps requests well below its size cap)
)
DELETE_BATCH = 500  # keys per DeleteVectors call (API maximum)
GET_BATCH = 100  # keys per GetVectors call (API maximum)


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(float(x) * float(x) for x in vector))
    return [float(x) / norm for x in vector] if norm else [0.0 for _ in vector]


def query_text(text: str) -> str:
    """The question as a ``queryTexts`` entry: whitespace collapsed, cut at a word boundary to
    :data:`MAX_QUERY_TEXT` characters; empty when it holds no letter or digit."""
    words = " ".join(text.split())
    if len(words) > MAX_QUERY_TEXT:
        cut = words[: MAX_QUERY_TEXT + 1]
        words = cut[: cut.rfind(" ")] if " " in cut else words[:MAX_QUERY_TEXT]
    return words if any(c.isalnum() for c in words) else ""


def _distance(raw: dict[str, Any]) -> float | None:
    """The cosine distance of a hybrid result the vector search matched (``None``: keyword only)."""
    value = (raw.get("scores") or {}).get("vectorDistance", raw.get("distance"))
    return None if value is None else float(value)


def metadata_filter(flt: SearchFilter, *, enabled: bool | None = True) -> dict[str, Any]:
    """The S3 Vectors filter document for a search filter (``$and`` of ``$eq`` clauses; the owners
    a search may see, ``flt.partitions``, are one ``$eq`` or, for several workspaces, one ``$in``)."""
    owners = flt.partitions
    owner = {"$eq": owners[0]} if len(owners) == 1 else {"$in": list(owners)}
    clauses: list[dict[str, Any]] = [{"owner": owner}]
    if enabled is not None:
        clauses.append({"enabled": {"$eq": enabled}})
    if flt.collection is not None:
        clauses.append({"collection": {"$eq": flt.collection}})
    if flt.document_id is not None:
        clauses.append({"document_id": {"$eq": flt.document_id}})
    return {"$and": clauses}


def record_metadata(r: VectorRecord) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "owner": r.owner,
        "document_id": r.document_id,
        "collection": r.collection,
        "chunk_index": r.chunk_index,
        "enabled": r.enabled,
        "text": r.text,
    }
    return {k: v for k, v in meta.items() if v is not None}


class S3VectorsIndex:
    """``VectorIndex`` on one S3 Vectors index; ``client`` is a boto3 ``s3vectors`` client (or a
    test double with the same methods and shapes)."""

    def __init__(self, client: Any, bucket: str, index: str, dimension: int) -> None:
        self._client = client
        self.bucket = bucket
        self.index = index
        self.dimension = dimension

    @classmethod
    def connect(cls, *, bucket: str, index: str, region: str, dimension: int) -> S3VectorsIndex:
        import boto3

        return cls(boto3.session.Session().client("s3vectors", region_name=region), bucket, index, dimension)

    # ------------------------------------------------------------------ helpers
    def _where(self) -> dict[str, str]:
        return {"vectorBucketName": self.bucket, "indexName": self.index}

    def _check(self, vector: Sequence[float]) -> list[float]:
        if len(vector) != self.dimension:
            raise ValueError(f"vector has dimension {len(vector)}, the index expects {self.dimension}")
        return _unit(vector)

    def _query(
        self, vector: list[float], flt: dict[str, Any], k: int, *, metadata: bool
    ) -> list[dict[str, Any]]:
        resp = self._client.query_vectors(
            **self._where(),
            topK=k,
            queryVector={"float32": vector},
            filter=flt,
            returnMetadata=metadata,
            returnDistance=metadata,
        )
        return list(resp.get("vectors", []))

    def _probe(self) -> list[float]:
        """Any valid query vector, for queries whose ranking does not matter (they only list keys)."""
        return [1.0] + [0.0] * (self.dimension - 1)

    def _document_vectors(
        self, owner: str, document_id: str, tags: Sequence[str], *, data: bool
    ) -> Iterator[list[dict[str, Any]]]:
        """The document's vectors by their known keys: for the untagged ids and each version tag,
        :data:`GET_BATCH` chunk indexes per call until a call finds none; only ``owner``'s."""
        for tag in [None, *dict.fromkeys(tags)]:
            start = 0
            while True:
                keys = [tagged_note_id(document_id, i, tag) for i in range(start, start + GET_BATCH)]
                got = self._client.get_vectors(
                    **self._where(), keys=keys, returnData=data, returnMetadata=True
                )
                vectors = list(got.get("vectors", []))
                if not vectors:
                    break
                yield [v for v in vectors if (v.get("metadata") or {}).get("owner") == owner]
                start += GET_BATCH

    def _range_vectors(
        self, owner: str, document_id: str, tags: Sequence[str], chunks: tuple[int, int]
    ) -> Iterator[list[dict[str, Any]]]:
        """The document's vectors of chunk indexes ``start <= i < stop`` (one step of finalize), by
        their keys: for the untagged ids and each version tag, :data:`GET_BATCH` keys per call."""
        start, stop = int(chunks[0]), int(chunks[1])
        for tag in [None, *dict.fromkeys(tags)]:
            for first in range(start, stop, GET_BATCH):
                keys = [
                    tagged_note_id(document_id, i, tag) for i in range(first, min(first + GET_BATCH, stop))
                ]
                got = self._client.get_vectors(
                    **self._where(), keys=keys, returnData=True, returnMetadata=True
                )
                yield [v for v in got.get("vectors", []) if (v.get("metadata") or {}).get("owner") == owner]

    def _delete_keys(self, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), DELETE_BATCH):
            self._client.delete_vectors(**self._where(), keys=list(keys[start : start + DELETE_BATCH]))

    def _hit(self, raw: dict[str, Any]) -> Hit:
        meta = raw.get("metadata") or {}
        cosine = 1.0 - float(raw.get("distance", 1.0))
        return Hit(
            id=raw["key"],
            score=cosine,
            text=str(meta.get("text", "")),
            document_id=meta.get("document_id"),
            chunk_index=int(meta.get("chunk_index") or 0),
            collection=meta.get("collection"),
            similarity=cosine,
            owner=meta.get("owner"),
        )

    # ------------------------------------------------------------------ VectorIndex
    def upsert(self, records: Sequence[VectorRecord]) -> None:
        vectors = [self._check(r.vector) for r in records]  # validate everything before sending
        latest = {r.id: {"key": r.id, "data": {"float32": v}, "metadata": record_metadata(r)}
                  for r, v in zip(records, vectors, strict=True)}  # fmt: skip
        items = list(latest.values())
        for start in range(0, len(items), PUT_BATCH):
            self._client.put_vectors(**self._where(), vectors=items[start : start + PUT_BATCH])

    def search(self, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        query = self._check(vector)
        if k <= 0:
            return []
        raws = self._query(query, metadata_filter(flt), min(k, MAX_TOP_K), metadata=True)
        return sorted((self._hit(raw) for raw in raws), key=lambda h: -h.score)

    def hybrid_search(self, text: str, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        """BM25 over the chunk text and cosine over the vectors, fused by the service (RRF)."""
        query = self._check(vector)
        words = query_text(text)
        if k <= 0:
            return []
        if not words:  # nothing to match by keyword (punctuation only): the vector ranking
            return self.search(vector, flt, k)
        resp = self._client.query_vectors(
            **self._where(),
            topK=min(k, MAX_TOP_K),
            queryVector={"float32": query},
            queryTexts=[{"text": words, "metadataKey": TEXT_KEY}],
            filter=metadata_filter(flt),
            returnMetadata=True,
            returnDistance=True,
            returnScores=True,
        )
        raws = list(resp.get("vectors", []))
        cosines = {raw["key"]: 1.0 - float(d) for raw in raws if (d := _distance(raw)) is not None}
        keyword_only = [raw["key"] for raw in raws if raw["key"] not in cosines]
        cosines.update(self._cosines(keyword_only, query))
        hits = []
        for rank, raw in enumerate(raws):
            fused = (raw.get("scores") or {}).get("fused")
            hit = self._hit(raw)
            hit.similarity = cosines.get(raw["key"], 0.0)
            # the service's order is the ranking; without a fused score, keep it by rank
            hit.score = float(fused) if fused is not None else 1.0 / (60 + rank + 1)
            hits.append(hit)
        return hits

    def _cosines(self, keys: Sequence[str], query: list[float]) -> dict[str, float]:
        """Cosine to ``query`` of the stored vectors of ``keys`` (one ``GetVectors`` per 100 keys)."""
        out: dict[str, float] = {}
        for start in range(0, len(keys), GET_BATCH):
            got = self._client.get_vectors(
                **self._where(), keys=list(keys[start : start + GET_BATCH]), returnData=True
            )
            for v in got.get("vectors", []):
                stored = _unit(v["data"]["float32"])
                out[v["key"]] = sum(a * b for a, b in zip(stored, query, strict=True))
        return out

    def delete(self, ids: Sequence[str], *, settled: bool = False) -> None:  # strongly consistent
        self._delete_keys(list(dict.fromkeys(ids)))

    def delete_document(self, owner: str, document_id: str, *, tags: Sequence[str] = ()) -> int:
        found = self._document_vectors(owner, document_id, tags, data=False)
        keys = [v["key"] for batch in found for v in batch]
        self._delete_keys(keys)
        return len(keys)

    def set_enabled(
        self,
        owner: str,
        document_id: str,
        enabled: bool,
        *,
        chunk_count: int | None = None,
        tags: Sequence[str] = (),
        chunks: tuple[int, int] | None = None,
    ) -> None:  # strongly consistent: searchable once written
        rewritten: list[dict[str, Any]] = []
        found_vectors = (
            self._document_vectors(owner, document_id, tags, data=True)
            if chunks is None
            else self._range_vectors(owner, document_id, tags, chunks)
        )
        for found in found_vectors:
            rewritten += [
                {"key": v["key"], "data": v["data"], "metadata": {**v["metadata"], "enabled": enabled}}
                for v in found
                if v["metadata"].get("enabled") != enabled
            ]
            while len(rewritten) >= PUT_BATCH:
                self._client.put_vectors(**self._where(), vectors=rewritten[:PUT_BATCH])
                rewritten = rewritten[PUT_BATCH:]
        if rewritten:
            self._client.put_vectors(**self._where(), vectors=rewritten)

    def count(self, owner: str) -> int:
        """Enabled vectors of ``owner``: exact up to :data:`MAX_TOP_K`, that number beyond."""
        return len(
            self._query(self._probe(), metadata_filter(SearchFilter(owner=owner)), MAX_TOP_K, metadata=False)
        )
