"""Calibrating the answerability decision for the embedder where it runs (``ragchat calibrate``).

The project's grounding dev set (documents and questions labelled answerable, off-topic or
near-topic) is asked through a retriever on the configured embedder — MiniLM locally, Titan or
Cohere with AWS credentials — with the title-prefixed passages embedded, and its signals recorded
(:mod:`ragchat.domain.answerability`). Then:

- the extractive policy's logistic model on ``passage`` and ``sentence_coverage``, fitted
  class-balanced with an L2 penalty; its cutoff the highest that answers ≥ 93 % of the answerable
  questions and refuses every off-topic one (0.5 when none does);
- the reader policy's cutoff (:func:`~ragchat.domain.answerability.fit_reader_cutoff`): every
  off-topic question refused, everything above it let through.

Calibration never makes a mode worse than its built-in fit. An embedder with built-in coefficients
(:data:`~ragchat.domain.answerability.CALIBRATED`, MiniLM) keeps its extractive model and cutoff:
they were chosen by ``bench/bench_grounding.py --select`` under a SQuAD 2.0 balanced-accuracy
constraint this command does not run (on MiniLM the dev-only cutoff would be 0.39, where SQuAD wants
0.45). Only the reader cutoff is refitted, on the built-in model's probabilities, and kept only when
it lets through at least as many answerable dev questions and no more off-topic ones than the
built-in reader cutoff.

The coefficients are stored in the :class:`~ragchat.ports.CalibrationStore` the deployed
functions read (an SSM parameter or the data directory's file), with the figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ragchat.domain.answerability import (
    CALIBRATED,
    Coefficients,
    Signals,
    decide,
    decide_reader,
    features,
    fit_reader_cutoff,
    probability,
)
from ragchat.domain.models import SearchFilter

if TYPE_CHECKING:
    from ragchat.ports import CalibrationStore
    from ragchat.services.retrieval import Retriever

FEATURES = ("passage", "sentence_coverage")
L2 = 0.1
GOAL_ANSWERED = 0.93
CUTOFFS = [round(0.1 + 0.01 * i, 2) for i in range(81)]  # 0.10 … 0.90
KINDS = ("answerable", "off_topic", "near_topic")


@dataclass(frozen=True, slots=True)
class LabelledQuestion:
    question: str
    kind: str  # answerable | off_topic | near_topic


@dataclass(slots=True)
class Calibration:
    model_id: str
    coefficients: Coefficients
    figures: dict[str, Any] = field(default_factory=dict)

    def entry(self) -> dict[str, Any]:
        """What is stored for the model: the coefficients and the figures."""
        return {**self.coefficients.as_json(), "figures": self.figures}


def probe(threshold: float) -> Coefficients:
    """Coefficients that make a retriever embed the passages (their decision is not used)."""
    return Coefficients(threshold, 0.0, {}, 0.5)


def measure(retriever: Retriever, owner: str, questions: Sequence[LabelledQuestion]) -> list[Signals]:
    """Each question's signals (``retriever`` built with :func:`probe` coefficients)."""
    out = []
    for q in questions:
        decision = retriever.retrieve(q.question, SearchFilter(owner=owner)).decision
        if decision is None:
            raise ValueError("calibration needs a knowledge base: no document was indexed")
        out.append(decision.signals)
    return out


def fit_logistic(rows: Sequence[Sequence[float]], labels: Sequence[bool]) -> tuple[float, list[float]]:
    """Class-balanced logistic regression with an L2 penalty on the weights (Newton's method)."""
    import numpy as np

    x = np.hstack([np.ones((len(rows), 1)), np.asarray(rows, dtype=float)])
    y = np.asarray(labels, dtype=float)
    if y.sum() in (0, len(y)):
        raise ValueError("calibration needs answerable and unanswerable questions")
    w = np.zeros(x.shape[1])
    weight = np.where(y == 1, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum())))
    penalty = np.eye(x.shape[1]) * L2
    penalty[0, 0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-(x @ w)))
        grad = x.T @ (weight * (p - y)) + penalty @ w
        hess = (x * (weight * p * (1 - p))[:, None]).T @ x + penalty
        w -= np.linalg.solve(hess, grad)
    return float(w[0]), [float(v) for v in w[1:]]


