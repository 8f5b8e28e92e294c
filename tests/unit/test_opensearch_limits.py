"""OpenSearch's request limits, enforced by the HTTP-level fake (issue 29): a ``_bulk`` body over
10 MiB is answered 413 and a ``terms`` query over ``index.max_terms_count`` (65,536) 400. Finalize on
Serverless flips ``enabled`` by delete + re-index, vectors included: it must go in bounded requests,
and a document may have more chunks than one ``terms`` query may name."""

from __future__ import annotations

import json

import pytest
from opensearchpy.exceptions import TransportError
from ragchat.adapters.aws.opensearch import MAX_BULK_BYTES, MAX_TERMS, IndexingError, OpenSearchVectorIndex
from ragchat.domain.ids import tagged_note_id
from ragchat.domain.models import VectorRecord

from tests.contract.fake_opensearch import MAX_REQUEST_BYTES, MAX_TERMS_COUNT, FakeCluster

DIM = 1024  # Titan V2: a chunk's source is ~21 KB of JSON


def records(n: int, dim: int = DIM, tag: str = "abcd1234") -> list[VectorRecord]:
    return [
        VectorRecord(id=tagged_note_id("BOOK", i, tag), vector=[((i + j) % 7) - 3.0 for j in range(dim)],
                     text=f"chunk {i}", owner="alice", document_id="BOOK", chunk_index=i, enabled=False)
        for i in range(n)
    ]  # fmt: skip


def bulk_sizes(cluster: FakeCluster) -> list[int]:
    return [
        len(body.encode()) for method, path, _, body in cluster.requests if path.endswith("_bulk") and body
    ]


def test_the_fake_refuses_what_the_service_refuses() -> None:
    assert MAX_REQUEST_BYTES == 10 * 1024 * 1024 and MAX_TERMS_COUNT == 65_536
    client = FakeCluster(serverless=True).client()
    big = '{"index":{"_index":"notes"}}\n' + json.dumps({"text": "x" * MAX_REQUEST_BYTES}) + "\n"
    with pytest.raises(TransportError) as exc:
        client.bulk(body=big)
    assert exc.value.status_code == 413
    client.indices.create(index="notes", body={})
    with pytest.raises(TransportError) as exc:
        client.count(index="notes", body={"query": {"terms": {"note_id": [str(i) for i in range(65_537)]}}})
    assert exc.value.status_code == 400 and "max_terms_count" in str(exc.value)


def test_the_adapter_keeps_each_bulk_well_under_the_request_limit() -> None:
    assert MAX_BULK_BYTES <= MAX_REQUEST_BYTES // 2 and MAX_TERMS <= MAX_TERMS_COUNT


