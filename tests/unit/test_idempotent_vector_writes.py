"""A batch written twice (a Step Functions retry of ``embed_index`` after its first write went through
but its answer was lost) leaves one copy of each chunk (issue 44, item 4d).

Every chunk has a deterministic id, its note id ``<documentId>-NNNNNv<tag>`` (document, chunk index,
version). S3 Vectors keys each vector by it, so a second ``PutVectors`` overwrites. A Serverless
vector collection refuses custom ``_id``s, so there the note id is the ``note_id`` field, and a
retry that comes before the collection refreshes cannot see the first write to replace it: the
adapter tells the copies apart by ``note_id`` when it finalizes (READY once every chunk is visible,
then one copy per chunk, every other deleted) and never returns a chunk twice from a search.
"""

from __future__ import annotations

from ragchat.adapters.aws.opensearch import OpenSearchVectorIndex
from ragchat.adapters.aws.s3vectors import S3VectorsIndex
from ragchat.adapters.aws.wakeup import WakePolicy
from ragchat.domain.ids import note_id, version_tags
from ragchat.domain.models import SearchFilter, VectorRecord

from tests.contract.fake_opensearch import FakeCluster
from tests.contract.fake_s3vectors import FakeS3Vectors
from tests.fakes import FakeClock

OWNER = "alice"
DIM = 8
CHUNKS = 20


def _batch(doc: str = "D1", *, enabled: bool = False) -> list[VectorRecord]:
    return [
        VectorRecord(
            id=note_id(doc, i, "v1"),
            vector=[1.0] + [(i + 1) / CHUNKS] * (DIM - 1),
            text=f"chunk {i}",
            owner=OWNER,
            document_id=doc,
            chunk_index=i,
            enabled=enabled,
        )
        for i in range(CHUNKS)
    ]


def _stored(cluster: FakeCluster) -> list[str]:
    return sorted(d["note_id"] for d in cluster.indices["notes"]["docs"].values())


def test_a_serverless_batch_written_twice_before_a_refresh_ends_ready_with_one_copy_per_chunk() -> None:
    cluster = FakeCluster(serverless=True, refresh_every=4)
    clock = FakeClock()
    index = OpenSearchVectorIndex(
        cluster.client(), "notes", DIM, service="aoss", wake=WakePolicy(clock=clock, sleep=clock.advance)
    )
    index.upsert(_batch())
    index.upsert(_batch())  # the retry: its search for earlier copies still sees the index as it was
    assert len(_stored(cluster)) == 2 * CHUNKS  # the collection holds both writes, as AOSS would

    index.set_enabled(OWNER, "D1", True, chunk_count=CHUNKS, tags=version_tags((), "v1"))  # finalize

    expected = sorted(note_id("D1", i, "v1") for i in range(CHUNKS))
    assert _stored(cluster) == expected  # one copy of each chunk, switched on
    for _ in range(8):  # refreshed: what a search sees
        cluster.searchable("notes")
    hits = index.search([1.0] * DIM, SearchFilter(owner=OWNER), 100)
    assert sorted(h.id for h in hits) == expected
    assert index.count(OWNER) == CHUNKS


def test_a_search_never_returns_a_chunk_twice_while_a_copy_is_still_visible() -> None:
    cluster = FakeCluster(serverless=True, refresh_every=4)
    index = OpenSearchVectorIndex(cluster.client(), "notes", DIM, service="aoss")
    index.upsert(_batch(enabled=True))
    index.upsert(_batch(enabled=True))
    for _ in range(8):
        cluster.searchable("notes")
    hits = index.search([1.0] * DIM, SearchFilter(owner=OWNER), 2 * CHUNKS)
    assert len(hits) == len({h.id for h in hits}) == CHUNKS


def test_an_s3_vectors_batch_written_twice_leaves_one_vector_per_chunk() -> None:
    fake = FakeS3Vectors("vec-bucket", "notes", DIM)
    index = S3VectorsIndex(fake, "vec-bucket", "notes", DIM)
    index.upsert(_batch(enabled=True))
    index.upsert(_batch(enabled=True))
    hits = index.search([1.0] * DIM, SearchFilter(owner=OWNER), 100)
    assert sorted(h.id for h in hits) == sorted(note_id("D1", i, "v1") for i in range(CHUNKS))
