"""The S3 Vectors fake holds to the service's documented contract (S3 User Guide: limitations,
hybrid search, index modes): what AWS refuses, it refuses; hybrid results are the RRF of the BM25
and the vector rankings; and the index it emulates is the one template.yaml creates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from botocore.exceptions import ClientError

from tests.contract.fake_s3vectors import FakeS3Vectors, analyze

ROOT = Path(__file__).resolve().parents[2]
WHERE = {"vectorBucketName": "vec", "indexName": "notes"}


def vec(key: str, data: list[float], **meta: Any) -> dict[str, Any]:
    return {"key": key, "data": {"float32": data}, "metadata": {"owner": "alice", **meta}}


def refused(call: Any, match: str) -> None:
    with pytest.raises(ClientError, match=match) as info:
        call()
    assert info.value.response["Error"]["Code"] == "ValidationException"


def test_a_hybrid_query_fuses_the_bm25_and_the_vector_rankings_by_rrf():
    fake = FakeS3Vectors("vec", "notes", 2)
    fake.put_vectors(
        **WHERE,
        vectors=[
            vec("near", [1.0, 0.0], text="general remarks"),
            vec("both", [0.9, 0.3], text="the zeppelin schedule"),
            vec("words", [0.0, 1.0], text="zeppelin zeppelin schedule"),
        ],
    )
    q = {"topK": 3, "queryVector": {"float32": [1.0, 0.0]}, "returnScores": True, "returnDistance": True}
    out = fake.query_vectors(**WHERE, **q, queryTexts=[{"text": "zeppelin", "metadataKey": "text"}])
    # vector ranking near, both, words; BM25 ranking words, both: words 1/63 + 1/61 just beats
    # both 1/62 + 1/62, and near (vector only) comes last
    assert [v["key"] for v in out["vectors"]] == ["words", "both", "near"]
    fused = [v["scores"]["fused"] for v in out["vectors"]]
    assert fused == pytest.approx([1 / 63 + 1 / 61, 2 / 62, 1 / 61], rel=1e-9)
    assert [bool(v["scores"]["bm25Scores"]) for v in out["vectors"]] == [True, True, False]
    # the same text alone ranks by BM25 only, the vector alone by distance only
    text_only = fake.query_vectors(**WHERE, topK=3, queryTexts=[{"text": "zeppelin", "metadataKey": "text"}])
    assert [v["key"] for v in text_only["vectors"]] == ["words", "both"]
    vector_only = fake.query_vectors(**WHERE, topK=3, queryVector={"float32": [1.0, 0.0]})
    assert [v["key"] for v in vector_only["vectors"]] == ["near", "both", "words"]


def test_filters_apply_before_the_search_in_enhanced_mode():
    fake = FakeS3Vectors("vec", "notes", 2)
    fake.put_vectors(**WHERE, vectors=[vec(f"n{i}", [1.0, i / 100], text="zeppelin") for i in range(150)])
    fake.put_vectors(**WHERE, vectors=[vec("rare", [0.0, 1.0], text="other", owner="ws_team")])
    out = fake.query_vectors(
        **WHERE, topK=5, queryVector={"float32": [1.0, 0.0]}, filter={"owner": {"$eq": "ws_team"}}
    )
    assert [v["key"] for v in out["vectors"]] == ["rare"]  # one among 151, still found


def test_what_the_service_refuses_the_fake_refuses():
    fake = FakeS3Vectors("vec", "notes", 2)
    query = {"queryVector": {"float32": [1.0, 0.0]}}
    refused(lambda: fake.query_vectors(**WHERE, topK=101, **query), "topK")
    many = [vec(f"k{i}", [1.0, 0.0]) for i in range(501)]
    refused(lambda: fake.put_vectors(**WHERE, vectors=many), "At most 500")
    refused(lambda: fake.get_vectors(**WHERE, keys=[f"k{i}" for i in range(101)]), "At most 100")
    refused(lambda: fake.delete_vectors(**WHERE, keys=[f"k{i}" for i in range(501)]), "At most 500")
    keys = {f"m{i}": i for i in range(50)}  # + owner: 51 keys
    refused(lambda: fake.put_vectors(**WHERE, vectors=[vec("k", [1.0, 0.0], **keys)]), "at most 50")
    big = "x" * 2100
    refused(lambda: fake.put_vectors(**WHERE, vectors=[vec("k", [1.0, 0.0], label=big)]), "2 KB")
    huge = "x" * (41 * 1024)
    refused(lambda: fake.put_vectors(**WHERE, vectors=[vec("k", [1.0, 0.0], text=huge)]), "40 KB")
    fake.put_vectors(**WHERE, vectors=[vec("k", [1.0, 0.0], text="x" * 30_000)])  # non-filterable: fine
    text = [{"text": "z" * 1025, "metadataKey": "text"}]
    refused(lambda: fake.query_vectors(**WHERE, topK=1, **query, queryTexts=text), "1024")
    other = [{"text": "zeppelin", "metadataKey": "title"}]
    refused(lambda: fake.query_vectors(**WHERE, topK=1, **query, queryTexts=other), "not configured")
    twice = [{"text": "a", "metadataKey": "text"}, {"text": "b", "metadataKey": "text"}]
    refused(lambda: fake.query_vectors(**WHERE, topK=1, **query, queryTexts=twice), "distinct")
    refused(lambda: fake.query_vectors(**WHERE, topK=1, **query, queryMode="CLASSIC"), "CLASSIC")
    refused(lambda: fake.query_vectors(**WHERE, topK=1), "queryVector, queryTexts or both")
    with pytest.raises(ValueError, match="10 non-filterable"):
        FakeS3Vectors("vec", "notes", 2, non_filterable=tuple(f"k{i}" for i in range(11)))


def test_full_text_search_needs_an_enhanced_index():
    classic = FakeS3Vectors("vec", "notes", 2, mode="CLASSIC")
    classic.put_vectors(**WHERE, vectors=[vec("k", [1.0, 0.0], text="zeppelin")])
    texts = [{"text": "zeppelin", "metadataKey": "text"}]
    refused(lambda: classic.query_vectors(**WHERE, topK=1, queryTexts=texts), "ENHANCED")
    refused(
        lambda: classic.query_vectors(
            **WHERE, topK=1, queryVector={"float32": [1.0, 0.0]}, filter={"owner": {"$startsWith": "a"}}
        ),
        "ENHANCED",
    )


def test_the_analyzers():
    assert analyze("The Zeppelin's schedules, 2026-11") == ["the", "zeppelin's", "schedules", "2026", "11"]
    assert analyze("The Zeppelin's schedules, 2026-11", "en") == ["zeppelin", "schedule", "2026", "11"]


# ------------------------------------------------------------------------------ the template's index
def _cfn_yaml(path: Path) -> dict[str, Any]:
    """template.yaml with CloudFormation's short tags read as plain values (``!Ref X`` -> ``{"Ref": X}``)."""

    class Loader(yaml.SafeLoader):
        pass

    def tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
        return {suffix: value}

    Loader.add_multi_constructor("!", tag)
    return dict(yaml.load(path.read_text(encoding="utf-8"), Loader=Loader))