def test_finalize_on_serverless_flips_a_big_document_in_bounded_bulk_requests() -> None:
    """560 chunks of 1024-d vectors are ~12 MB to re-index: one ``_bulk`` was refused (413) and the
    document ended FAILED."""
    cluster = FakeCluster(serverless=True)
    index = OpenSearchVectorIndex(cluster.client(), "notes", DIM, service="aoss", searchable_wait_s=0)
    chunks = records(560)
    for start in range(0, len(chunks), 64):  # the embed steps' batches
        index.upsert(chunks[start : start + 64])
    cluster.requests.clear()
    index.set_enabled("alice", "BOOK", True, chunk_count=560, tags=["abcd1234"])
    sizes = bulk_sizes(cluster)
    assert sum(sizes) > MAX_REQUEST_BYTES  # more than one request's worth, split
    assert max(sizes) <= MAX_BULK_BYTES and not cluster.refused
    assert len(sizes) <= -(-sum(sizes) // MAX_BULK_BYTES) + 1  # full requests: about as few as can be
    docs = cluster.indices["notes"]["docs"].values()
    assert len(docs) == 560 and all(d["enabled"] for d in docs)  # every chunk once, switched on
    assert sorted(d["chunk_index"] for d in docs) == list(range(560))
    assert all(len(d["vector"]) == DIM for d in docs)


def test_a_request_the_service_still_finds_too_large_is_split_and_resent() -> None:
    """The service's limit may be lower than ours (a 413 for a request under ``max_bulk_bytes``)."""
    cluster = FakeCluster(serverless=True, max_request_bytes=600_000)
    index = OpenSearchVectorIndex(cluster.client(), "notes", DIM, service="aoss", searchable_wait_s=0)
    index.upsert(records(64))  # ~1.3 MB: refused once, then sent in halves and quarters
    assert (413, "/_bulk") in cluster.refused
    assert len(cluster.indices["notes"]["docs"]) == 64


def test_one_document_over_the_limit_alone_is_an_indexing_error_naming_it() -> None:
    cluster = FakeCluster(serverless=True, max_request_bytes=10_000)
    index = OpenSearchVectorIndex(cluster.client(), "notes", DIM, service="aoss", searchable_wait_s=0)
    with pytest.raises(IndexingError) as exc:
        index.upsert(records(2))
    assert set(exc.value.failed) == {
        tagged_note_id("BOOK", 0, "abcd1234"),
        tagged_note_id("BOOK", 1, "abcd1234"),
    }
    assert "413" in exc.value.failed[tagged_note_id("BOOK", 0, "abcd1234")]


def test_a_document_with_more_chunks_than_a_terms_query_may_name_is_finalized_and_deleted() -> None:
    """At the real 65,536 limit, a delete of 70,000 note ids (the swap's delete of a previous version,
    waiting until none is visible) and its count go in batches; the rest of the path at a small limit
    (the fake's and the adapter's alike), with a finalize that waits for every chunk by note id."""
    cluster = FakeCluster(serverless=True)
    index = OpenSearchVectorIndex(cluster.client(), "notes", 4, service="aoss", searchable_wait_s=0)
    index.upsert(records(3, dim=4))
    ids = [tagged_note_id("BOOK", i, "abcd1234") for i in range(70_000)]
    index.delete(ids, settled=True)
    assert not cluster.indices["notes"]["docs"] and not cluster.refused

    small = FakeCluster(serverless=True, max_terms_count=100)
    index = OpenSearchVectorIndex(
        small.client(), "notes", 4, service="aoss", searchable_wait_s=0, max_terms=100
    )
    chunks = records(250, dim=4)
    index.upsert(chunks[:100])
    index.upsert(chunks[100:200])
    index.upsert(chunks[200:])
    index.set_enabled("alice", "BOOK", True, chunk_count=250, tags=["abcd1234"])
    docs = small.indices["notes"]["docs"].values()
    assert len(docs) == 250 and all(d["enabled"] for d in docs) and not small.refused
    index.delete([c.id for c in chunks], settled=True)
    assert not small.indices["notes"]["docs"] and not small.refused


def test_a_throttled_bulk_is_a_wake_up_error_the_state_machine_retries() -> None:
    from ragchat.adapters.aws.wakeup import VectorIndexWaking

    cluster = FakeCluster(serverless=True)
    index = OpenSearchVectorIndex(cluster.client(), "notes", 4, service="aoss", searchable_wait_s=0)
    index.upsert(records(3, dim=4))
    cluster.wake_failures = [429]
    with pytest.raises(VectorIndexWaking):
        index.set_enabled("alice", "BOOK", True)


def test_a_400_is_split_only_when_it_is_about_the_request_size() -> None:
    from opensearchpy.exceptions import RequestError
    from ragchat.adapters.aws.opensearch_bulk import too_large

    assert too_large(TransportError(413, "Request Entity Too Large", None))
    assert too_large(RequestError(400, "illegal_argument_exception", {"error": "request size exceeded"}))
    fields = {"error": {"reason": "Limit of total fields [1000] has been exceeded"}}
    assert not too_large(RequestError(400, "illegal_argument_exception", fields))
