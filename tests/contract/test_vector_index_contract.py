"""VectorIndex contract: every adapter registered in ``conftest.VECTOR_INDEXES`` must pass.

Vectors have ``env.dimension`` (8) components; ``axis(i)`` is the unit vector along axis i, so the
cosine similarities in these tests are known exactly.
"""

from __future__ import annotations

import math

import pytest
from ragchat.domain.models import SearchFilter, VectorRecord

DIM = 8


def axis(i: int, tilt: float = 0.0, towards: int | None = None) -> list[float]:
    v = [0.0] * DIM
    v[i] = 1.0
    if towards is not None:
        v[towards] = tilt
    return v


def rec(
    id_: str,
    vector: list[float],
    *,
    owner: str = "alice",
    document_id: str | None = "doc-1",
    chunk_index: int = 0,
    collection: str | None = None,
    enabled: bool = True,
    text: str | None = None,
) -> VectorRecord:
    return VectorRecord(
        id=id_,
        vector=vector,
        text=text if text is not None else f"text of {id_}",
        owner=owner,
        document_id=document_id,
        chunk_index=chunk_index,
        collection=collection,
        enabled=enabled,
    )


ALICE = SearchFilter(owner="alice")


def test_dimension_is_exposed(vector_index):
    assert vector_index.dimension == DIM


def test_search_ranks_by_cosine_and_returns_texts_and_metadata(vector_index):
    vector_index.upsert(
        [
            rec("near", axis(0, 0.1, 1), chunk_index=2, collection="work", text="the nearest note"),
            rec("mid", axis(0, 1.0, 1)),
            rec("far", axis(1)),
            rec("opposite", [-x for x in axis(0)]),
        ]
    )
    hits = vector_index.search(axis(0), ALICE, 3)
    assert [h.id for h in hits] == ["near", "mid", "far"]
    assert hits[0].score == pytest.approx(1 / math.sqrt(1.01), abs=1e-4)
    assert hits[1].score == pytest.approx(1 / math.sqrt(2), abs=1e-4)
    assert hits[2].score == pytest.approx(0.0, abs=1e-4)
    assert hits[0].text == "the nearest note"
    assert (hits[0].document_id, hits[0].chunk_index, hits[0].collection) == ("doc-1", 2, "work")


def test_k_larger_than_the_candidates_returns_them_all(vector_index):
    vector_index.upsert([rec("a", axis(0)), rec("b", axis(1))])
    assert {h.id for h in vector_index.search(axis(0), ALICE, 10)} == {"a", "b"}
    assert vector_index.search(axis(0), SearchFilter(owner="nobody"), 10) == []


def test_another_owners_vectors_are_never_returned(vector_index):
    vector_index.upsert([rec("mine", axis(1)), rec("doc-b-00000", axis(0), owner="bob", document_id="doc-b")])
    assert [h.id for h in vector_index.search(axis(0), ALICE, 5)] == ["mine"]
    assert [h.id for h in vector_index.hybrid_search("text of doc-b-00000", axis(0), ALICE, 5)] == ["mine"]
    assert vector_index.count("alice") == 1 and vector_index.count("bob") == 1
    # deleting "their" document as alice removes nothing
    assert vector_index.delete_document("alice", "doc-b") == 0
    vector_index.set_enabled("alice", "doc-b", False)
    assert [h.id for h in vector_index.search(axis(0), SearchFilter(owner="bob"), 5)] == ["doc-b-00000"]


def test_disabled_vectors_are_excluded_and_not_counted(vector_index):
    vector_index.upsert([rec("on", axis(1)), rec("off", axis(0), document_id="doc-2", enabled=False)])
    assert [h.id for h in vector_index.search(axis(0), ALICE, 5)] == ["on"]
    assert vector_index.count("alice") == 1


def test_collection_and_document_filters(vector_index):
    vector_index.upsert(
        [
            rec("w1", axis(0), collection="work", document_id="d1"),
            rec("w2", axis(1), collection="work", document_id="d2"),
            rec("h1", axis(0), collection="home", document_id="d3"),
            rec("n1", axis(0), collection=None, document_id="d4"),
        ]
    )
    work = SearchFilter(owner="alice", collection="work")
    assert [h.id for h in vector_index.search(axis(0), work, 5)] == ["w1", "w2"]
    d2 = SearchFilter(owner="alice", document_id="d2")
    assert [h.id for h in vector_index.search(axis(0), d2, 5)] == ["w2"]
    both = SearchFilter(owner="alice", collection="home", document_id="d2")
    assert vector_index.search(axis(0), both, 5) == []
    unknown = SearchFilter(owner="alice", collection="nope")
    assert vector_index.search(axis(0), unknown, 5) == []
    assert {h.id for h in vector_index.search(axis(0), ALICE, 5)} == {"w1", "w2", "h1", "n1"}


