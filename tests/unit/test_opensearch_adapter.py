"""OpenSearch adapter at the HTTP level: the exact requests opensearch-py sends, and how responses
(including a ``_bulk`` partial failure) are read. The fake cluster records every request."""

from __future__ import annotations

import json

import pytest
from ragchat.adapters.aws.opensearch import IndexingError, OpenSearchVectorIndex, score_to_cosine
from ragchat.domain.models import SearchFilter, VectorRecord

from tests.contract.fake_opensearch import FakeCluster


def rec(id_: str, vector: list[float], **kw) -> VectorRecord:
    base = {"text": f"text {id_}", "owner": "alice", "document_id": "D1", "chunk_index": 0}
    return VectorRecord(id=id_, vector=vector, **{**base, **kw})


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


def _requests(cluster: FakeCluster, path_part: str) -> list[tuple[str, str, dict, object]]:
    return [r for r in cluster.requests if path_part in r[1]]


def test_first_upsert_creates_the_knn_mapping_once(cluster):
    index = OpenSearchVectorIndex(cluster.client(), "notes", 4)
    index.upsert([rec("a", [1, 0, 0, 0])])
    index.upsert([rec("b", [0, 1, 0, 0])])
    creates = [r for r in cluster.requests if r[0] == "PUT" and r[1] == "/notes"]
    assert len(creates) == 1
    assert creates[0][3] == {
        "settings": {"index": {"knn": True}},
        "mappings": {
            "properties": {
                "vector": {
                    "type": "knn_vector",
                    "dimension": 4,
                    "method": {
                        "name": "hnsw",
                        "engine": "faiss",
                        "space_type": "innerproduct",
                        "parameters": {"m": 16, "ef_construction": 128},
                    },
                },
                "text": {"type": "text"},
                "note_id": {"type": "keyword"},
                "document_id": {"type": "keyword"},
                "owner": {"type": "keyword"},
                "collection": {"type": "keyword"},
                "chunk_index": {"type": "integer"},
                "enabled": {"type": "boolean"},
            }
        },
    }


def test_create_race_with_another_writer_is_fine(cluster):
    OpenSearchVectorIndex(cluster.client(), "notes", 4).ensure_index()
    late = OpenSearchVectorIndex(cluster.client(), "notes", 4)
    late._client.indices.exists = lambda index: False  # it looked before the other one created it
    late.ensure_index()  # the 400 resource_already_exists_exception is swallowed
    late.upsert([rec("D1-00000", [1.0, 0.0, 0.0, 0.0])])  # and the late writer goes on working
    assert late.count("alice") == 1


def test_bulk_ndjson_lines_use_note_ids_and_unit_vectors(cluster):
    index = OpenSearchVectorIndex(cluster.client(), "notes", 2)
    index.upsert([rec("D1-00000", [3.0, 4.0], collection="work"), rec("D1-00001", [0.0, 2.0], chunk_index=1)])
    ((method, path, params, body),) = _requests(cluster, "_bulk")
    assert (method, path, params) == ("POST", "/_bulk", {"refresh": "true"})
    assert [json.loads(line) for line in body.splitlines()] == [
        {"index": {"_index": "notes", "_id": "D1-00000"}},
        {"note_id": "D1-00000", "vector": [0.6, 0.8], "text": "text D1-00000", "owner": "alice",
         "document_id": "D1", "chunk_index": 0, "collection": "work", "enabled": True},
        {"index": {"_index": "notes", "_id": "D1-00001"}},
        {"note_id": "D1-00001", "vector": [0.0, 1.0], "text": "text D1-00001", "owner": "alice",
         "document_id": "D1", "chunk_index": 1, "collection": None, "enabled": True},
    ]  # fmt: skip
    assert body.endswith("\n")


def test_bulk_partial_failure_names_the_failed_ids(cluster):
    cluster.bulk_failures["bad"] = "failed to parse field [vector]"
    index = OpenSearchVectorIndex(cluster.client(), "notes", 2)
    with pytest.raises(IndexingError) as info:
        index.upsert([rec("ok", [1, 0]), rec("bad", [0, 1]), rec("fine", [1, 1])])
    assert info.value.failed == {"bad": "400 failed to parse field [vector]"}
    assert "bad" in str(info.value)


