"""Retrieval: empty knowledge base, similarity guard, adaptive topK, retries, filters, hybrid mode."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from ragchat.config import load_settings
from ragchat.domain.errors import TransientError, ValidationError
from ragchat.domain.models import SearchFilter, VectorRecord
from ragchat.services import retrieval as retrieval_module
from ragchat.services.retrieval import Retriever

from tests.fakes import FakeEmbedder, FakeVectorIndex

OWNER = "alice"


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def events(self, name: str) -> list[logging.LogRecord]:
        return [r for r in self.records if r.getMessage() == name]


@pytest.fixture
def logs() -> Iterator[Capture]:
    handler = Capture()
    log = logging.getLogger(retrieval_module.logger.name)
    log.addHandler(handler)
    old = log.level
    log.setLevel(logging.DEBUG)
    yield handler
    log.removeHandler(handler)
    log.setLevel(old)


def make(env: dict[str, str] | None = None) -> tuple[Retriever, FakeEmbedder, FakeVectorIndex]:
    settings = load_settings({"MIN_SIMILARITY": "0.35", "RETRIEVAL_MODE": "vector", **(env or {})})
    embedder = FakeEmbedder()
    index = FakeVectorIndex(dimension=embedder.dimension)
    return Retriever(embedder, index, settings), embedder, index


def add(
    index: FakeVectorIndex,
    embedder: FakeEmbedder,
    note: str,
    text: str,
    *,
    owner: str = OWNER,
    collection: str | None = None,
    document_id: str | None = "doc1",
    score: float | None = None,
) -> None:
    index.upsert(
        [
            VectorRecord(
                id=note,
                vector=embedder.vector_for(text),
                text=text,
                owner=owner,
                document_id=document_id,
                chunk_index=0,
                collection=collection,
            )
        ]
    )
    if score is not None:
        index.scores[note] = score


def test_empty_knowledge_base_refuses_before_embedding_or_searching(logs: Capture) -> None:
    retriever, embedder, index = make()
    add(index, embedder, "other", "someone else's note", owner="bob")
    result = retriever.retrieve(
        "  What is  photosynthesis? ", SearchFilter(owner=OWNER), conversation_id="c1"
    )
    assert result.guard is True
    assert result.reason == "empty_knowledge_base"
    assert result.hits == []
    assert embedder.calls == 0
    assert index.search_calls == []
    [event] = logs.events("chat.guard")
    assert event.conversationId == "c1"  # type: ignore[attr-defined]
    assert event.reason == "empty_knowledge_base"  # type: ignore[attr-defined]


def test_question_is_normalized_before_embedding() -> None:
    retriever, embedder, index = make()
    add(index, embedder, "n1", "photosynthesis", score=0.9)
    result = retriever.retrieve("  what\n is   photosynthesis ", SearchFilter(owner=OWNER))
    assert result.question == "what is photosynthesis"
    assert embedder.embedded_texts == ["what is photosynthesis"]


def test_blank_question_is_a_validation_error() -> None:
    retriever, _, _ = make()
    with pytest.raises(ValidationError):
        retriever.retrieve(" \n ", SearchFilter(owner=OWNER))


@pytest.mark.parametrize(("top1", "guard"), [(0.35, False), (0.3499, True), (0.1, True)])
def test_guard_threshold_boundary(top1: float, guard: bool, logs: Capture) -> None:
    retriever, embedder, index = make()
    add(index, embedder, "n1", "a", score=top1)
    add(index, embedder, "n2", "b", score=top1 - 0.2)
    result = retriever.retrieve("question", SearchFilter(owner=OWNER), conversation_id="c9")
    assert result.guard is guard
    assert result.reason == ("low_similarity" if guard else None)
    assert result.top_similarity == pytest.approx(top1)
    assert bool(logs.events("chat.guard")) is guard
    [event] = logs.events("chat.retrieval")
    assert event.conversationId == "c9"  # type: ignore[attr-defined]
    assert event.ids == ["n1", "n2"]  # type: ignore[attr-defined]
    assert event.scores == [pytest.approx(top1), pytest.approx(top1 - 0.2)]  # type: ignore[attr-defined]


def test_bunched_scores_answer_from_top_k_5_with_a_single_search(logs: Capture) -> None:
    retriever, embedder, index = make()
    for i, score in enumerate([0.90, 0.89, 0.88, 0.60, 0.50, 0.40]):
        add(index, embedder, f"n{i}", f"text {i}", score=score)
    result = retriever.retrieve("question", SearchFilter(owner=OWNER))
    assert result.top_k == 5
    assert [h.id for h in result.hits] == ["n0", "n1", "n2", "n3", "n4"]
    assert [k for k, _ in index.search_calls] == [5]  # one search, deep enough for the rule
    assert set(result.timings) == {"embedding_generation", "vector_search"}
    [event] = logs.events("chat.retrieval")
    assert event.ids == ["n0", "n1", "n2", "n3", "n4"]  # type: ignore[attr-defined]


def test_spread_scores_keep_top_k_3(logs: Capture) -> None:
    retriever, embedder, index = make()
    for i, score in enumerate([0.90, 0.80, 0.70, 0.60, 0.50]):
        add(index, embedder, f"n{i}", f"text {i}", score=score)
    result = retriever.retrieve("question", SearchFilter(owner=OWNER))
    assert result.top_k == 3
    assert [h.id for h in result.hits] == ["n0", "n1", "n2"]  # the deeper search is cut back to 3
    assert [k for k, _ in index.search_calls] == [5]
    [event] = logs.events("chat.retrieval")
    assert event.ids == ["n0", "n1", "n2"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("scores", "expected_k"),
    [
        ([0.90, 0.86, 0.851, 0.84, 0.83, 0.82, 0.81], 5),  # top-1 - top-3 = 0.049 < 0.05
        ([0.90, 0.86, 0.85, 0.84, 0.83, 0.82, 0.81], 3),  # exactly 0.05: not bunched
        ([0.90, 0.20, 0.10, 0.05], 3),
        ([0.90, 0.89], 3),  # fewer than 3 hits: nothing to widen
    ],
)
def test_single_search_returns_what_a_top_3_then_top_5_search_would(
    scores: list[float], expected_k: int
) -> None:
    retriever, embedder, index = make()
    for i, score in enumerate(scores):
        add(index, embedder, f"n{i}", f"text {i}", score=score)
    result = retriever.retrieve("question", SearchFilter(owner=OWNER))
    vector = embedder.embed_query("question")
    reference = index.search(vector, SearchFilter(owner=OWNER), expected_k)
    assert result.top_k == expected_k
    assert [h.id for h in result.hits] == [h.id for h in reference]
    assert len(result.hits) == min(expected_k, len(scores))


def test_adaptive_top_k_not_above_top_k_never_widens() -> None:
    retriever, embedder, index = make({"TOP_K": "4", "ADAPTIVE_TOP_K": "2"})
    for i, score in enumerate([0.90, 0.90, 0.90, 0.90, 0.90]):
        add(index, embedder, f"n{i}", f"text {i}", score=score)
    result = retriever.retrieve("question", SearchFilter(owner=OWNER))
    assert result.top_k == 4
    assert len(result.hits) == 4
    assert [k for k, _ in index.search_calls] == [4]


def test_a_transient_search_error_is_retried_once() -> None:
    retriever, embedder, index = make()
    add(index, embedder, "n1", "text", score=0.9)
    index.fail_searches = 1
    result = retriever.retrieve("question", SearchFilter(owner=OWNER))
    assert [h.id for h in result.hits] == ["n1"]
    assert len(index.search_calls) == 2


def test_a_second_transient_error_is_raised() -> None:
    retriever, embedder, index = make()
    add(index, embedder, "n1", "text", score=0.9)
    index.fail_searches = 2
    with pytest.raises(TransientError):
        retriever.retrieve("question", SearchFilter(owner=OWNER))
    assert len(index.search_calls) == 2


def test_filter_is_passed_through_and_confines_results() -> None:
    retriever, embedder, index = make()
    add(index, embedder, "mine", "solar panels", collection="energy", document_id="d1", score=0.9)
    add(index, embedder, "mine-other-doc", "solar", collection="energy", document_id="d2", score=0.95)
    add(index, embedder, "mine-other-coll", "solar", collection="misc", document_id="d1", score=0.99)
    add(index, embedder, "bobs", "solar", owner="bob", collection="energy", document_id="d1", score=0.99)
    flt = SearchFilter(owner=OWNER, collection="energy", document_id="d1")
    result = retriever.retrieve("solar", flt)
    assert index.search_calls[0][1] == flt
    assert [h.id for h in result.hits] == ["mine"]


def test_hybrid_mode_ranks_with_fusion_but_gates_on_vector_similarity() -> None:
    retriever, embedder, index = make({"RETRIEVAL_MODE": "hybrid"})
    add(index, embedder, "n1", "solar panels convert sunlight", score=0.9)
    add(index, embedder, "n2", "wind turbines", score=0.5)
    result = retriever.retrieve("solar panels", SearchFilter(owner=OWNER))
    assert not result.guard
    assert index.hybrid_calls == 1
    assert result.hits[0].id == "n1"
    assert result.hits[0].score < 0.1  # a fused (RRF) score, not the similarity
    assert result.top_similarity == pytest.approx(0.9)

    low, embedder2, index2 = make({"RETRIEVAL_MODE": "hybrid"})
    add(index2, embedder2, "n1", "solar panels convert sunlight", score=0.2)
    guarded = low.retrieve("solar panels", SearchFilter(owner=OWNER))
    assert guarded.guard and guarded.reason == "low_similarity"
    assert index2.hybrid_calls == 0  # refused on the vector score; no fusion needed


# ------------------------------------------------------------------ answerability decision
def test_guard_and_retrieval_events_carry_the_similarity_the_signals_and_the_reason(logs: Capture) -> None:
    retriever, embedder, index = make()
    add(index, embedder, "n1", "solar panels convert sunlight", score=0.2)
    retriever.retrieve("solar panels", SearchFilter(owner=OWNER))
    [guard] = logs.events("chat.guard")
    assert guard.reason == "low_similarity"  # type: ignore[attr-defined]
    assert guard.topSimilarity == pytest.approx(0.2)  # type: ignore[attr-defined]
    assert guard.signals["top"] == pytest.approx(0.2)  # type: ignore[attr-defined]
    assert {"passage", "coverage", "sentenceCoverage", "margin"} <= guard.signals.keys()  # type: ignore[attr-defined]
    [event] = logs.events("chat.retrieval")
    assert event.decision == "low_similarity"  # type: ignore[attr-defined]


def test_a_calibrated_embedder_embeds_the_top_passages_and_can_refuse_on_weak_evidence(
    monkeypatch: pytest.MonkeyPatch, logs: Capture
) -> None:
    from ragchat.domain import answerability

    # a model that trusts only passages: a high chunk similarity alone is not enough
    strict = answerability.Coefficients(0.35, -5.0, {"passage": 1.0}, 0.5)
    monkeypatch.setitem(answerability.CALIBRATED, "fake-embedder", strict)
    retriever, embedder, index = make()
    add(index, embedder, "n1", "Solar panels convert sunlight. They last decades.", score=0.9)
    before = embedder.document_calls
    result = retriever.retrieve("solar panels", SearchFilter(owner=OWNER))
    assert embedder.document_calls == before + 1
    assert "Solar panels convert sunlight. They last decades." in embedder.embedded_texts
    assert result.guard and result.reason == "weak_evidence"
    assert result.decision is not None and result.decision.probability is not None
    [guard] = logs.events("chat.guard")
    assert guard.answerProbability < 0.5  # type: ignore[attr-defined]

    lenient = answerability.Coefficients(0.35, 5.0, {"passage": 1.0}, 0.5)
    monkeypatch.setitem(answerability.CALIBRATED, "fake-embedder", lenient)
    assert not retriever.retrieve("solar panels", SearchFilter(owner=OWNER)).guard


def test_answerability_similarity_skips_the_passages_and_reads_the_top_similarity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ragchat.domain import answerability

    strict = answerability.Coefficients(0.35, -5.0, {"passage": 1.0}, 0.5)  # would refuse
    monkeypatch.setitem(answerability.CALIBRATED, "fake-embedder", strict)
    retriever, embedder, index = make({"ANSWERABILITY": "similarity"})
    add(index, embedder, "n1", "Solar panels convert sunlight. They last decades.", score=0.9)
    before = embedder.document_calls
    result = retriever.retrieve("solar panels", SearchFilter(owner=OWNER))
    assert embedder.document_calls == before  # no passage embedded: the cheap path
    assert not result.guard  # 0.9 ≥ MIN_SIMILARITY 0.35
