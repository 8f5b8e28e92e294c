"""A search over several workspaces (issue 32): every index in ``conftest.PARTITIONED_INDEXES``
returns notes of exactly ``SearchFilter.partitions`` (never another workspace's), in search and
hybrid search, and says whose each note is (``Hit.owner``)."""

from __future__ import annotations

from ragchat.domain.models import SearchFilter, VectorRecord

DIM = 8


def _vec(i: int) -> list[float]:
    v = [0.0] * DIM
    v[i] = 1.0
    v[(i + 1) % DIM] = 0.1
    return v


def _rec(
    id_: str, owner: str, i: int, *, collection: str | None = None, enabled: bool = True
) -> VectorRecord:
    return VectorRecord(
        id=id_,
        vector=_vec(i),
        text=f"handbook holiday policy {id_}",
        owner=owner,
        document_id=f"doc-{id_}",
        chunk_index=0,
        collection=collection,
        enabled=enabled,
    )


def _fill(index) -> None:
    index.upsert(
        [
            _rec("a1", "alice", 0),
            _rec("t1", "ws_team", 0, collection="hr"),
            _rec("t2", "ws_team", 1, enabled=False),
            _rec("x1", "ws_secret", 0),
            _rec("b1", "bob", 0),
        ]
    )


def test_search_returns_only_the_partitions_and_names_the_owner(partitioned_index):
    _fill(partitioned_index)
    flt = SearchFilter(owner="alice", owners=("alice", "ws_team"))
    hits = partitioned_index.search(_vec(0), flt, 10)
    assert sorted((h.id, h.owner) for h in hits) == [("a1", "alice"), ("t1", "ws_team")]
    hybrid = partitioned_index.hybrid_search("holiday policy", _vec(0), flt, 10)
    assert sorted((h.id, h.owner) for h in hybrid) == [("a1", "alice"), ("t1", "ws_team")]


def test_one_owner_filter_is_unchanged(partitioned_index):
    _fill(partitioned_index)
    only = SearchFilter(owner="ws_secret")
    assert [h.id for h in partitioned_index.search(_vec(0), only, 10)] == ["x1"]
    assert [h.id for h in partitioned_index.hybrid_search("holiday", _vec(0), only, 10)] == ["x1"]


def test_collection_and_unknown_partitions(partitioned_index):
    _fill(partitioned_index)
    flt = SearchFilter(owner="alice", owners=("alice", "ws_team"), collection="hr")
    assert [h.id for h in partitioned_index.search(_vec(0), flt, 10)] == ["t1"]
    none = SearchFilter(owner="carol", owners=("carol", "ws_nobody"))
    assert partitioned_index.search(_vec(0), none, 10) == []
    assert partitioned_index.hybrid_search("holiday", _vec(0), none, 10) == []