def test_the_index_the_template_creates_answers_hybrid_questions():
    """The fake configured from template.yaml's NotesVectorIndex: the chunk text must be full-text
    searchable and stay out of the 2 KB of filterable metadata, or hybrid questions fail."""
    resources = _cfn_yaml(ROOT / "template.yaml")["Resources"]
    fake = FakeS3Vectors.from_template(resources, "vec")
    assert (fake.index, fake.dimension, fake.mode) == ("ragchat-notes", 1024, "ENHANCED")
    assert fake.text_search == {"text": "en"}  # the analyzer bench/bench_hybrid_fusion.py chose
    where = {"vectorBucketName": "vec", "indexName": fake.index}
    one = [1.0] + [0.0] * 1023
    long_chunk = "zeppelin timetable " * 150  # ~2.8 KB of text: only fits as non-filterable
    fake.put_vectors(**where, vectors=[vec("n1", one, text=long_chunk, document_id="D1", enabled=True)])
    out = fake.query_vectors(
        **where,
        topK=3,
        queryVector={"float32": one},
        queryTexts=[{"text": "zeppelin", "metadataKey": "text"}],
        filter={"$and": [{"owner": {"$eq": "alice"}}, {"enabled": {"$eq": True}}]},
    )
    assert [v["key"] for v in out["vectors"]] == ["n1"]
