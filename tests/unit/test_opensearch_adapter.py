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
