"""``ragchat calibrate`` (issue 36 item 4): the grounding dev set's signals through the configured
embedder (a fake one here), both policies fitted, the coefficients stored where the chat functions
read them — an SSM parameter (moto) or the data directory's file — and used by the next retriever."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from ragchat.adapters.aws.ssm_calibration import SsmCalibration
from ragchat.adapters.local.calibration_file import FileCalibration
from ragchat.config import load_settings
from ragchat.domain.answerability import CALIBRATED, Coefficients, decide_reader
from ragchat.domain.models import SearchFilter, VectorRecord
from ragchat.services.calibration import Calibrator, LabelledQuestion, probe
from ragchat.services.retrieval import Retriever

from tests.fakes import FakeEmbedder, FakeVectorIndex

OWNER = "calibration"
NOTES = {
    "d-ferry": "Dogs may travel on the ferry deck if kept on a short lead. Ferry tickets cost four pounds.",
    "d-cafe": "The harbour cafe sells sandwiches and hot drinks. The cafe closes at six in winter.",
    "d-museum": "The maritime museum opens at ten. Museum entry is free for children under five.",
}
QUESTIONS = [
    LabelledQuestion("Can dogs travel on the ferry?", "answerable"),
    LabelledQuestion("How much do ferry tickets cost?", "answerable"),
    LabelledQuestion("When does the harbour cafe close?", "answerable"),
    LabelledQuestion("Does the cafe sell sandwiches?", "answerable"),
    LabelledQuestion("When does the maritime museum open?", "answerable"),
    LabelledQuestion("Is museum entry free for children?", "answerable"),
    LabelledQuestion("Who won the snooker final?", "off_topic"),
    LabelledQuestion("Translate good morning into Japanese.", "off_topic"),
    LabelledQuestion("Write a haiku about autumn leaves.", "off_topic"),
    LabelledQuestion("Does the ferry have wifi on board?", "near_topic"),
]


def _retriever() -> Retriever:
    settings = load_settings({"MIN_SIMILARITY": "0.35", "RETRIEVAL_MODE": "vector"})
    embedder = FakeEmbedder()
    index = FakeVectorIndex(dimension=embedder.dimension)
    for doc, text in NOTES.items():
        index.upsert([VectorRecord(f"{doc}-0", embedder.vector_for(text), text, OWNER, doc, 0)])
    return Retriever(embedder, index, settings, calibration=probe(0.35))


def test_calibration_fits_both_policies_and_stores_them_in_the_data_directory(tmp_path: Path) -> None:
    store = FileCalibration(tmp_path / "answerability.json")
    result = Calibrator(_retriever(), store, model_id="fake-embedder", owner=OWNER).run(QUESTIONS)
    c = result.coefficients
    assert set(c.weights) == {"passage", "sentence_coverage"} and c.threshold == 0.35
    assert c.reader_cutoff is not None and c.reader_cutoff <= c.cutoff
    # the figures it prints: every off-topic dev question refused by both policies
    for policy in ("extractive", "reader"):
        assert result.figures[policy]["off_topic"] == [0, 3]
        assert result.figures[policy]["answerable"][1] == 6
    stored = store.load()["fake-embedder"]
    assert Coefficients.from_json(stored) == c and stored["figures"]["questions"] == 10


def test_a_dry_run_stores_nothing(tmp_path: Path) -> None:
    store = FileCalibration(tmp_path / "answerability.json")
    Calibrator(_retriever(), store, model_id="fake-embedder", owner=OWNER).run(QUESTIONS, save=False)
    assert store.load() == {}


@mock_aws
def test_the_ssm_parameter_keeps_each_embedding_models_coefficients() -> None:
    client = boto3.client("ssm", region_name="us-east-1")
    client.put_parameter(Name="/ragchat/answerability", Value="{}", Type="String")
    store = SsmCalibration(client, "/ragchat/answerability")
    Calibrator(_retriever(), store, model_id="amazon.titan-embed-text-v2:0", owner=OWNER).run(QUESTIONS)
    store.save("cohere.embed-english-v3", {"threshold": 0.3, "intercept": 0, "weights": {}})
    loaded = store.load()
    assert set(loaded) == {"amazon.titan-embed-text-v2:0", "cohere.embed-english-v3"}
    assert Coefficients.from_json(loaded["amazon.titan-embed-text-v2:0"]).reader_cutoff is not None


@mock_aws
def test_a_missing_parameter_means_not_calibrated() -> None:
    assert SsmCalibration(boto3.client("ssm", region_name="us-east-1"), "/nope").load() == {}


def test_the_chat_reads_the_stored_coefficients_for_its_embedder(tmp_path: Path) -> None:
    from ragchat.bootstrap import Container

    settings = load_settings({"RAGCHAT_DATA_DIR": str(tmp_path), "RAGCHAT_CHAT_MODEL": "extractive"})
    fitted = Coefficients(0.4, -1.0, {"passage": 8.0}, 0.5, 0.2)
    FileCalibration(settings.calibration_file).save("all-MiniLM-L6-v2", fitted.as_json())
    container = Container(settings)
    container.__dict__["embedder"] = FakeEmbedder(model_id="all-MiniLM-L6-v2")
    try:
        assert container.stored_calibration == fitted
        assert container.retriever.calibration == fitted and container.retriever.policy == "extractive"
    finally:
        container.close()


def test_an_unreadable_store_leaves_the_built_in_decision(tmp_path: Path) -> None:
    from ragchat.bootstrap import Container

    settings = load_settings({"RAGCHAT_DATA_DIR": str(tmp_path), "RAGCHAT_CHAT_MODEL": "extractive"})
    settings.calibration_file.parent.mkdir(parents=True, exist_ok=True)
    settings.calibration_file.write_text('{"all-MiniLM-L6-v2": {"threshold": "x"}}')
    container = Container(settings)
    container.__dict__["embedder"] = FakeEmbedder(model_id="all-MiniLM-L6-v2")
    try:
        assert container.stored_calibration is None
    finally:
        container.close()


@pytest.mark.parametrize("split", ["dev"])
def test_the_cli_reads_the_set_folder(tmp_path: Path, split: str) -> None:
    import json

    from ragchat.cli.calibrate import read_set

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nText.")
    (tmp_path / "docs" / "h.pdf.txt").write_text("Page one.\fPage two.")
    rows = [
        {"question": "Q1?", "kind": "answerable", "document": "a.md", "split": "dev"},
        {"question": "Q2?", "kind": "off_topic", "document": None, "split": "test"},
    ]
    (tmp_path / "questions.json").write_text(json.dumps({"questions": rows}))
    docs, questions = read_set(tmp_path, split)
    assert sorted(docs) == ["a.md", "h.txt"] and docs["h.txt"] == b"Page one.\n\nPage two."
    assert questions == [LabelledQuestion("Q1?", "answerable")]


def test_a_deployments_embedder_is_kept_for_the_throwaway_local_knowledge_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RAGCHAT_BACKEND=aws without RAGCHAT_EMBEDDER means Titan: the scratch knowledge base is local
    (SQLite) but still embeds with Titan, and the coefficients go to the stack's SSM parameter."""
    from ragchat.bootstrap import Container
    from ragchat.cli.calibrate import run_calibration

    deployed = {
        "RAGCHAT_BACKEND": "aws",
        "AWS_REGION": "us-east-1",
        "ANSWERABILITY_PARAMETER": "/ragchat/dev/answerability",
        **{k: "x" for k in ("DOCUMENTS_TABLE", "CONVERSATIONS_TABLE", "COUNTERS_TABLE", "DOCUMENTS_BUCKET")},
        "OPENSEARCH_ENDPOINT": "https://search.example",
    }
    settings = load_settings(deployed)
    seen: list[tuple[str, str, str, str]] = []

    class Stop(Exception):
        pass

    def fake_container(s):  # type: ignore[no-untyped-def]
        seen.append((s.backend, s.embedder_kind, s.vector_index_kind, s.answerability_parameter))
        if len(seen) == 2:
            raise Stop
        return Container(s)

    monkeypatch.setattr("ragchat.bootstrap.Container", fake_container)
    with pytest.raises(Stop):
        run_calibration(settings, {}, [], workdir=str(tmp_path))
    assert seen == [
        ("aws", "titan", "opensearch", "/ragchat/dev/answerability"),  # where the coefficients go
        ("local", "titan", "sqlite", ""),  # the throwaway knowledge base
    ]