def test_knn_query_carries_the_filters_inside_and_scores_become_cosines(cluster):
    index = OpenSearchVectorIndex(cluster.client(), "notes", 2)
    index.upsert([rec("same", [1, 0]), rec("orth", [0, 1]), rec("opp", [-1, 0])])
    hits = index.search([2.0, 0.0], SearchFilter(owner="alice", collection="work", document_id="D1"), 3)
    (_, path, _, body) = _requests(cluster, "_search")[-1]
    assert path == "/notes/_search"
    assert body == {
        "size": 3,
        "_source": ["note_id", "text", "owner", "document_id", "chunk_index", "collection", "enabled"],
        "query": {
            "knn": {
                "vector": {
                    "vector": [1.0, 0.0],
                    "k": 3,
                    "filter": {
                        "bool": {
                            "filter": [
                                {"term": {"owner": "alice"}},
                                {"term": {"enabled": True}},
                                {"term": {"collection": "work"}},
                                {"term": {"document_id": "D1"}},
                            ]
                        }
                    },
                }
            }
        },
    }
    assert hits == []  # none of them is in collection "work"
    hits = index.search([2.0, 0.0], SearchFilter(owner="alice"), 3)
    assert [(h.id, round(h.score, 6)) for h in hits] == [("same", 1.0), ("orth", 0.0), ("opp", -1.0)]


def test_score_to_cosine_inverts_the_faiss_inner_product_score():
    for ip in (-1.0, -0.5, 0.0, 0.3, 1.0):
        score = 1 + ip if ip >= 0 else 1 / (1 - ip)
        assert score_to_cosine(score) == pytest.approx(ip)


def test_hybrid_query_goes_through_the_normalization_pipeline(cluster):
    index = OpenSearchVectorIndex(cluster.client(), "notes", 2)
    index.upsert([rec("kw", [0, 1], text="zeppelin schedule"), rec("vec", [1, 0], text="other words")])
    hits = index.hybrid_search("zeppelin", [1.0, 0.0], SearchFilter(owner="alice"), 2)
    ((_, _, _, pipeline),) = _requests(cluster, "_search/pipeline/ragchat-hybrid")
    assert pipeline["phase_results_processors"] == [
        {
            "normalization-processor": {
                "normalization": {"technique": "min_max"},
                "combination": {"technique": "arithmetic_mean", "parameters": {"weights": [0.3, 0.7]}},
            }
        }
    ]
    (_, _path, params, body) = _requests(cluster, "/notes/_search")[-1]
    assert params == {"search_pipeline": "ragchat-hybrid"}
    filters = [{"term": {"owner": "alice"}}, {"term": {"enabled": True}}]
    assert body["query"] == {
        "hybrid": {
            "queries": [
                {"bool": {"must": [{"match": {"text": {"query": "zeppelin"}}}], "filter": filters}},
                {"knn": {"vector": {"vector": [1.0, 0.0], "k": 2, "filter": {"bool": {"filter": filters}}}}},
            ]
        }
    }
    assert {h.id for h in hits} == {"kw", "vec"}
    by_id = {h.id: h for h in hits}
    assert by_id["vec"].similarity == pytest.approx(1.0) and by_id["kw"].similarity == pytest.approx(0.0)
    index.hybrid_search("zeppelin", [1.0, 0.0], SearchFilter(owner="alice"), 2)
    assert len(_requests(cluster, "_search/pipeline")) == 1  # created once


def test_delete_document_and_set_enabled_use_by_query_on_a_domain(cluster):
    index = OpenSearchVectorIndex(cluster.client(), "notes", 2)
    index.upsert([rec("a", [1, 0]), rec("b", [0, 1], document_id="D2")])
    index.set_enabled("alice", "D1", False)
    (_, _path, params, body) = _requests(cluster, "_update_by_query")[0]
    owned = {"bool": {"filter": [{"term": {"owner": "alice"}}, {"term": {"document_id": "D1"}}]}}
    assert params == {"conflicts": "proceed", "refresh": "true"}
    assert body == {
        "query": owned,
        "script": {"source": "ctx._source.enabled = params.enabled", "lang": "painless",
                   "params": {"enabled": False}},
    }  # fmt: skip
    assert index.count("alice") == 1
    assert index.delete_document("alice", "D1") == 1
    (_, _, _, body) = _requests(cluster, "_delete_by_query")[0]
    assert body == {"query": owned}


def test_serverless_never_sends_custom_ids_refresh_or_by_query():
    cluster = FakeCluster(serverless=True)
    index = OpenSearchVectorIndex(cluster.client(), "notes", 2, service="aoss")
    index.upsert([rec("a", [1, 0]), rec("b", [0, 1])])
    index.upsert([rec("a", [0, 1], text="new")])  # overwrite: delete old server id + index new
    assert index.count("alice") == 2
    second_bulk = [json.loads(line) for line in _requests(cluster, "_bulk")[1][3].splitlines()]
    assert list(second_bulk[0]) == ["delete"] and second_bulk[1] == {"index": {"_index": "notes"}}
    index.set_enabled("alice", "D1", False)
    assert index.count("alice") == 0
    assert index.delete_document("alice", "D1") == 2
    assert not _requests(cluster, "_by_query")
    assert all("refresh" not in r[2] for r in cluster.requests)


