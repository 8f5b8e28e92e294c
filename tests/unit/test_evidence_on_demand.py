"""``EVIDENCE_WARMING=on_demand``: nothing is embedded in the background; a question embeds the
evidence (decision passages, answer sentences) of the chunks it reaches, stores it, and the next
question on them embeds nothing but itself; answers are those of a fully warmed instance. And stored
evidence vectors are kept apart by the embedder's precision."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from ragchat.bootstrap import Container
from ragchat.cli.serve import warm_unwarmed
from ragchat.config import load_settings
from ragchat.domain import answerability
from ragchat.services.evidence import chunk_evidence_texts

from tests.fakes import FakeEmbedder
from tests.unit.evidence_docs import GUIDE, POLICY, QUESTIONS

OWNER = "local"
MODEL = "fake-calibrated"


class _Counting(FakeEmbedder):
    """FakeEmbedder recording every text given to ``embed_documents``."""

    def __init__(self, precision: str = "fp32") -> None:
        super().__init__(model_id=MODEL)
        self.precision = precision
        self.documents: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.documents += texts
        return super().embed_documents(texts)


@pytest.fixture(autouse=True)
def calibrated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake embedder gets coefficients, so the decision reads passages as MiniLM's does."""
    monkeypatch.setitem(
        answerability.CALIBRATED,
        MODEL,
        answerability.Coefficients(0.2, intercept=0.0, weights={"passage": 5.0}, cutoff=0.3),
    )


def _container(data: Path, embedder: _Counting | None = None, **env: str) -> Container:
    settings = load_settings(
        {"RAGCHAT_DATA_DIR": str(data), "RAGCHAT_CHAT_MODEL": "extractive", "MIN_SIMILARITY": "0.2", **env}
    )
    return Container(settings, embedder=embedder or _Counting())


def _counting(box: Container) -> _Counting:
    embedder = box.embedder
    assert isinstance(embedder, _Counting)
    return embedder


def _ingest(box: Container) -> None:
    box.ingestion.submit_file(OWNER, data=POLICY.encode(), filename="expense-policy.md")
    box.ingestion.submit_file(OWNER, data=GUIDE.encode(), filename="office-guide.txt")
    assert box.launcher.wait_idle(30)
    assert box.launcher.wait_warm(30)  # type: ignore[attr-defined]


def _every_evidence_text(box: Container) -> set[str]:
    out: set[str] = set()
    for doc in box.documents.list_documents(OWNER).items:
        for note in box.documents.list_notes(OWNER, document_id=doc.id).items:
            out.update(chunk_evidence_texts(note.text, doc.title, passages=True, sentences=True))
    return out


def _chunks_with_evidence(box: Container) -> set[str]:
    with box._sqlite.read() as conn:
        return {str(r[0]) for r in conn.execute("SELECT DISTINCT chunk_id FROM evidence_vectors")}


def _answers(box: Container) -> list[tuple[bool, str]]:
    out = []
    for q in QUESTIONS:
        result = box.ask.ask(OWNER, q)
        out.append((result.guard_used, result.answer.split("[source:")[0]))  # chunk ids differ by instance
    return out


def test_on_demand_embeds_no_evidence_for_chunks_nobody_asked_about(tmp_path: Path) -> None:
    with _container(tmp_path, EVIDENCE_WARMING="on_demand") as box:
        _ingest(box)
        assert box.evidence_warmer is None
        assert warm_unwarmed(box) == 0  # `ragchat serve` queues nothing either
        assert not set(_counting(box).documents) & _every_evidence_text(box)
        assert _chunks_with_evidence(box) == set()


def test_a_question_stores_the_evidence_of_the_chunks_it_reaches_and_asked_again_embeds_nothing(
    tmp_path: Path,
) -> None:
    question = "How long do I have to hand in an expense report?"
    one_chunk = {"TOP_K": "1", "ADAPTIVE_TOP_K": "1"}  # a question reaches one chunk of the two
    with _container(tmp_path, EVIDENCE_WARMING="on_demand", **one_chunk) as box:
        _ingest(box)
        embedder = _counting(box)
        embedder.documents.clear()
        first = box.ask.ask(OWNER, question)
        assert not first.guard_used
        assert first.sources and first.sources[0].title == "expense-policy.md"
        assert embedder.documents  # the reached chunks' passages and sentences, on this question
        assert _chunks_with_evidence(box) == {first.sources[0].id}  # only the chunk it reached
        embedder.documents.clear()
        assert box.ask.ask(OWNER, question).answer == first.answer
        assert embedder.documents == []
    # another process (nothing in memory) reads them from the store
    with _container(tmp_path, EVIDENCE_WARMING="on_demand", **one_chunk) as again:
        assert again.ask.ask(OWNER, question).answer == first.answer
        assert _counting(again).documents == []


def test_on_demand_answers_are_those_of_a_warmed_instance(tmp_path: Path) -> None:
    with _container(tmp_path / "warmed") as warmed:
        _ingest(warmed)
        assert _chunks_with_evidence(warmed)  # every chunk's evidence was stored after READY
        expected = _answers(warmed)
    with _container(tmp_path / "lazy", EVIDENCE_WARMING="on_demand") as lazy:
        _ingest(lazy)
        first = _answers(lazy)
        embedder = _counting(lazy)
        embedder.documents.clear()
        second = _answers(lazy)
        assert embedder.documents == []
    assert sum(1 for refused, _ in expected if not refused) >= 4
    assert first == expected
    assert second == expected


def test_evidence_stored_with_one_precision_is_not_read_with_the_other(tmp_path: Path) -> None:
    """Switching ``EMBEDDER_PRECISION`` must not mix fp32 and int8 vectors: the evidence stored by
    one is not read by the other, which embeds (and stores) its own."""
    question = "When does the Lisbon office open?"
    with _container(tmp_path, _Counting("fp32"), EVIDENCE_WARMING="on_demand") as fp32:
        _ingest(fp32)
        fp32.ask.ask(OWNER, question)
    with _container(tmp_path, _Counting("int8"), EVIDENCE_WARMING="on_demand") as int8:
        int8.ask.ask(OWNER, question)
        assert _counting(int8).documents  # not the fp32 vectors
        _counting(int8).documents.clear()
        int8.ask.ask(OWNER, question)
        assert _counting(int8).documents == []  # its own, stored
    with _container(tmp_path, _Counting("fp32"), EVIDENCE_WARMING="on_demand") as back:
        back.ask.ask(OWNER, question)
        assert _counting(back).documents == []  # fp32's are still there, apart


def test_a_precision_switch_warms_the_documents_again_in_the_background(tmp_path: Path) -> None:
    """With background warming, documents warmed by fp32 are warmed again for int8 (its own vectors,
    before any question), so an int8 question embeds only itself; switching back embeds nothing."""
    question = "When does the Lisbon office open?"
    with _container(tmp_path, _Counting("fp32")) as fp32:
        _ingest(fp32)
        fp32.ask.ask(OWNER, question)
    with _container(tmp_path, _Counting("int8")) as int8:
        warm_unwarmed(int8)
        assert int8.launcher.wait_warm(30)  # type: ignore[attr-defined]
        assert set(_counting(int8).documents) == _every_evidence_text(int8)
        _counting(int8).documents.clear()
        int8.ask.ask(OWNER, question)
        assert _counting(int8).documents == []  # the question's own vector comes from embed_query
    with _container(tmp_path, _Counting("fp32")) as back:
        warm_unwarmed(back)
        assert back.launcher.wait_warm(30)  # type: ignore[attr-defined]
        back.ask.ask(OWNER, question)
        assert _counting(back).documents == []  # fp32's vectors were still there
