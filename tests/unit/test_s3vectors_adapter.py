"""S3 Vectors adapter: the exact requests it sends (botocore Stubber on a real ``s3vectors`` client,
which also validates them against the service model) and the behaviours the API forces on it
(no delete-by-filter, no count, no keyword search), on the in-memory fake."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber
from ragchat.adapters.aws.s3vectors import GET_BATCH, MAX_TOP_K, S3VectorsIndex
from ragchat.domain.ids import note_id, note_tag, version_tag, version_tags
from ragchat.domain.models import SearchFilter, VectorRecord

from tests.contract.fake_s3vectors import FakeS3Vectors

WHERE = {"vectorBucketName": "vec-bucket", "indexName": "notes"}


def rec(id_: str, vector: list[float], **kw) -> VectorRecord:
    base = {"text": f"text {id_}", "owner": "alice", "document_id": "D1", "chunk_index": 0}
    return VectorRecord(id=id_, vector=vector, **{**base, **kw})


@pytest.fixture
def stubbed():
    client = boto3.client(
        "s3vectors", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    with Stubber(client) as stub:
        yield S3VectorsIndex(client, "vec-bucket", "notes", 2), stub
        stub.assert_no_pending_responses()


def test_upsert_puts_unit_vectors_keyed_by_note_id_without_null_metadata(stubbed):
    index, stub = stubbed
    stub.add_response(
        "put_vectors",
        {},
        {
            **WHERE,
            "vectors": [
                {
                    "key": "n1",
                    "data": {"float32": [0.6, 0.8]},
                    "metadata": {
                        "owner": "alice",
                        "document_id": "D1",
                        "chunk_index": 3,
                        "enabled": True,
                        "text": "text n1",
                    },
                }
            ],
        },
    )
    index.upsert([rec("n1", [3.0, 4.0], chunk_index=3, collection=None)])


def test_search_sends_the_owner_enabled_collection_filter_and_reads_distances(stubbed):
    index, stub = stubbed
    stub.add_response(
        "query_vectors",
        {
            "vectors": [
                {
                    "key": "b",
                    "distance": 0.5,
                    "metadata": {"text": "tb", "document_id": "D2", "chunk_index": 1},
                },
                {"key": "a", "distance": 0.0, "metadata": {"text": "ta", "collection": "work"}},
            ],
            "distanceMetric": "cosine",
        },
        {
            **WHERE,
            "topK": 5,
            "queryVector": {"float32": [1.0, 0.0]},
            "filter": {
                "$and": [
                    {"owner": {"$eq": "alice"}},
                    {"enabled": {"$eq": True}},
                    {"collection": {"$eq": "work"}},
                ]
            },
            "returnMetadata": True,
            "returnDistance": True,
        },
    )
    hits = index.search([2.0, 0.0], SearchFilter(owner="alice", collection="work"), 5)
    assert [(h.id, h.score, h.similarity, h.text) for h in hits] == [
        ("a", 1.0, 1.0, "ta"),
        ("b", 0.5, 0.5, "tb"),
    ]
    assert (hits[1].document_id, hits[1].chunk_index, hits[0].collection) == ("D2", 1, "work")


def test_k_is_capped_at_the_service_maximum(stubbed):
    index, stub = stubbed
    expected = {
        **WHERE,
        "topK": MAX_TOP_K,
        "queryVector": {"float32": [0.0, 1.0]},
        "filter": {
            "$and": [{"owner": {"$eq": "bob"}}, {"enabled": {"$eq": True}}, {"document_id": {"$eq": "D9"}}]
        },
        "returnMetadata": True,
        "returnDistance": True,
    }
    stub.add_response("query_vectors", {"vectors": [], "distanceMetric": "cosine"}, expected)
    assert index.search([0.0, 1.0], SearchFilter(owner="bob", document_id="D9"), 500) == []


def test_delete_document_reads_the_known_keys_then_deletes_them_without_a_query(stubbed):
    index, stub = stubbed
    first = [f"D1-{i:05d}" for i in range(GET_BATCH)]
    then = [f"D1-{i:05d}" for i in range(GET_BATCH, 2 * GET_BATCH)]
    read = {**WHERE, "returnData": False, "returnMetadata": True}
    found = [
        {"key": "D1-00000", "metadata": {"owner": "alice"}},
        {"key": "D1-00001", "metadata": {"owner": "alice"}},
    ]
    stub.add_response("get_vectors", {"vectors": found}, {**read, "keys": first})
    stub.add_response("get_vectors", {"vectors": []}, {**read, "keys": then})
    stub.add_response("delete_vectors", {}, {**WHERE, "keys": ["D1-00000", "D1-00001"]})
    assert index.delete_document("alice", "D1") == 2


def _calls(fake: FakeS3Vectors) -> dict[str, int]:
    counted: dict[str, int] = {}
    for name, _ in fake.calls:
        counted[name] = counted.get(name, 0) + 1
    return counted


def test_a_3901_chunk_document_is_disabled_and_deleted_by_its_keys_in_batches_with_no_query():
    fake = FakeS3Vectors("vec", "notes", 2)
    index = S3VectorsIndex(fake, "vec", "notes", 2)
    tag = version_tag("v1")
    index.upsert([rec(note_id("D1", i, "v1"), [1.0, i / 4000], chunk_index=i) for i in range(3901)])
    index.upsert([rec("D2-00000", [1.0, 0.0], document_id="D2")])
    index.upsert([rec(note_id("D1", 3901, "v1"), [1.0, 0.0], owner="mallory")])  # not alice's: never touched
    fake.calls.clear()

    index.set_enabled("alice", "D1", False, tags=[tag])
    # 40 reads of 100 keys of the version + 1 that finds none, + 1 empty read of the untagged ids
    assert _calls(fake) == {"get_vectors": 42, "put_vectors": 20}
    assert all(fake.vectors[note_id("D1", i, "v1")][1]["enabled"] is False for i in range(3901))
    stored = fake.vectors[note_id("D1", 1234, "v1")]
    assert stored[1]["chunk_index"] == 1234  # data and metadata kept
    assert stored[0] == pytest.approx(index._check([1.0, 1234 / 4000]), abs=1e-6)
    assert fake.vectors["D2-00000"][1]["enabled"] is True
    assert fake.vectors[note_id("D1", 3901, "v1")][1]["enabled"] is True

    fake.calls.clear()
    index.set_enabled("alice", "D1", False, tags=[tag])  # already off: reads only
    assert _calls(fake) == {"get_vectors": 42}

    fake.calls.clear()
    assert index.delete_document("alice", "D1", tags=[tag]) == 3901
    assert _calls(fake) == {"get_vectors": 42, "delete_vectors": 8}  # 3,901 keys, 500 per call
    assert set(fake.vectors) == {"D2-00000", note_id("D1", 3901, "v1")}


def test_each_version_and_the_untagged_ids_are_read_by_their_own_keys():
    """During a replacement a document has two versions' keys (and one ingested before ids were per
    version has untagged keys): each named tag is enumerated, a tag not named is not touched."""
    fake = FakeS3Vectors("vec", "notes", 2)
    index = S3VectorsIndex(fake, "vec", "notes", 2)
    index.upsert([rec(note_id("D1", i), [1.0, 0.0], chunk_index=i) for i in range(3)])
    index.upsert([rec(note_id("D1", i, "old"), [1.0, 0.0], chunk_index=i) for i in range(2)])
    index.upsert([rec(note_id("D1", i, "new"), [1.0, 0.0], chunk_index=i, enabled=False) for i in range(4)])

    index.set_enabled("alice", "D1", True, chunk_count=4, tags=[version_tag("new")])
    assert all(fake.vectors[note_id("D1", i, "new")][1]["enabled"] is True for i in range(4))

    assert index.delete_document("alice", "D1", tags=[version_tag("old")]) == 5  # untagged + old
    assert sorted(fake.vectors) == sorted(note_id("D1", i, "new") for i in range(4))
    assert index.delete_document("alice", "D1") == 0  # the new version's keys are not guessed
    assert index.delete_document("alice", "D1", tags=[version_tag("new")]) == 4
    assert fake.vectors == {}


def test_hybrid_search_sends_the_question_and_the_vector_in_one_query(stubbed):
    """One QueryVectors with queryTexts + queryVector: the service fuses BM25 and cosine (RRF). The
    similarity the answerability decision reads is the cosine (vectorDistance), the score the
    fused one; a result found by keyword alone has its vector read back to compare."""
    index, stub = stubbed
    flt = {"$and": [{"owner": {"$eq": "alice"}}, {"enabled": {"$eq": True}}]}
    stub.add_response(
        "query_vectors",
        {
            "vectors": [
                {
                    "key": "kw",
                    "metadata": {"text": "zeppelin"},
                    "scores": {"fused": 0.0325, "bm25Scores": [{"metadataKey": "text", "score": 2.1}]},
                },
                {
                    "key": "v",
                    "distance": 0.2,
                    "metadata": {"text": "airships"},
                    "scores": {"fused": 0.0164, "vectorDistance": 0.2, "bm25Scores": []},
                },
            ],
            "distanceMetric": "cosine",
        },
        {
            **WHERE,
            "topK": 3,
            "queryVector": {"float32": [1.0, 0.0]},
            "queryTexts": [{"text": "When does the zeppelin fly?", "metadataKey": "text"}],
            "filter": flt,
            "returnMetadata": True,
            "returnDistance": True,
            "returnScores": True,
        },
    )
    stub.add_response(
        "get_vectors",
        {"vectors": [{"key": "kw", "data": {"float32": [0.6, 0.8]}}]},
        {**WHERE, "keys": ["kw"], "returnData": True},
    )
    hits = index.hybrid_search("  When does the\nzeppelin fly? ", [3.0, 0.0], SearchFilter(owner="alice"), 3)
    assert [(h.id, h.text) for h in hits] == [("kw", "zeppelin"), ("v", "airships")]
    assert [h.score for h in hits] == [0.0325, 0.0164]
    assert [h.similarity for h in hits] == [pytest.approx(0.6), pytest.approx(0.8)]


def test_a_question_longer_than_the_api_takes_is_cut_at_a_word():
    from ragchat.adapters.aws.s3vectors import MAX_QUERY_TEXT, query_text

    long = "zeppelin " * 200
    cut = query_text(long)
    assert len(cut) <= MAX_QUERY_TEXT and cut.endswith("zeppelin") and cut.startswith("zeppelin zeppelin")
    assert query_text(" ?! … ") == ""  # nothing to match by keyword


def test_hybrid_search_finds_by_keyword_what_the_vectors_miss_on_the_fake():
    fake = FakeS3Vectors("vec", "notes", 2)
    index = S3VectorsIndex(fake, "vec", "notes", 2)
    index.upsert([rec("a", [1.0, 0.0], text="zeppelin timetable"), rec("b", [0.0, 1.0]),
                  rec("c", [0.1, 1.0]), rec("d", [0.2, 1.0])])  # fmt: skip
    assert "a" not in [h.id for h in index.search([0.0, 1.0], SearchFilter(owner="alice"), 2)]
    hits = index.hybrid_search("zeppelin", [0.0, 1.0], SearchFilter(owner="alice"), 2)
    assert {h.id for h in hits} == {"a", "b"}  # b: first by vector; a: first by keyword
    assert {h.id: h.similarity for h in hits} == {"a": pytest.approx(0.0), "b": pytest.approx(1.0)}
    assert [name for name, _ in fake.calls[-2:]] == ["query_vectors", "get_vectors"]


def test_a_question_of_punctuation_only_is_searched_by_vector():
    fake = FakeS3Vectors("vec", "notes", 2)
    index = S3VectorsIndex(fake, "vec", "notes", 2)
    index.upsert([rec("a", [1.0, 0.0])])
    assert [h.id for h in index.hybrid_search("???", [1.0, 0.0], SearchFilter(owner="alice"), 2)] == ["a"]
    assert "queryTexts" not in fake.calls[-1][1]


def test_the_fake_rejects_what_the_service_rejects():
    from botocore.exceptions import ClientError, ParamValidationError

    fake = FakeS3Vectors("vec", "notes", 2)
    with pytest.raises(ParamValidationError):
        fake.delete_vectors(vectorBucketName="vec", indexName="notes", keys=[])
    where = {"vectorBucketName": "vec", "indexName": "notes"}
    with pytest.raises(ClientError, match="null"):
        vector = {"key": "k", "data": {"float32": [1.0, 0.0]}, "metadata": {"collection": None}}
        fake.put_vectors(**where, vectors=[vector])
    with pytest.raises(ClientError, match="not filterable"):
        query = {"topK": 1, "queryVector": {"float32": [1.0, 0.0]}, "filter": {"text": {"$eq": "x"}}}
        fake.query_vectors(**where, **query)
    with pytest.raises(ClientError, match="NotFoundException"):
        fake.get_vectors(vectorBucketName="vec", indexName="other", keys=["k"])


def test_the_container_builds_the_s3vectors_index_when_asked(monkeypatch):
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    from tests.fakes import FakeEmbedder

    env = {"RAGCHAT_BACKEND": "aws", "DOCUMENTS_TABLE": "docs", "CONVERSATIONS_TABLE": "convs",
           "COUNTERS_TABLE": "counters", "DOCUMENTS_BUCKET": "bucket", "RAGCHAT_VECTOR_INDEX": "s3vectors",
           "S3VECTORS_BUCKET": "vec-bucket", "S3VECTORS_INDEX": "notes",
           "AWS_REGION": "eu-west-1"}  # fmt: skip
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    index = Container(load_settings(env), embedder=FakeEmbedder()).index
    assert isinstance(index, S3VectorsIndex)
    assert (index.bucket, index.index, index._client.meta.region_name) == ("vec-bucket", "notes", "eu-west-1")


def test_s3vectors_without_its_bucket_is_refused_at_start_up():
    from ragchat.config import load_settings

    with pytest.raises(ValueError, match=r"S3VECTORS_BUCKET must be set .*RAGCHAT_VECTOR_INDEX=s3vectors"):
        load_settings({"RAGCHAT_VECTOR_INDEX": "s3vectors"})


def test_the_version_tags_of_a_document_come_from_its_note_ids_and_its_versions():
    """What the services pass as ``tags``: the tag each versioned note id carries (an untagged id,
    or a document id that merely looks like one, adds none) and those of the versions named."""
    ids = [note_id("D1", 0, "v1"), note_id("D1", 1, "v1"), note_id("D1", 0), "D1-00000vXYZ"]
    assert version_tags(ids) == [version_tag("v1")]
    assert version_tags(ids, "v2", None) == sorted({version_tag("v1"), version_tag("v2")})
    assert note_tag(note_id("D1-00000v12345678", 3)) is None  # the id's own end decides
    assert note_tag(note_id("D1", 123456, "v1")) == version_tag("v1")


def test_a_search_over_several_workspaces_sends_one_in_clause_and_hits_name_their_workspace(stubbed):
    index, stub = stubbed
    stub.add_response(
        "query_vectors",
        {
            "vectors": [
                {"key": "t", "distance": 0.0, "metadata": {"text": "tt", "owner": "ws_team"}},
                {"key": "m", "distance": 0.5, "metadata": {"text": "tm", "owner": "alice"}},
            ],
            "distanceMetric": "cosine",
        },
        {
            **WHERE,
            "topK": 5,
            "queryVector": {"float32": [1.0, 0.0]},
            "filter": {"$and": [{"owner": {"$in": ["alice", "ws_team"]}}, {"enabled": {"$eq": True}}]},
            "returnMetadata": True,
            "returnDistance": True,
        },
    )
    hits = index.search([1.0, 0.0], SearchFilter(owner="alice", owners=("alice", "ws_team")), 5)
    assert [(h.id, h.owner) for h in hits] == [("t", "ws_team"), ("m", "alice")]


def test_the_fake_rejects_an_empty_in_list_as_the_service_does():
    from botocore.exceptions import ClientError

    fake = FakeS3Vectors("vec-bucket", "notes", 2)
    with pytest.raises(ClientError, match="non-empty"):
        query = {"topK": 1, "queryVector": {"float32": [1.0, 0.0]}, "filter": {"owner": {"$in": []}}}
        fake.query_vectors(**WHERE, **query)