def choose_cutoff(p: Sequence[float], kinds: Sequence[str]) -> float:
    """The highest cutoff answering ≥ GOAL_ANSWERED of the answerable questions and refusing every
    off-topic one; 0.5 when none does."""
    answerable = [v for v, k in zip(p, kinds, strict=True) if k == "answerable"]
    off = [v for v, k in zip(p, kinds, strict=True) if k == "off_topic"]
    for cut in sorted(CUTOFFS, reverse=True):
        answered = sum(v >= cut for v in answerable) / max(len(answerable), 1)
        if answered >= GOAL_ANSWERED and all(v < cut for v in off):
            return cut
    return 0.5


def fit(signals: Sequence[Signals], kinds: Sequence[str], threshold: float) -> Coefficients:
    """Both policies' coefficients from the dev questions' signals (module docstring)."""
    rows = [[features(s, threshold)[n] for n in FEATURES] for s in signals]
    intercept, weights = fit_logistic(rows, [k == "answerable" for k in kinds])
    named = dict(zip(FEATURES, [round(w, 3) for w in weights], strict=True))
    fitted = Coefficients(threshold, round(intercept, 3), named)
    p = [probability(s, fitted, threshold) for s in signals]
    cutoff = choose_cutoff(p, kinds)
    reader = fit_reader_cutoff(
        [v for v, k in zip(p, kinds, strict=True) if k == "answerable"],
        [v for v, k in zip(p, kinds, strict=True) if k == "off_topic"],
        cutoff,
    )
    return Coefficients(threshold, fitted.intercept, fitted.weights, cutoff, reader)


def keep_built_in(
    signals: Sequence[Signals], kinds: Sequence[str], built_in: Coefficients
) -> tuple[Coefficients, str]:
    """The built-in extractive fit with the reader cutoff refitted on its probabilities, unless the
    refit lets through fewer answerable or more off-topic dev questions than the built-in one; and
    what was kept, in words."""
    p = [probability(s, built_in, built_in.threshold) for s in signals]
    refit = fit_reader_cutoff(
        [v for v, k in zip(p, kinds, strict=True) if k == "answerable"],
        [v for v, k in zip(p, kinds, strict=True) if k == "off_topic"],
        built_in.cutoff,
    )
    old = built_in.reader_cutoff if built_in.reader_cutoff is not None else built_in.cutoff

    def passed(cut: float, kind: str) -> int:
        return sum(v >= cut for v, k in zip(p, kinds, strict=True) if k == kind)

    better = passed(refit, "answerable") >= passed(old, "answerable") and passed(
        refit, "off_topic"
    ) <= passed(old, "off_topic")
    reader = refit if better else old
    note = (
        "extractive: the built-in fit kept (its cutoff is checked against SQuAD 2.0 by "
        "bench/bench_grounding.py, which this command does not run); reader cutoff "
        + (
            f"refitted on it: {reader:.2f}"
            if better
            else f"built-in {old:.2f} kept (the refit {refit:.2f} was worse)"
        )
    )
    kept = Coefficients(built_in.threshold, built_in.intercept, built_in.weights, built_in.cutoff, reader)
    return kept, note


def figures(signals: Sequence[Signals], kinds: Sequence[str], c: Coefficients) -> dict[str, Any]:
    """Per policy and kind: ``[questions let through, questions]`` (answerable: answered; the others:
    let through to the model, i.e. not refused)."""
    out: dict[str, Any] = {}
    for policy, decide_with in (("extractive", decide), ("reader", decide_reader)):
        passed = [decide_with(s, c.threshold, c).answer for s in signals]
        out[policy] = {
            kind: [sum(ok for ok, k in zip(passed, kinds, strict=True) if k == kind), kinds.count(kind)]
            for kind in KINDS
        }
    return out


class Calibrator:
    """Measure → fit → store, for one embedding model."""

    def __init__(self, retriever: Retriever, store: CalibrationStore, *, model_id: str, owner: str) -> None:
        self.retriever = retriever
        self.store = store
        self.model_id = model_id
        self.owner = owner

    def run(self, questions: Sequence[LabelledQuestion], *, save: bool = True) -> Calibration:
        threshold = self.retriever.settings.similarity_threshold
        signals = measure(self.retriever, self.owner, questions)
        kinds = [q.kind for q in questions]
        built_in = CALIBRATED.get(self.model_id)
        if built_in is None:
            coefficients, note = fit(signals, kinds, threshold), "both policies fitted on the dev set"
        else:
            coefficients, note = keep_built_in(signals, kinds, built_in)
        result = Calibration(self.model_id, coefficients, figures(signals, kinds, coefficients))
        result.figures["note"] = note
        result.figures["questions"] = len(questions)
        if save:
            self.store.save(self.model_id, result.entry())
        return result
