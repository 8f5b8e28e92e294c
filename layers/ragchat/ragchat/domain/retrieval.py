"""Retrieval decision rules (docs/retrieval.md): question normalisation, the guard, adaptive top-k and
reciprocal rank fusion. Pure functions over ``Hit`` lists; the search itself is a port."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ragchat.domain.models import Hit

DEFAULT_TOP_K = 3
ADAPTIVE_TOP_K = 5
ADAPTIVE_SPREAD = 0.05
RRF_K = 60


def normalize_question(text: str) -> str:
    """Trim and collapse every run of whitespace (any Unicode space, newlines, tabs) to one space."""
    return " ".join(text.split())


def should_guard(hits: Sequence[Hit], threshold: float) -> bool:
    """Guard mode: no hits, or the best similarity is below ``threshold`` (equal does not guard)."""
    return not hits or max(hit.score for hit in hits) < threshold


def needs_adaptive(
    hits: Sequence[Hit], *, spread: float = ADAPTIVE_SPREAD, top_k: int = DEFAULT_TOP_K
) -> bool:
    """Search again with more results when the top ``top_k`` scores are bunched together: the gap
    between the best and the ``top_k``-th score is below ``spread``. Needs at least ``top_k`` hits."""
    if top_k < 2 or len(hits) < top_k:
        return False
    scores = sorted((hit.score for hit in hits), reverse=True)
    return scores[0] - scores[top_k - 1] < spread


def rrf_scores(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion over id rankings: each id scores Σ 1 / (k + rank) over the rankings it
    appears in (rank from 1; a ranking counts each id once, at its best rank). Best first; ties go to
    the better best rank, then to the earlier ranking and position, then to the id."""
    fused: dict[str, float] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    best_rank: dict[str, int] = {}
    for list_index, ranking in enumerate(rankings):
        seen_here: set[str] = set()
        for position, item in enumerate(ranking):
            if item in seen_here:
                continue
            seen_here.add(item)
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + position + 1)
            best_rank[item] = min(best_rank.get(item, position), position)
            first_seen.setdefault(item, (list_index, position))
    order = sorted(fused, key=lambda i: (-fused[i], best_rank[i], first_seen[i], i))
    return [(i, fused[i]) for i in order]


def rrf_fuse(rankings: Sequence[Sequence[Hit]], k: int = RRF_K) -> list[Hit]:
    """:func:`rrf_scores` over hit lists. Returns copies carrying the fused score (similarity gating
    must use the vector hits, not these), best first. The first ranking that has a hit provides its
    fields."""
    source: dict[str, Hit] = {}
    for ranking in rankings:
        for hit in ranking:
            source.setdefault(hit.id, hit)
    fused = rrf_scores([[hit.id for hit in ranking] for ranking in rankings], k)
    return [dataclasses.replace(source[i], score=score) for i, score in fused]
