"""READY means searchable on OpenSearch Serverless (issue 18): the fake cluster at the HTTP level with
a refresh lag (a write shows in searches only a few reads later); the pipeline's finalize returns
READY only once the new chunks are found, switched on, and no stale copy is — bounded, with an
injected clock."""

from __future__ import annotations

import pytest
from ragchat.adapters.aws.opensearch import OpenSearchVectorIndex
from ragchat.adapters.aws.wakeup import WakePolicy
from ragchat.config import load_settings
from ragchat.domain.errors import TransientError
from ragchat.domain.ids import note_id
from ragchat.domain.models import DocumentStatus, SearchFilter, VectorRecord
from ragchat.services.ingestion import IngestionService, IngestSteps

from tests.contract.fake_opensearch import FakeCluster
from tests.fakes import FakeBlobStore, FakeClock, FakeDocumentStore, FakeEmbedder, FakeLauncher

OWNER = "alice"
DIM = 8


def _index(cluster: FakeCluster, clock: FakeClock, **kw: float) -> OpenSearchVectorIndex:
    wake = WakePolicy(clock=clock, sleep=clock.advance)
    return OpenSearchVectorIndex(cluster.client(), "notes", DIM, service="aoss", wake=wake, **kw)


def _records(doc: str, n: int) -> list[VectorRecord]:
    return [
        VectorRecord(
            id=note_id(doc, i),
            vector=[1.0] + [i / n] * (DIM - 1),
            text=f"chunk {i}",
            owner=OWNER,
            document_id=doc,
            chunk_index=i,
            enabled=False,
        )
        for i in range(n)
    ]


def _seen(cluster: FakeCluster, doc: str) -> list[tuple[str, bool]]:
    """What a search sees of ``doc`` right now, without triggering a refresh."""
    visible = cluster.visible.get("notes", {})
    return sorted((d["note_id"], d["enabled"]) for d in visible.values() if d["document_id"] == doc)


def test_enabling_with_the_chunk_count_returns_once_every_chunk_is_searchable_and_switched_on() -> None:
    cluster = FakeCluster(serverless=True, refresh_every=4)
    clock = FakeClock()
    index = _index(cluster, clock)
    index.upsert(_records("D1", 130))
    assert len(_seen(cluster, "D1")) < 130  # the last writes are not visible yet

    started = clock()
    index.set_enabled(OWNER, "D1", True, chunk_count=130)

    assert _seen(cluster, "D1") == [(note_id("D1", i), True) for i in range(130)]
    assert 0 < clock() - started < 60  # it waited for refreshes, within its bound


def test_without_waiting_a_lagging_collection_would_leave_chunks_switched_off() -> None:
    """Why finalize passes the chunk count: the flip works from a search, which misses what the
    collection has not refreshed yet."""
    cluster = FakeCluster(serverless=True, refresh_every=50)
    index = _index(cluster, FakeClock())
    index.upsert(_records("D1", 130))
    index.set_enabled(OWNER, "D1", True)
    for _ in range(60):  # let refreshes happen
        cluster.searchable("notes")
    states = [enabled for _, enabled in _seen(cluster, "D1")]
    assert False in states


def test_a_collection_that_never_refreshes_fails_finalize_retryably_within_the_bound() -> None:
    cluster = FakeCluster(serverless=True, refresh_every=10_000)
    clock = FakeClock()
    index = _index(cluster, clock, searchable_wait_s=20.0)
    index.upsert(_records("D1", 5))
    started = clock()
    with pytest.raises(TransientError, match="not searchable after 20 s"):
        index.set_enabled(OWNER, "D1", True, chunk_count=5)
    assert clock() - started <= 20.0


def test_a_replaced_document_is_ready_only_when_its_new_chunks_are_found_and_the_old_ones_are_not() -> None:
    cluster = FakeCluster(serverless=True, refresh_every=3)
    clock = FakeClock()
    index = _index(cluster, clock)
    settings = load_settings({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})
    docs = FakeDocumentStore(clock=clock)
    blobs = FakeBlobStore()
    embedder = FakeEmbedder(dimension=DIM)
    steps = IngestSteps(docs, blobs, embedder, index, settings, clock=clock, batch_size=4)
    service = IngestionService(docs, blobs, FakeLauncher(run=None), settings, clock=clock)

    def ingest(text: str, doc_id: str | None = None) -> str:
        doc = service.submit(OWNER, text=text, title="Notes", **({"document_id": doc_id} if doc_id else {}))
        plan = steps.split(OWNER, doc.id, doc.version)
        for item in plan["batches"]:
            steps.embed_index(OWNER, doc.id, item["key"], doc.version)
        assert steps.finalize(OWNER, doc.id, plan["chunkCount"], doc.version)["status"] == "READY"
        return doc.id

    old = " ".join(f"old{i:04d}" for i in range(300))
    doc_id = ingest(old)
    first = docs.get_document(OWNER, doc_id)
    assert first is not None and first.status == DocumentStatus.READY
    assert _seen(cluster, doc_id) == [
        (note_id(doc_id, i, first.version), True) for i in range(first.chunk_count)
    ]

    new = " ".join(f"new{i:04d}" for i in range(120))
    assert ingest(new, doc_id) == doc_id
    second = docs.get_document(OWNER, doc_id)
    assert (
        second is not None
        and second.status == DocumentStatus.READY
        and second.chunk_count < first.chunk_count
    )
    visible = cluster.visible["notes"]
    texts = sorted(d["text"] for d in visible.values() if d["document_id"] == doc_id and d["enabled"])
    assert len(texts) == second.chunk_count
    assert all("new" in t and "old" not in t for t in texts)  # new chunks found, replaced ones not
    hits = index.search(embedder.embed_query("new0001"), SearchFilter(owner=OWNER), 50)
    assert {h.id for h in hits} == {note_id(doc_id, i, second.version) for i in range(second.chunk_count)}
