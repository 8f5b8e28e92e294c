"""OpenSearch vector index (Serverless vector collection ``aoss`` or a managed domain ``es``).

Mapping (created idempotently on first use): ``vector`` is a ``knn_vector`` (HNSW, engine ``faiss``,
``space_type: innerproduct``), ``text`` is ``text`` (BM25 for hybrid search), ``note_id``,
``document_id``, ``owner``, ``collection`` are ``keyword``, ``chunk_index`` ``integer``, ``enabled``
``boolean``; ``index.knn: true``.

Why inner product: vectors are stored and queried unit-length, so the inner product *is* the cosine,
and faiss supports ``innerproduct`` everywhere (``cosinesimil`` with faiss only from 2.19). The k-NN
score is ``1 + ip`` (ip ≥ 0) or ``1 / (1 - ip)``; :func:`score_to_cosine` inverts it.

Filters (owner, enabled, collection, document id) go *inside* the ``knn`` clause as an efficient
k-NN ``filter``, so the top ``k`` are found among the allowed vectors rather than filtered after.

Document ids: a managed domain (``es``) indexes each vector with ``_id = note id``. Serverless vector
collections take no custom ids (nor upserts), so for ``aoss`` the note id is the ``note_id`` field:
upserts, deletes and ``set_enabled`` search for the server ids and send deletes and re-indexed
documents in ``_bulk`` (the domain path uses ``_delete_by_query``/``_update_by_query``). A retried
batch may leave a second copy of a chunk there: :mod:`~ragchat.adapters.aws.opensearch_copies`.

Hybrid search: a ``hybrid`` query (``match`` on ``text`` + the filtered ``knn``) through a search
pipeline with the ``normalization-processor`` (min-max, weighted arithmetic mean: keyword 0.3,
vector 0.7), created idempotently. If the cluster cannot create search pipelines, the adapter runs
the two queries and fuses them by reciprocal rank (k=60) itself. Either way each hit also carries
``similarity``, the exact cosine similarity computed from the stored vector, for gating.

Sleeping collections (a NextGen collection group at 0 OCU): queries retry 503/429/timeouts with
backoff inside a deadline (``wakeup.WakePolicy``); writes try once and raise
``wakeup.VectorIndexWaking``, which the state machine retries. The client never retries itself
(``max_retries=0``). ``_bulk`` partial failures raise :class:`IndexingError` naming every failed note
id. Request limits (:mod:`~ragchat.adapters.aws.opensearch_bulk`): ``_bulk`` bodies ≤ 5 MiB (a 413
splits a request; a Serverless flip keeps each chunk's delete and re-index together), ``terms``
lists ≤ 65,536 note ids (longer ones go in batches).

READY means searchable: on Serverless (near-real-time) ``set_enabled(…, chunk_count=n)`` and
``delete(…, settled=True)`` wait, bounded (:mod:`ragchat.adapters.aws.opensearch_searchable`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from ragchat.adapters.aws.opensearch_bodies import (
    HYBRID_PIPELINE,
    filter_clauses,
    index_body,
    owned_query,
    pipeline_body,
)
from ragchat.adapters.aws.opensearch_bulk import (
    MAX_BULK_BYTES,
    MAX_TERMS,
    bulk_failures,
    is_action,
    request_actions,
    term_batches,
    too_large,
)
from ragchat.adapters.aws.opensearch_copies import flip_units, one_per_note
from ragchat.adapters.aws.opensearch_searchable import await_searchable, version_query
from ragchat.adapters.aws.wakeup import WakePolicy
from ragchat.domain.models import Hit, SearchFilter, VectorRecord
from ragchat.domain.retrieval import rrf_scores

PAGE = 1000
# With the source (a 1024-d vector is ~21 KB of JSON): pages of ~5 MB, never the whole document.
SOURCE_PAGE = 250
_SOURCE_FIELDS = ["note_id", "text", "owner", "document_id", "chunk_index", "collection", "enabled"]


class IndexingError(RuntimeError):
    """Some records were not stored; ``failed`` maps note id → reason."""

    def __init__(self, failed: dict[str, str]) -> None:
        self.failed = failed
        sample = "; ".join(f"{k}: {v}" for k, v in list(failed.items())[:5])
        super().__init__(f"OpenSearch did not store {len(failed)} vector(s): {sample}")


def score_to_cosine(score: float) -> float:
    """Invert the faiss inner-product score (``1 + ip`` for ip ≥ 0, ``1 / (1 - ip)`` for ip < 0)."""
    return score - 1.0 if score >= 1.0 else 1.0 - 1.0 / score


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(float(x) * float(x) for x in vector))
    return [float(x) / norm for x in vector] if norm else [0.0 for _ in vector]


class OpenSearchVectorIndex:
    """``VectorIndex`` on OpenSearch through opensearch-py (client built by :meth:`connect`, or
    passed in ready-made by tests)."""

    SERVICES: ClassVar[tuple[str, ...]] = ("aoss", "es")

    def __init__(
        self,
        client: Any,
        index: str,
        dimension: int,
        *,
        service: str = "es",
        refresh: bool | None = None,
        wake: WakePolicy | None = None,
        searchable_wait_s: float = 60.0,
        max_bulk_bytes: int = MAX_BULK_BYTES,
        max_terms: int = MAX_TERMS,
    ) -> None:
        if service not in self.SERVICES:
            raise ValueError(f"service must be one of {self.SERVICES}, not {service!r}")
        self._client = client
        self.index = index
        self.dimension = dimension
        self.service = service
        self.server_ids = service == "aoss"
        # Serverless refreshes on its own schedule and rejects explicit refreshes.
        self.refresh = (service == "es") if refresh is None else refresh
        self._index_ready = False
        self._pipeline: bool | None = None  # None: not tried yet; False: unsupported → client-side RRF
        self._wake = wake or WakePolicy()
        self.searchable_wait_s = searchable_wait_s
        self.max_bulk_bytes = max_bulk_bytes
        self.max_terms = max_terms
        # writes: one attempt; a wake error becomes VectorIndexWaking for the state machine's Retry
        self._once = WakePolicy(budget_s=0.0, clock=self._wake.clock, sleep=self._wake.sleep)

    @classmethod
    def connect(
        cls, *, endpoint: str, index: str, service: str, region: str, dimension: int
    ) -> OpenSearchVectorIndex:
        """Build a SigV4-signed client (service ``aoss`` or ``es``) with the Lambda's credentials."""
        import boto3
        from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection

        host = endpoint.removeprefix("https://").removeprefix("http://").rstrip("/")
        credentials = boto3.session.Session().get_credentials()
        client = OpenSearch(
            hosts=[{"host": host, "port": 443}],
            http_auth=AWSV4SignerAuth(credentials, region, service),
            use_ssl=True,
            verify_certs=True,
            connection_class=RequestsHttpConnection,
            pool_maxsize=20,
            timeout=30,
            max_retries=0,  # WakePolicy owns retries (backoff inside a deadline)
        )
        return cls(client, index, dimension, service=service)

    # ------------------------------------------------------------------ helpers
    def _check(self, vector: Sequence[float]) -> list[float]:
        if len(vector) != self.dimension:
            raise ValueError(f"vector has dimension {len(vector)}, the index expects {self.dimension}")
        return _unit(vector)

    def ensure_index(self) -> None:
        if self._index_ready:
            return
        if not self._client.indices.exists(index=self.index):
            from opensearchpy.exceptions import RequestError

            try:
                self._client.indices.create(index=self.index, body=index_body(self.dimension))
            except RequestError as exc:  # created meanwhile by another Lambda: fine
                if "resource_already_exists_exception" not in str(exc.error):
                    raise
        self._index_ready = True

    def _refresh_params(self) -> dict[str, Any]:
        return {"refresh": "true"} if self.refresh else {}

    def _bulk(self, lines: list[dict[str, Any]], *, ids: list[str | None]) -> None:
        """Send NDJSON; ``ids[i]`` names the note of the i-th action (None: a delete we tolerate 404 on)."""
        self._bulk_units([[action] for action in request_actions(lines, ids)])

    def _bulk_units(self, units: list[list[tuple[str, str | None]]]) -> None:
        """Send ``units`` (each a list of (NDJSON text, note id) actions that go in one request) in
        requests of at most ``max_bulk_bytes``; raise :class:`IndexingError` with every failure."""
        failed: dict[str, str] = {}
        batch: list[list[tuple[str, str | None]]] = []
        size = 0
        for unit in units:
            unit_size = sum(len(text.encode("utf-8")) for text, _ in unit)
            if batch and size + unit_size > self.max_bulk_bytes:
                failed.update(self._send_bulk(batch))
                batch, size = [], 0
            batch.append(unit)
            size += unit_size
        if batch:
            failed.update(self._send_bulk(batch))
        if failed:
            raise IndexingError(failed)

    def _send_bulk(self, units: list[list[tuple[str, str | None]]]) -> dict[str, str]:
        """One ``_bulk`` request; one the service finds too large is split in two and resent."""
        from opensearchpy.exceptions import TransportError

        actions = [action for unit in units for action in unit]
        try:
            resp = self._client.bulk(body="".join(text for text, _ in actions), params=self._refresh_params())
        except TransportError as exc:
            if not too_large(exc):
                raise
            if len(units) == 1:
                return {note or "?": f"{exc.status_code} the document is over the request size limit"
                        for _, note in actions}  # fmt: skip
            half = len(units) // 2
            return {**self._send_bulk(units[:half]), **self._send_bulk(units[half:])}
        return bulk_failures(actions, resp)

    def _doc(self, r: VectorRecord, vector: list[float]) -> dict[str, Any]:
        return {
            "note_id": r.id,
            "vector": vector,
            "text": r.text,
            "owner": r.owner,
            "document_id": r.document_id,
            "chunk_index": r.chunk_index,
            "collection": r.collection,
            "enabled": r.enabled,
        }

    def _scan(self, query: dict[str, Any], *, with_source: bool) -> Iterator[dict[str, Any]]:
        """Every matching document, paged with ``search_after`` on ``note_id``: one search per batch of
        at most ``max_terms`` values when ``query`` holds a longer ``terms`` list."""
        for part in self._term_batches(query):
            yield from self._scan_part(part, with_source=with_source)

    def _scan_part(self, query: dict[str, Any], *, with_source: bool) -> Iterator[dict[str, Any]]:
        after: list[Any] | None = None
        page = SOURCE_PAGE if with_source else PAGE
        while True:
            body: dict[str, Any] = {
                "size": page,
                "query": query,
                "sort": [{"note_id": "asc"}],
                "_source": True if with_source else ["note_id"],
            }
            if after is not None:
                body["search_after"] = after
            hits = self._client.search(index=self.index, body=body)["hits"]["hits"]
            yield from hits
            if len(hits) < page:
                return
            after = hits[-1]["sort"]

    def _term_batches(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        return term_batches(query, self.max_terms)

    def _count_distinct(self, query: dict[str, Any]) -> int:
        """How many distinct note ids match (a retried batch may leave two copies: opensearch_copies)."""
        return len({h["_source"]["note_id"] for h in self._scan(query, with_source=False)})

    def _count_matching(self, query: dict[str, Any]) -> int:
        return sum(
            int(self._client.count(index=self.index, body={"query": q})["count"])
            for q in self._term_batches(query)
        )

    # ------------------------------------------------------------------ VectorIndex
    def upsert(self, records: Sequence[VectorRecord]) -> None:
        vectors = [self._check(r.vector) for r in records]  # validate everything before sending
        if records:
            self._once.run("upsert", lambda _: self._upsert(records, vectors))

    def _upsert(self, records: Sequence[VectorRecord], vectors: list[list[float]]) -> None:
        self.ensure_index()
        latest = {r.id: (r, v) for r, v in zip(records, vectors, strict=True)}
        lines: list[dict[str, Any]] = []
        ids: list[str | None] = []
        if self.server_ids:
            old = self._scan({"terms": {"note_id": list(latest)}}, with_source=False)
            for hit in old:
                lines.append({"delete": {"_index": self.index, "_id": hit["_id"]}})
                ids.append(None)
        for note_id, (r, v) in latest.items():
            action: dict[str, Any] = {"_index": self.index}
            if not self.server_ids:
                action["_id"] = note_id
            lines += [{"index": action}, self._doc(r, v)]
            ids += [note_id, note_id]
        # ids is per line; _bulk items are per action: keep the action lines' ids only
        self._bulk(lines, ids=[i for i, line in zip(ids, lines, strict=True) if is_action(line)])

    def _knn(self, vector: list[float], flt: SearchFilter, k: int) -> dict[str, Any]:
        return {
            "knn": {"vector": {"vector": vector, "k": k, "filter": {"bool": {"filter": filter_clauses(flt)}}}}
        }

    def _hit(self, raw: dict[str, Any], score: float, similarity: float | None) -> Hit:
        src = raw.get("_source", {})
        return Hit(
            id=src.get("note_id") or raw["_id"],
            score=score,
            text=src.get("text", ""),
            document_id=src.get("document_id"),
            chunk_index=int(src.get("chunk_index") or 0),
            collection=src.get("collection"),
            similarity=similarity,
            owner=src.get("owner"),
        )

    def search(self, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        query = self._check(vector)
        return self._wake.run("search", lambda timeout: self._search(query, flt, k, timeout))

    def _search(self, query: list[float], flt: SearchFilter, k: int, timeout: float | None) -> list[Hit]:
        if k <= 0 or not self._exists(timeout):
            return []
        body = {"size": k, "_source": _SOURCE_FIELDS, "query": self._knn(query, flt, k)}
        hits = self._client.search(index=self.index, body=body, **_timeout(timeout))["hits"]["hits"]
        out = []
        for raw in one_per_note(hits):
            cosine = score_to_cosine(float(raw["_score"]))
            out.append(self._hit(raw, cosine, cosine))
        return out

    def _exists(self, timeout: float | None = None) -> bool:
        if not self._index_ready:
            if not self._client.indices.exists(index=self.index, **_timeout(timeout)):
                return False
            self._index_ready = True
        return True

    def _ensure_pipeline(self, timeout: float | None = None) -> bool:
        if self._pipeline is None:
            from opensearchpy.exceptions import TransportError

            try:
                self._client.transport.perform_request(
                    "PUT", f"/_search/pipeline/{HYBRID_PIPELINE}", body=pipeline_body(), timeout=timeout
                )
                self._pipeline = True
            except TransportError as exc:
                if exc.status_code not in (400, 401, 403, 404, 405):
                    raise
                self._pipeline = False
        return self._pipeline

    def hybrid_search(self, text: str, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        query = self._check(vector)
        return self._wake.run("hybrid_search", lambda timeout: self._hybrid(text, query, flt, k, timeout))

    def _hybrid(
        self, text: str, query: list[float], flt: SearchFilter, k: int, timeout: float | None
    ) -> list[Hit]:
        if k <= 0 or not self._exists(timeout):
            return []
        match = {"bool": {"must": [{"match": {"text": {"query": text}}}], "filter": filter_clauses(flt)}}
        source = [*_SOURCE_FIELDS, "vector"]

        def similarity(raw: dict[str, Any]) -> float:
            stored = raw.get("_source", {}).get("vector") or []
            return sum(a * b for a, b in zip(query, _unit(stored), strict=False))

        if self._ensure_pipeline(timeout):
            body = {
                "size": k,
                "_source": source,
                "query": {"hybrid": {"queries": [match, self._knn(query, flt, k)]}},
            }
            params: dict[str, Any] = {"search_pipeline": HYBRID_PIPELINE, **_timeout(timeout)}
            hits = self._client.search(index=self.index, body=body, params=params)["hits"]["hits"]
            return [self._hit(raw, float(raw["_score"]), similarity(raw)) for raw in one_per_note(hits)]

        # No search pipelines here: run both queries and fuse by reciprocal rank.
        keyword = self._client.search(
            index=self.index, body={"size": k, "_source": source, "query": match}, **_timeout(timeout)
        )
        semantic = self._client.search(
            index=self.index,
            body={"size": k, "_source": source, "query": self._knn(query, flt, k)},
            **_timeout(timeout),
        )
        raws: dict[str, dict[str, Any]] = {}
        rankings: list[list[str]] = []
        for result in (keyword, semantic):
            ranking = []
            for raw in result["hits"]["hits"]:
                key = raw.get("_source", {}).get("note_id") or raw["_id"]
                raws.setdefault(key, raw)
                ranking.append(key)
            rankings.append(ranking)
        return [self._hit(raws[key], score, similarity(raws[key])) for key, score in rrf_scores(rankings)[:k]]

    def delete(self, ids: Sequence[str], *, settled: bool = False) -> None:
        """With ``settled`` on Serverless: wait, bounded, until none of ``ids`` is visible."""
        self._once.run("delete", lambda _: self._delete(ids))
        if settled and ids and not self.refresh:
            self._await_visible({"terms": {"note_id": list(ids)}}, f"{len(ids)} deleted chunk(s)", 0, None)

    def _delete(self, ids: Sequence[str]) -> None:
        if not ids or not self._exists():
            return
        if self.server_ids:
            found = list(self._scan({"terms": {"note_id": list(ids)}}, with_source=False))
            self._bulk(
                [{"delete": {"_index": self.index, "_id": h["_id"]}} for h in found], ids=[None] * len(found)
            )
        else:
            unique = list(dict.fromkeys(ids))
            self._bulk(
                [{"delete": {"_index": self.index, "_id": i}} for i in unique], ids=[None] * len(unique)
            )

    def delete_document(self, owner: str, document_id: str, *, tags: Sequence[str] = ()) -> int:
        return self._once.run("delete_document", lambda _: self._delete_document(owner, document_id))

    def _delete_document(self, owner: str, document_id: str) -> int:
        if not self._exists():
            return 0
        query = owned_query(owner, document_id)
        if self.server_ids:
            found = list(self._scan(query, with_source=False))
            self._bulk(
                [{"delete": {"_index": self.index, "_id": h["_id"]}} for h in found], ids=[None] * len(found)
            )
            return len(found)
        resp = self._client.delete_by_query(
            index=self.index, body={"query": query}, params={"conflicts": "proceed", **self._refresh_params()}
        )
        return int(resp.get("deleted", 0))

    def set_enabled(self, owner: str, document_id: str, enabled: bool, *, chunk_count: int | None = None,
                    tags: Sequence[str] = (), chunks: tuple[int, int] | None = None) -> None:  # fmt: skip
        """Flip every version's chunks (by ``document_id``, within ``chunks`` if given). On Serverless
        with ``chunk_count``: wait until the version's chunks (within ``chunks``) are all visible, flip,
        wait until exactly those are, all in the new state (:mod:`.opensearch_searchable`)."""
        wait = chunk_count is not None and not self.refresh
        first, stop = chunks if chunks is not None else (0, int(chunk_count or 0))
        stop = min(stop, int(chunk_count)) if chunk_count is not None else stop
        version = version_query(owned_query(owner, document_id), document_id, stop, tags, first)
        if wait:  # every chunk visible: a retried batch's second copy counts once (by note id)
            self._await_visible(version, document_id, stop - first, None, self._count_distinct)
        flip = owned_query(owner, document_id, chunks)
        self._once.run("set_enabled", lambda _: self._set_enabled(flip, enabled))
        if wait:  # exactly one copy of each, in the new state (the flip dropped any other copy)
            self._await_visible(version, document_id, stop - first, enabled)

    def _await_visible(self, query: dict[str, Any], label: str, count: int, enabled: bool | None,
                       counter: Callable[[dict[str, Any]], int] | None = None) -> None:  # fmt: skip
        await_searchable(  # bounded by searchable_wait_s; past it, TransientError (the state machine retries)
            counter or self._count_matching,
            query,
            label,
            count,
            enabled,
            budget_s=self.searchable_wait_s,
            clock=self._wake.clock,
            sleep=self._wake.sleep,
        )

    def _set_enabled(self, query: dict[str, Any], enabled: bool) -> None:
        if not self._exists():
            return
        if self.server_ids:
            self._flip_by_reindex(query, enabled)
            return
        script = {"source": "ctx._source.enabled = params.enabled", "lang": "painless"}
        body = {"query": query, "script": {**script, "params": {"enabled": enabled}}}
        self._client.update_by_query(
            index=self.index, body=body, params={"conflicts": "proceed", **self._refresh_params()}
        )

    def _flip_by_reindex(self, query: dict[str, Any], enabled: bool) -> None:
        """Serverless (no ``_update_by_query``, no custom ids): each chunk in the other state is deleted
        and indexed again with the flag flipped, its delete and re-index in the same ``_bulk``. Read
        ``SOURCE_PAGE`` chunks (vectors included) at a time and sent as soon as a request is full
        (``max_bulk_bytes``), so neither the memory nor a request grows with the document."""
        units: list[list[tuple[str, str | None]]] = []
        size = 0
        for unit in flip_units(self._scan(query, with_source=True), self.index, enabled):
            unit_size = sum(len(text.encode()) for text, _ in unit)
            if units and size + unit_size > self.max_bulk_bytes:
                self._bulk_units(units)
                units, size = [], 0
            units.append(unit)
            size += unit_size
        if units:
            self._bulk_units(units)

    def count(self, owner: str) -> int:
        return self._wake.run("count", lambda timeout: self._count(owner, timeout))

    def _count(self, owner: str, timeout: float | None) -> int:
        if not self._exists(timeout):
            return 0
        body = {"query": {"bool": {"filter": [{"term": {"owner": owner}}, {"term": {"enabled": True}}]}}}
        return int(self._client.count(index=self.index, body=body, **_timeout(timeout))["count"])


def _timeout(seconds: float | None) -> dict[str, Any]:
    """opensearch-py's per-request timeout keyword (absent: the client's default)."""
    return {"request_timeout": seconds} if seconds is not None else {}
