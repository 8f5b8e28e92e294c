"""Retrieval decisions (docs/retrieval.md): normalisation, the guard threshold, adaptive top-k, RRF."""

from __future__ import annotations

import pytest
from ragchat.domain.models import Hit
from ragchat.domain.retrieval import needs_adaptive, normalize_question, rrf_fuse, should_guard


def hits(*scores: float) -> list[Hit]:
    return [Hit(id=f"n{i}", score=s, text=f"text {i}") for i, s in enumerate(scores)]


def test_normalize_question_trims_and_collapses_whitespace() -> None:
    assert normalize_question("  what\tis\n\n the   refund\u00a0policy?  ") == "what is the refund policy?"
    assert normalize_question(" \n ") == ""


def test_guard_when_no_hits() -> None:
    assert should_guard([], 0.3)


@pytest.mark.parametrize(
    ("top", "guard"),
    [(0.29999, True), (0.3, False), (0.30001, False), (0.9, False), (-0.5, True)],
)
def test_guard_boundary_equal_to_threshold_does_not_guard(top: float, guard: bool) -> None:
    assert should_guard(hits(top, 0.1), 0.3) is guard


def test_guard_uses_the_best_score_even_if_unsorted() -> None:
    assert not should_guard(hits(0.1, 0.5), 0.3)


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ((0.80, 0.79, 0.77), True),  # spread 0.03 < 0.05
        ((0.80, 0.79, 0.70), False),  # spread 0.10
        ((0.80, 0.78, 0.75), False),  # spread exactly 0.05 is not "small"
        ((0.80, 0.79), False),  # fewer than 3 hits
        ((), False),
    ],
)
def test_adaptive_only_when_the_top3_spread_is_small(scores: tuple[float, ...], expected: bool) -> None:
    assert needs_adaptive(hits(*scores)) is expected


def test_adaptive_parameters() -> None:
    assert needs_adaptive(hits(0.8, 0.7, 0.65), spread=0.2)
    assert not needs_adaptive(hits(0.8, 0.8, 0.8, 0.1), top_k=4)
    assert needs_adaptive(hits(0.8, 0.8, 0.8, 0.1), top_k=3)


def test_rrf_rewards_agreement_between_rankings() -> None:
    vector = hits(0.9, 0.8, 0.7)  # n0, n1, n2
    keyword = [vector[2], vector[1], Hit(id="k9", score=12.0, text="keyword only")]
    fused = rrf_fuse([vector, keyword])
    # n2: ranks 3 and 1; n1: ranks 2 and 2; n0: rank 1 only; k9: rank 3 only
    assert [h.id for h in fused] == ["n2", "n1", "n0", "k9"]
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)
    assert fused[1].score == pytest.approx(2 / 62)
    assert fused[-1].score == pytest.approx(1 / 63)
    assert fused[0].text == "text 2"
    assert vector[2].score == 0.7  # inputs are not modified


def test_rrf_ties_are_deterministic() -> None:
    a = [Hit(id="x", score=1, text=""), Hit(id="y", score=1, text="")]
    b = [Hit(id="y", score=1, text=""), Hit(id="x", score=1, text="")]
    assert [h.id for h in rrf_fuse([a, b])] == ["x", "y"]  # same score, same best rank: first seen
    assert [h.id for h in rrf_fuse([b, a])] == ["y", "x"]


def test_rrf_counts_a_duplicate_within_one_ranking_once() -> None:
    ranking = [Hit(id="x", score=1, text=""), Hit(id="x", score=1, text=""), Hit(id="y", score=1, text="")]
    fused = rrf_fuse([ranking], k=60)
    assert [h.id for h in fused] == ["x", "y"]
    assert fused[0].score == pytest.approx(1 / 61)
    assert fused[1].score == pytest.approx(1 / 63)


def test_rrf_of_nothing() -> None:
    assert rrf_fuse([]) == []
    assert rrf_fuse([[], []]) == []
