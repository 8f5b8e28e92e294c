"""The extractive reader's decision for one retrieval (``READER=on``, docs/reader.md): the reader reads
the question with every retrieved note in one batched call (:func:`ragchat.domain.read_answers.passage_of`
is what it reads of each); the question is answerable when the best span over them beats "no answer"
by the reader's threshold (:func:`ragchat.domain.read_answers.answers`), whoever answers (the
extractive answerer quotes the span's sentences, a language model gets the passage first). The
similarity signals are still computed (no passage embeddings) and logged with the reader's
probability; ``chat.reader`` logs the margin, the threshold and the span."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.answerability import ANSWERABLE, NO_ANSWER, Decision, compute_signals
from ragchat.domain.citations import strip_citations
from ragchat.domain.read_answers import Found, answers, best_found, passage_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ragchat.domain.models import Hit
    from ragchat.ports import Reader

logger = Logger(service="ragchat", child=True)


def read_decision(
    reader: Reader,
    threshold: float,
    question: str,
    hits: list[Hit],
    timings: dict[str, float],
    titles: Sequence[str | None] | None = None,
) -> tuple[Decision, Found | None]:
    """(the decision, the best span found or ``None``); ``titles``: each hit's document title (the
    reader reads it on the passage's first line); ``timings["reader"]`` gets the read's time."""
    named = list(titles or ())
    passages = [passage_of(h, named[i] if i < len(named) else None) for i, h in enumerate(hits)]
    t = time.perf_counter()
    readings = reader.read(question, [p.text for p in passages]) if passages else []
    timings["reader"] = (time.perf_counter() - t) * 1000
    found = best_found(passages, readings) if readings else None
    similarities = [h.similarity if h.similarity is not None else h.score for h in hits]
    texts = [strip_citations(h.text) for h in hits]
    signals = compute_signals(question, similarities, texts, None, [h.document_id for h in hits])
    probability = found.reading.probability if found is not None else 0.0
    signals = replace(signals, reader=probability)
    ok = answers(found, threshold)
    logger.info(
        "chat.reader",
        extra={
            "margin": None if found is None else round(found.margin, 3),
            "threshold": threshold,
            "answered": ok,
            "span": None if found is None else found.span[:80],
        },
    )
    return Decision(ok, ANSWERABLE if ok else NO_ANSWER, probability, signals), found