@mock_aws
def test_with_the_stacks_parameter_named_the_chat_reads_the_coefficients_from_ssm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragchat.bootstrap import Container

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    fitted = Coefficients(0.35, -1.0, {"passage": 8.0}, 0.5, 0.2)
    client = boto3.client("ssm", region_name="us-east-1")
    client.put_parameter(Name="/ragchat/dev/answerability", Value="{}", Type="String")
    SsmCalibration(client, "/ragchat/dev/answerability").save(
        "amazon.titan-embed-text-v2:0", fitted.as_json()
    )
    settings = load_settings(
        {
            "RAGCHAT_DATA_DIR": str(tmp_path),
            "RAGCHAT_CHAT_MODEL": "extractive",
            "ANSWERABILITY_PARAMETER": "/ragchat/dev/answerability",
            "AWS_REGION": "us-east-1",
        }
    )
    container = Container(settings)
    container.__dict__["embedder"] = FakeEmbedder(model_id="amazon.titan-embed-text-v2:0")
    try:
        assert container.retriever.calibration == fitted
    finally:
        container.close()


def test_calibration_never_replaces_a_built_in_extractive_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedder with built-in coefficients keeps its extractive model and cutoff (they were chosen
    under a SQuAD 2.0 check calibrate does not run: on MiniLM a dev-only refit stored 0.39 over the
    built-in 0.45); only the reader cutoff may change, and only when it is no worse on the dev set."""
    built_in = Coefficients(0.35, -2.0, {"passage": 6.0, "sentence_coverage": 1.5}, 0.61, 0.05)
    monkeypatch.setitem(CALIBRATED, "fake-embedder", built_in)
    store = FileCalibration(tmp_path / "answerability.json")
    result = Calibrator(_retriever(), store, model_id="fake-embedder", owner=OWNER).run(QUESTIONS)
    c = Coefficients.from_json(store.load()["fake-embedder"])
    assert (c.threshold, c.intercept, dict(c.weights), c.cutoff) == (0.35, -2.0, dict(built_in.weights), 0.61)
    # the reader policy refuses every off-topic dev question and lets through at least as many
    # answerable ones as the built-in reader cutoff did
    assert result.figures["reader"]["off_topic"][0] == 0
    retriever = _retriever()
    old = sum(
        decide_reader(
            retriever.retrieve(q.question, SearchFilter(owner=OWNER)).decision.signals, 0.35, built_in
        ).answer
        for q in QUESTIONS
        if q.kind == "answerable"
    )
    assert result.figures["reader"]["answerable"][0] >= old
    assert "built-in fit kept" in result.figures["note"]