def test_set_enabled_toggles_a_whole_document(vector_index):
    # Vector ids are note ids, <documentId>-<chunk index>: the S3 Vectors adapter finds a document's
    # vectors by these keys.
    vector_index.upsert(
        [rec("A-00000", axis(0), document_id="A", chunk_index=0), rec("A-00001", axis(0, 0.5, 1),
         document_id="A", chunk_index=1), rec("B-00000", axis(1), document_id="B")]
    )  # fmt: skip
    vector_index.set_enabled("alice", "A", False)
    assert [h.id for h in vector_index.search(axis(0), ALICE, 5)] == ["B-00000"]
    assert vector_index.count("alice") == 1
    vector_index.set_enabled("alice", "A", True)
    assert [h.id for h in vector_index.search(axis(0), ALICE, 5)] == ["A-00000", "A-00001", "B-00000"]
    assert vector_index.count("alice") == 3


def test_upsert_with_the_same_id_overwrites(vector_index):
    vector_index.upsert([rec("n", axis(0), text="old text")])
    vector_index.upsert([rec("n", axis(1), text="new text")])
    hits = vector_index.search(axis(1), ALICE, 5)
    assert [(h.id, h.text) for h in hits] == [("n", "new text")]
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert vector_index.count("alice") == 1


def test_delete_by_ids(vector_index):
    vector_index.upsert([rec("a", axis(0)), rec("b", axis(1)), rec("c", axis(2))])
    vector_index.delete(["a", "c", "missing"])
    assert [h.id for h in vector_index.search(axis(0), ALICE, 5)] == ["b"]
    vector_index.delete([])
    assert vector_index.count("alice") == 1


def test_delete_document_removes_only_that_documents_vectors(vector_index):
    vector_index.upsert(
        [
            rec("A-00000", axis(0), document_id="A"),
            rec("A-00001", axis(1), document_id="A", chunk_index=1),
            rec("B-00000", axis(2), document_id="B"),
        ]
    )
    assert vector_index.delete_document("alice", "A") == 2
    assert [h.id for h in vector_index.search(axis(0), ALICE, 5)] == ["B-00000"]
    assert vector_index.delete_document("alice", "A") == 0


def test_wrong_dimension_raises_and_stores_nothing(vector_index):
    with pytest.raises(ValueError):
        vector_index.upsert([rec("ok", axis(0)), rec("bad", [1.0, 0.0, 0.0])])
    assert vector_index.count("alice") == 0
    vector_index.upsert([rec("ok", axis(0))])
    with pytest.raises(ValueError):
        vector_index.search([1.0, 0.0], ALICE, 3)
    with pytest.raises(ValueError):
        vector_index.hybrid_search("ok", [1.0] * (DIM + 1), ALICE, 3)


def test_empty_index(vector_index):
    assert vector_index.count("alice") == 0
    assert vector_index.search(axis(0), ALICE, 3) == []
    assert vector_index.hybrid_search("anything", axis(0), ALICE, 3) == []


def test_hybrid_search_finds_keyword_matches_the_vectors_miss(vector_index):
    vector_index.upsert(
        [
            rec("v1", axis(0, 0.1, 1), text="general remarks about the weather"),
            rec("v2", axis(0, 0.2, 1), text="more general remarks"),
            rec("v3", axis(0, 0.3, 1), text="other general remarks"),
            rec("kw", axis(2), text="the zeppelin maintenance schedule"),
        ]
    )
    assert "kw" not in [h.id for h in vector_index.search(axis(0), ALICE, 3)]
    hits = vector_index.hybrid_search("zeppelin schedule", axis(0), ALICE, 3)
    assert len(hits) == 3
    assert "kw" in [h.id for h in hits]
    assert all(h.text for h in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_hybrid_search_applies_every_filter(vector_index):
    vector_index.upsert(
        [
            rec("mine", axis(0), text="zeppelin notes", collection="work", document_id="d1"),
            rec("off", axis(0), text="zeppelin notes", collection="work", document_id="d2", enabled=False),
            rec("home", axis(0), text="zeppelin notes", collection="home", document_id="d3"),
            rec("bobs", axis(0), text="zeppelin notes", owner="bob", collection="work", document_id="d4"),
        ]
    )
    work = SearchFilter(owner="alice", collection="work")
    assert [h.id for h in vector_index.hybrid_search("zeppelin", axis(0), work, 5)] == ["mine"]
    d3 = SearchFilter(owner="alice", document_id="d3")
    assert [h.id for h in vector_index.hybrid_search("zeppelin", axis(0), d3, 5)] == ["home"]
