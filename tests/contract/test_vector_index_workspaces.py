"""Search over several workspaces (issue 32): ``SearchFilter.owners`` confines a search to exactly
the workspaces named (``flt.partitions``), and every hit says whose it is (``Hit.owner``).

Run over the indexes of ``WORKSPACE_SEARCH_INDEXES`` (names in ``conftest.VECTOR_INDEXES``): the
cloud ones here (OpenSearch over HTTP to the fake cluster, as a domain and as Serverless; S3 Vectors
over the fake client that checks every request against the service model). An index joins with
one more name in the list once it honours ``owners``; ``test_opensearch_live.py`` re-runs these
against a real cluster when ``OPENSEARCH_URL`` is set.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from ragchat.domain.models import SearchFilter

from tests.contract.conftest import VECTOR_INDEXES, ContractEnv, _adapter
from tests.contract.test_vector_index_contract import axis, rec

WORKSPACE_SEARCH_INDEXES = ["opensearch", "opensearch-aoss", "s3vectors"]

# alice's personal workspace is "alice"; she belongs to ws_team; ws_other and bob's are not hers.
ALICE_SEES = SearchFilter(owner="alice", owners=("alice", "ws_team"))


@pytest.fixture(params=WORKSPACE_SEARCH_INDEXES)
def vector_index(request: pytest.FixtureRequest, contract_env: ContractEnv) -> Iterator[Any]:
    yield from _adapter(VECTOR_INDEXES, request, contract_env)


def _four_workspaces(index: Any) -> None:
    """The same best-matching text in four workspaces; only two of them are alice's."""
    index.upsert(
        [
            rec("mine", axis(0, 0.2, 1), owner="alice", document_id="d-mine", text="zeppelin handbook"),
            rec("team", axis(0, 0.1, 1), owner="ws_team", document_id="d-team", text="zeppelin handbook"),
            rec("other", axis(0), owner="ws_other", document_id="d-other", text="zeppelin handbook"),
            rec("bobs", axis(0), owner="bob", document_id="d-bob", text="zeppelin handbook"),
        ]
    )


def test_a_search_over_several_workspaces_returns_theirs_only_and_says_whose(vector_index: Any) -> None:
    _four_workspaces(vector_index)

    hits = vector_index.search(axis(0), ALICE_SEES, 10)

    assert [(h.id, h.owner) for h in hits] == [("team", "ws_team"), ("mine", "alice")]


def test_hybrid_search_over_several_workspaces_is_confined_the_same_way(vector_index: Any) -> None:
    _four_workspaces(vector_index)

    hits = vector_index.hybrid_search("zeppelin handbook", axis(0), ALICE_SEES, 10)

    assert {(h.id, h.owner) for h in hits} == {("team", "ws_team"), ("mine", "alice")}


def test_one_workspace_is_searched_alone_and_its_hits_name_it(vector_index: Any) -> None:
    _four_workspaces(vector_index)

    team_only = SearchFilter(owner="ws_team")
    assert [(h.id, h.owner) for h in vector_index.search(axis(0), team_only, 10)] == [("team", "ws_team")]
    # owners wins over owner: a search names its workspaces, never one more
    assert [
        h.id for h in vector_index.search(axis(0), SearchFilter(owner="alice", owners=("ws_team",)), 10)
    ] == ["team"]


def test_disabled_collection_and_document_filters_still_apply_across_workspaces(vector_index: Any) -> None:
    vector_index.upsert(
        [
            rec("a-work", axis(0), owner="alice", collection="work", document_id="d1", text="zeppelin"),
            rec("t-work", axis(0), owner="ws_team", collection="work", document_id="d2", text="zeppelin"),
            rec("t-home", axis(0), owner="ws_team", collection="home", document_id="d3", text="zeppelin"),
            rec("t-off", axis(0), owner="ws_team", collection="work", document_id="d4", enabled=False),
            rec("o-work", axis(0), owner="ws_other", collection="work", document_id="d5", text="zeppelin"),
        ]
    )
    work = SearchFilter(owner="alice", owners=("alice", "ws_team"), collection="work")
    d3 = SearchFilter(owner="alice", owners=("alice", "ws_team"), document_id="d3")
    guessed = SearchFilter(owner="alice", owners=("alice", "ws_team"), document_id="d5")

    assert sorted(h.id for h in vector_index.search(axis(0), work, 10)) == ["a-work", "t-work"]
    assert sorted(h.id for h in vector_index.hybrid_search("zeppelin", axis(0), work, 10)) == [
        "a-work",
        "t-work",
    ]
    assert [h.id for h in vector_index.search(axis(0), d3, 10)] == ["t-home"]
    assert vector_index.search(axis(0), guessed, 10) == []  # another workspace's document id: nothing
    assert vector_index.hybrid_search("zeppelin", axis(0), guessed, 10) == []


def test_many_workspaces_in_one_search(vector_index: Any) -> None:
    vector_index.upsert(
        [rec(f"n{i:02d}", axis(i % 8), owner=f"ws_{i:02d}", document_id=f"d{i}") for i in range(40)]
    )
    mine = tuple(f"ws_{i:02d}" for i in range(0, 40, 2))

    hits = vector_index.search(axis(0), SearchFilter(owner="alice", owners=mine), 40)

    assert {h.owner for h in hits} <= set(mine)
    assert sorted(h.id for h in hits) == [f"n{i:02d}" for i in range(0, 40, 2)]
