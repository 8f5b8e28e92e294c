"""Hostile text cannot freeze the server: the patterns that read uploaded documents and chat messages
run in time linear in their input (issue 30's bombs, each at two sizes).

Each bomb is timed at ``n`` and ``8 n`` characters (best of three). Quadratic code takes ~64 times
longer on the bigger input (the old patterns: seconds); linear code takes ~8 times a few
milliseconds. A run passes when the bigger input takes under ``max(24 × small, 0.25 s)``: far from
either side on a loaded two-core machine."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from ragchat.api.body import strict_json
from ragchat.domain.context import nearest_headings
from ragchat.domain.extraction import flatten_html
from ragchat.domain.extractive import split_sentences
from ragchat.domain.parts import split_parts


def _best_of_three(run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


BOMBS: dict[str, tuple[Callable[[int], object], int]] = {
    # an unclosed tag repeated: the old HTML pre-pass scanned to the end for each one
    "html-unclosed-tags": (lambda n: flatten_html("<html><body>hello " + "<a " * n), 4_000),
    # a heading line of " #" pairs: the old heading regex retried the tail at every character
    "markdown-heading": (lambda n: nearest_headings("# x" + " #" * n + "y", ["x"]), 2_000),
    # a run of "!" not followed by a space: the old sentence end tried from every "!"
    "sentence-end-run": (lambda n: split_sentences("Hi" + "!" * n + "x and more."), 4_000),
    # a sentence of abbreviations: the old last-word search re-read the sentence at each one
    "abbreviations": (lambda n: split_sentences("e.g. " * n + "end."), 2_000),
    # spaces before "and": the old part splitter tried every split of the run
    "spaces-before-and": (lambda n: split_parts("what is x" + " " * n + "y and how?"), 300),
    # an unterminated JSON string full of escaped quotes
    "json-unterminated-string": (lambda n: _parse('{"a": "' + '\\"' * n), 4_000),
}


def _parse(body: str) -> object:
    try:
        return strict_json(body)
    except Exception as exc:  # invalid JSON: the answer is a 400, what matters is how soon
        return exc


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_hostile_text_takes_linear_time(name: str) -> None:
    make, n = BOMBS[name]
    small = _best_of_three(lambda: make(n))
    big = _best_of_three(lambda: make(8 * n))
    assert big < max(24 * small, 0.25), f"{name}: {small * 1000:.1f} ms at n={n}, {big * 1000:.1f} ms at 8n"
