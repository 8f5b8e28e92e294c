"""The reader (``READER=on``, docs/reader.md): a judge reading the question with each passage. The
decision with its signal (a fake reader), the passages it reads, the bootstrap switch, and the real
trained model when it is prepared (skipped otherwise, like the other model-dependent tests)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import pytest
from ragchat.config import load_settings
from ragchat.domain import answerability
from ragchat.domain.answerability import WEAK_EVIDENCE, Coefficients, Signals, reader_choice
from ragchat.domain.models import SearchFilter
from ragchat.services.retrieval import Retriever

from tests.fakes import FakeEmbedder, FakeVectorIndex
from tests.unit.test_retrieval_service import OWNER, add

# answers when the reader is sure; the similarity alone no longer decides
WITH_READER = Coefficients(threshold=0.35, intercept=-6.0, weights={"reader": 12.0}, cutoff=0.5)
NOTE = "The office opens at nine. Visitors sign in at the front desk."


class FakeReader:
    """Scores a passage 0.95 when it holds one of ``answers``, else 0.05; records what it read."""

    def __init__(self, *answers: str) -> None:
        self.answers = answers
        self.read: list[tuple[str, list[str]]] = []

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        self.read.append((question, list(passages)))
        return [0.95 if any(a in p for a in self.answers) else 0.05 for p in passages]


def retriever(reader: FakeReader | None, monkeypatch: pytest.MonkeyPatch) -> Retriever:
    monkeypatch.setitem(answerability.CALIBRATED_WITH_READER, "fake-embedder", WITH_READER)
    monkeypatch.setitem(
        answerability.CALIBRATED,
        "fake-embedder",
        Coefficients(threshold=0.35, intercept=2.0, weights={"passage": 1.0}, cutoff=0.5),  # lenient
    )
    settings = load_settings({"MIN_SIMILARITY": "0.35", "RETRIEVAL_MODE": "vector"})
    embedder = FakeEmbedder()
    index = FakeVectorIndex(dimension=embedder.dimension)
    add(index, embedder, "n1", NOTE, score=0.6)
    return Retriever(embedder, index, settings, reader=reader)


def test_a_passage_the_reader_finds_the_answer_in_is_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = FakeReader("opens at nine")
    result = retriever(reader, monkeypatch).retrieve("When does the office open?", SearchFilter(owner=OWNER))
    assert result.guard is False and result.decision is not None
    assert result.decision.signals.reader == pytest.approx(0.95)
    [(question, passages)] = reader.read
    assert question == "When does the office open?"
    assert passages == ["The office opens at nine. Visitors sign in at the front desk."]


def test_on_topic_evidence_without_the_answer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # the note is about the office (similar enough to answer by similarity alone), but the reader
    # finds no answer to the question in it: near-topic, refused
    similarity_only = retriever(None, monkeypatch).retrieve(
        "When does the office close?", SearchFilter(owner=OWNER)
    )
    assert similarity_only.guard is False
    result = retriever(FakeReader("closes at"), monkeypatch).retrieve(
        "When does the office close?", SearchFilter(owner=OWNER)
    )
    assert result.guard is True and result.reason == WEAK_EVIDENCE
    assert result.decision is not None and result.decision.signals.reader == pytest.approx(0.05)


def test_the_reader_signal_enters_the_probability() -> None:
    base = Signals(top=0.5, passage=0.5, coverage=0.5, sentence_coverage=0.5, margin=0.1)
    sure = Signals(top=0.5, passage=0.5, coverage=0.5, sentence_coverage=0.5, margin=0.1, reader=0.9)
    assert answerability.decide(base, 0.35, WITH_READER).answer is False  # no reader: 0
    decision = answerability.decide(sure, 0.35, WITH_READER)
    assert decision.answer is True and decision.signals.as_log()["reader"] == 0.9


def test_the_reader_reads_the_most_similar_passages_in_their_order() -> None:
    passages = [f"p{i}" for i in range(12)]
    similarities = [0.9 if i % 3 else 0.1 for i in range(12)]  # 8 passages at 0.9
    chosen = reader_choice(passages, similarities)
    assert len(chosen) == answerability.READER_PASSAGES == 8
    assert chosen == ["p1", "p2", "p4", "p5", "p7", "p8", "p10", "p11"]
    assert reader_choice(passages, None) == passages[: answerability.READER_PASSAGES]


def test_reader_off_builds_no_reader_and_on_without_the_model_names_the_command(tmp_path: Path) -> None:
    from ragchat.adapters.local.onnx_embedder import ModelNotPreparedError
    from ragchat.bootstrap.models import Models

    off = Models(load_settings({"RAGCHAT_DATA_DIR": str(tmp_path / "d"), "RAGCHAT_MODEL_DIR": str(tmp_path)}))
    assert off.reader is None
    on = Models(
        load_settings(
            {"RAGCHAT_DATA_DIR": str(tmp_path / "d"), "RAGCHAT_MODEL_DIR": str(tmp_path), "READER": "on"}
        )
    )
    with pytest.raises(ModelNotPreparedError, match="make reader"):
        _ = on.reader


# ------------------------------------------------------------------------- the real trained model
def _reader_models() -> Path | None:
    from ragchat.adapters.local.reader import MODEL_FILE, reader_dir

    with contextlib.suppress(Exception):
        path = load_settings().models_path
        if (reader_dir(path) / MODEL_FILE).is_file():
            return path
    return None


READER_MODELS = _reader_models()


@pytest.mark.skipif(READER_MODELS is None, reason="reader model not prepared: run `make reader`")
def test_the_trained_reader_scores_the_answering_sentence_above_the_others() -> None:
    from ragchat.adapters.local.reader import OnnxReader

    assert READER_MODELS is not None
    reader = OnnxReader.from_cache(READER_MODELS)
    question = "How long do refunds take to reach the customer?"
    answering = "Refund policy: Refunds reach the customer's card within five business days."
    near = "Refund policy: Refunds are requested from the orders page by the account owner."
    unrelated = "Garden club: Tomatoes grow well on a sunny balcony in large pots."
    scores = reader.score(question, [answering, near, unrelated])
    # the answering sentence first, then the one about refunds that does not answer, then the other
    assert scores[0] > scores[1] > scores[2]
    assert scores[0] > 2 * scores[2]
