"""The answerability decision: signals, the calibrated model, MIN_SIMILARITY as the user's knob.

The examples are written for these tests (not the bench's tuning questions)."""

from __future__ import annotations

import pytest
from ragchat.config import DEFAULT_MIN_SIMILARITY
from ragchat.domain.answerability import (
    CALIBRATED,
    LOW_SIMILARITY,
    WEAK_EVIDENCE,
    Signals,
    compute_signals,
    decide,
    evidence_passages,
)

MINILM = CALIBRATED["all-MiniLM-L6-v2"]
T = DEFAULT_MIN_SIMILARITY["all-MiniLM-L6-v2"]


def signals(top: float, passage: float | None, sentence_coverage: float = 0.3) -> Signals:
    return Signals(top=top, passage=passage, coverage=0.5, sentence_coverage=sentence_coverage, margin=0.1)


def test_every_calibrated_model_was_fitted_at_its_default_threshold() -> None:
    for model_id, coefficients in CALIBRATED.items():
        assert coefficients.threshold == DEFAULT_MIN_SIMILARITY[model_id]


def test_without_coefficients_the_seeds_rule_reads_the_top_similarity_only() -> None:
    assert decide(signals(0.40, None), 0.40, None).answer  # equal does not guard
    refused = decide(signals(0.39, 0.9, 1.0), 0.40, None)
    assert not refused.answer and refused.reason == LOW_SIMILARITY and refused.probability is None


def test_a_precise_passage_answers_a_paraphrased_question_under_the_old_threshold() -> None:
    # a chunk about many things scores low as a whole; one passage of it answers the question
    decision = decide(signals(0.37, 0.62, 0.4), T, MINILM)
    assert decision.answer and decision.probability is not None and decision.probability > MINILM.cutoff


def test_unrelated_questions_are_refused() -> None:
    decision = decide(signals(0.15, 0.2, 0.0), T, MINILM)
    assert not decision.answer and decision.reason == LOW_SIMILARITY


def test_on_topic_but_unanswered_is_refused_as_weak_evidence() -> None:
    # the chunk is about the subject (top above the threshold), no passage says the answer
    decision = decide(signals(0.45, 0.36, 0.2), T, MINILM)
    assert not decision.answer and decision.reason == WEAK_EVIDENCE


def test_min_similarity_stays_the_users_knob() -> None:
    borderline = signals(0.40, 0.43, 0.3)
    p_default = decide(borderline, T, MINILM).probability
    assert p_default is not None
    stricter, laxer = decide(borderline, T + 0.1, MINILM), decide(borderline, T - 0.1, MINILM)
    assert stricter.probability is not None and stricter.probability < p_default
    assert laxer.probability is not None and laxer.probability > p_default
    good = signals(0.6, 0.65, 0.5)
    assert decide(good, T, MINILM).answer and not decide(good, 0.9, MINILM).answer
    assert decide(signals(0.1, 0.1, 0.0), -1.0, MINILM).answer  # -1 answers everything


def test_signals_read_coverage_margin_and_the_best_passage() -> None:
    texts = [
        "Badges are printed at reception. Lost badges cost ten euros to replace.",
        "The canteen opens at noon.",
    ]
    s = compute_signals(
        "How much does replacing a lost badge cost at night?", [0.6, 0.5, 0.4], texts, [0.3, 0.7]
    )
    assert s.top == 0.6
    assert s.margin == pytest.approx(0.15)
    assert s.passage == 0.7
    # content words: replacing, lost, badge, cost, night → all but "night" in the texts
    assert s.coverage == pytest.approx(0.8)
    assert s.sentence_coverage == pytest.approx(0.8)
    assert compute_signals("anything", [], [], None).top == -1.0


def test_passages_are_two_neighbouring_sentences_of_one_chunk_without_markup() -> None:
    texts = ["# Title\n\nOne **bold** claim. Two. Three.", "Alone here.", "A. B is here.", "Not read."]
    assert evidence_passages(texts) == ["One bold claim. Two.", "Two. Three.", "Alone here.", "A. B is here."]
    assert len(evidence_passages(["First. Second. Third. Fourth."] * 3, limit=4)) == 4