# ------------------------------------------------------------------ sleeping collections (NextGen at 0 OCU)
class StepClock:
    """A monotonic clock that only moves when the adapter sleeps (or a fake request 'takes' time)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _sleepy(cluster: FakeCluster, clock: StepClock, **policy) -> OpenSearchVectorIndex:
    from ragchat.adapters.aws.wakeup import WakePolicy

    wake = WakePolicy(clock=clock, sleep=clock.sleep, **policy)
    index = OpenSearchVectorIndex(cluster.client(max_retries=0), "notes", 4, service="aoss", wake=wake)
    index.upsert([rec("a", [1, 0, 0, 0]), rec("b", [0, 1, 0, 0])])
    cluster.timeouts.clear()
    return index


def test_a_sleeping_collection_is_woken_and_the_first_query_still_answers(cluster):
    clock = StepClock()
    index = _sleepy(cluster, clock)
    cluster.wake_failures = [503, "timeout", 429]
    assert index.count("alice") == 2  # three failures absorbed, then served
    assert clock.sleeps == [0.5, 1.0, 2.0]  # exponential backoff
    cluster.wake_failures = [503]
    assert [h.id for h in index.search([1, 0, 0, 0], SearchFilter(owner="alice"), 1)] == ["a"]
    cluster.wake_failures = ["timeout"]
    assert [h.id for h in index.hybrid_search("text a", [1, 0, 0, 0], SearchFilter(owner="alice"), 1)] == [
        "a"
    ]
    assert all(t is not None and t <= 10.0 for t in cluster.timeouts)  # every query attempt is bounded


def test_waking_gives_up_at_the_deadline_with_a_retryable_error(cluster):
    from ragchat.adapters.aws.wakeup import VectorIndexWaking
    from ragchat.domain.errors import TransientError

    clock = StepClock()
    index = _sleepy(cluster, clock, budget_s=5.0)
    cluster.wake_failures = [503] * 50
    with pytest.raises(VectorIndexWaking) as caught:
        index.search([1, 0, 0, 0], SearchFilter(owner="alice"), 1)
    assert isinstance(caught.value, TransientError) and caught.value.status == 503
    assert sum(clock.sleeps) == pytest.approx(5.0)  # never waits past the budget
    assert clock.sleeps == [0.5, 1.0, 2.0, 1.5]  # the last pause is clipped to the time left
    assert cluster.timeouts[-1] == 1.0  # the last attempt gets the minimum timeout, not the full 10 s


def test_writes_try_once_and_leave_the_waiting_to_the_state_machine(cluster):
    from ragchat.adapters.aws.wakeup import VectorIndexWaking

    clock = StepClock()
    index = _sleepy(cluster, clock)
    cluster.wake_failures = [503]
    with pytest.raises(VectorIndexWaking):
        index.upsert([rec("c", [0, 0, 1, 0])])
    assert clock.sleeps == []
    index.upsert([rec("c", [0, 0, 1, 0])])  # awake now
    assert index.count("alice") == 3


def test_other_errors_are_not_retried(cluster):
    from opensearchpy.exceptions import RequestError

    clock = StepClock()
    index = _sleepy(cluster, clock)
    cluster.wake_failures = [400]
    with pytest.raises(RequestError):
        index.count("alice")
    assert clock.sleeps == []


def test_a_search_over_several_workspaces_sends_one_terms_filter_and_hits_name_their_workspace(cluster):
    index = OpenSearchVectorIndex(cluster.client(), "notes", 2)
    index.upsert([rec("m", [1, 0]), rec("t", [1, 0], owner="ws_team"), rec("o", [1, 0], owner="ws_other")])
    flt = SearchFilter(owner="alice", owners=("alice", "ws_team"))

    hits = index.search([1.0, 0.0], flt, 5)
    (_, _, _, body) = _requests(cluster, "/notes/_search")[-1]
    assert body["query"]["knn"]["vector"]["filter"] == {
        "bool": {"filter": [{"terms": {"owner": ["alice", "ws_team"]}}, {"term": {"enabled": True}}]}
    }
    assert sorted((h.id, h.owner) for h in hits) == [("m", "alice"), ("t", "ws_team")]

    hybrid = index.hybrid_search("text", [1.0, 0.0], flt, 5)
    (_, _, _, body) = _requests(cluster, "/notes/_search")[-1]
    keyword, knn = body["query"]["hybrid"]["queries"]
    assert keyword["bool"]["filter"][0] == {"terms": {"owner": ["alice", "ws_team"]}}
    assert knn["knn"]["vector"]["filter"]["bool"]["filter"][0] == {"terms": {"owner": ["alice", "ws_team"]}}
    assert sorted((h.id, h.owner) for h in hybrid) == [("m", "alice"), ("t", "ws_team")]
