"""Answerability (docs/retrieval.md step 4): is the retrieved evidence strong enough to answer from?

The seeds' rule reads one number, the top-1 cosine similarity. It cannot tell "answered here" from
"about this, but not answered" or "unrelated": paraphrased questions score low, and questions about
the same domain that the documents do not answer score as high as answerable ones. This module
reads several signals, all computable wherever an embedder and the hits' texts are at hand (local
MiniLM and Bedrock alike):

- ``top``: the top-1 chunk similarity (cosine, from the vector search);
- ``passage``: the best similarity of the question to a passage of two consecutive sentences of one
  of the top chunks, prefixed with its document's title (the caller embeds those passages as
  documents; one vector for a whole chunk dilutes a precise answer among its other sentences, a
  single sentence loses its neighbour, and without its title a passage often never names its
  subject);
- ``coverage``: the share of the question's content words found in the top chunks;
- ``sentence_coverage``: the best share of them found in a single sentence of the top chunks;
- ``margin``: how far the top-1 similarity stands above the mean of the next hits.

They are combined by a small logistic model, ``P(answerable) = σ(b + w · x)``, whose coefficients
are fitted per embedding model on the dev split of the project's own grounding set
(``bench/bench_grounding.py --fit``) and live here. The similarity enters as ``top − MIN_SIMILARITY``:
the model was fitted at the model's calibrated default threshold, and a user who raises
``MIN_SIMILARITY`` by 0.05 makes the decision act as if every top similarity were 0.05 lower (and
the reverse), so ``MIN_SIMILARITY`` stays the user's knob. An embedding model without coefficients
keeps the seeds' rule: refuse when the top-1 similarity is below ``MIN_SIMILARITY``.

Two policies, chosen by who answers (:func:`decide_for`):

- ``extractive`` (the local answerer copies sentences, so what it is given must answer): the
  calibrated decision above.
- ``reader`` (Claude reads the sources; the fixed system prompt tells it to state limitations):
  the guard refuses only what is clearly unrelated and lets borderline evidence through. With
  coefficients, the same probability against the lower ``reader_cutoff`` (:func:`fit_reader_cutoff`:
  halfway between the dev set's highest off-topic question and its lowest answerable one); a question
  let through below the extractive cutoff (borderline evidence) is refused after all when most of its
  subject words are in none of the caller's notes (``unknown_words``, looked up by
  ``ragchat.services.vocabulary``). Without
  them (an embedding model nobody calibrated yet: Titan or Cohere before ``ragchat calibrate``),
  signals that do not depend on the embedder's cosine scale: the share of the question's content
  words found in the top chunks (``coverage``) and whether the top chunks agree on one document
  (``agreement``, rank agreement); it refuses only a question none of whose words the evidence
  has, unless all the top chunks come from one document.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragchat.domain.citations import strip_citations
from ragchat.domain.context import title_words
from ragchat.domain.extractive import split_sentences, tokens
from ragchat.domain.models import Hit

ANSWERABLE = "answerable"
LOW_SIMILARITY = "low_similarity"
WEAK_EVIDENCE = "weak_evidence"

#: passages of the top chunks embedded for the ``passage`` signal (cost bound per question)
MAX_PASSAGES = 24
#: chunks whose sentences and words are read
EVIDENCE_CHUNKS = 3
_PREFIX = 5  # words sharing their first 5 letters count as the same word ("reimburse"/"reimbursed")


@dataclass(frozen=True, slots=True)
class Signals:
    """What the decision reads; all in [−1, 1] or [0, 1]. ``passage`` is ``None`` when the
    passages were not embedded (uncalibrated embedding model)."""

    top: float
    passage: float | None
    coverage: float
    sentence_coverage: float
    margin: float
    #: how many of the top chunks come from the top chunk's document (rank agreement; 0 = no hits)
    agreement: int = 0
    #: the reader's (``READER=on``) σ(margin) of its best span (logged; the reader decides alone)
    reader: float | None = None
    #: the share of the question's subject words that none of the caller's notes contain (reader
    #: policy, borderline evidence only; ``None``: not looked up)
    unknown_words: float | None = None

    def as_log(self) -> dict[str, float | None]:
        return {
            "agreement": self.agreement,
            "top": round(self.top, 4),
            "passage": None if self.passage is None else round(self.passage, 4),
            "coverage": round(self.coverage, 4),
            "sentenceCoverage": round(self.sentence_coverage, 4),
            "margin": round(self.margin, 4),
            "reader": None if self.reader is None else round(self.reader, 4),
            "unknownWords": None if self.unknown_words is None else round(self.unknown_words, 4),
        }


@dataclass(frozen=True, slots=True)
class Coefficients:
    """A fitted logistic model for one embedding model. ``threshold`` is the MIN_SIMILARITY it was
    fitted at (the model's default); ``weights`` name the features of :func:`features`."""

    threshold: float
    intercept: float
    weights: Mapping[str, float]
    cutoff: float = 0.5
    #: the reader policy's cutoff (``None``: the extractive ``cutoff``)
    reader_cutoff: float | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "threshold": self.threshold,
            "intercept": self.intercept,
            "weights": dict(self.weights),
            "cutoff": self.cutoff,
            "readerCutoff": self.reader_cutoff,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Coefficients:
        """From :meth:`as_json`'s form; ``ValueError`` on anything else."""
        try:
            weights = {str(k): float(v) for k, v in dict(data["weights"]).items()}  # type: ignore[call-overload]
            reader = data.get("readerCutoff")
            return cls(
                threshold=float(data["threshold"]),  # type: ignore[arg-type]
                intercept=float(data["intercept"]),  # type: ignore[arg-type]
                weights=weights,
                cutoff=float(data.get("cutoff", 0.5)),  # type: ignore[arg-type]
                reader_cutoff=None if reader is None else float(reader),  # type: ignore[arg-type]
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not answerability coefficients: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Decision:
    answer: bool
    reason: str
    probability: float | None
    signals: Signals


EXTRACTIVE_POLICY = "extractive"
READER_POLICY = "reader"
POLICIES = (EXTRACTIVE_POLICY, READER_POLICY)
#: uncalibrated reader policy: answer when more than this share of the question's content words is
#: found in the top chunks, or when every top chunk comes from one document (rank agreement). On the
#: grounding dev set (MiniLM's hits) this answers 64/65 answerable questions and refuses 16/22
#: off-topic ones: it errs towards letting the model read until the embedder is calibrated.
READER_COVERAGE = 0.0
#: calibrated reader policy, borderline evidence (between the reader and the extractive cutoffs): it
#: is refused when more than this share of the question's subject words are words none of the
#: caller's notes contain ("Which bike should I buy for commuting?" beside a cycling club's notes:
#: the notes talk about something else). On the tuning splits (grounding dev, conversations dev and
#: heldout) the answerable questions in that band have at most 2/3 of them (a paraphrase: "Where do
#: we meet if there's a fire alarm?"), so the rule takes more than that.
READER_UNKNOWN_WORDS = 0.7
UNKNOWN_WORDS = "unknown_words"


# Fitted by ``python bench/bench_grounding.py --select`` (or ``--fit``) on the dev split of
# bench/grounding/ (see bench/results/grounding.md), the cutoff checked against SQuAD 2.0 there
# (balanced accuracy must stay ≥ the top-1 rule's; ``bench_calibration.py`` reports it). Titan and
# Cohere: ``ragchat calibrate`` with ``RAGCHAT_EMBEDDER=titan`` (or ``cohere``) and AWS credentials
# stores theirs where the deployment reads them (ahead of these); until then the extractive policy
# keeps the seeds' rule and the reader policy its scale-free rule.
CALIBRATED: dict[str, Coefficients] = {
    "all-MiniLM-L6-v2": Coefficients(
        threshold=0.40,
        intercept=-0.403,
        weights={"passage": 9.353, "sentence_coverage": 0.477},
        # Fitted with contextual chunk headers (CHUNK_HEADERS, the default) and title-prefixed
        # passages (``bench_grounding.py --select``): of every set of signals, the one answering the
        # most dev questions at a cutoff that refuses every off-topic and half the near-topic dev
        # questions and keeps SQuAD 2.0's balanced accuracy ≥ 92.2 % (the top-1 rule's). The cutoff
        # answering 93 % of dev (0.39) falls to 90.6 % on SQuAD; 0.45 keeps 92.4 %.
        cutoff=0.45,
        # the reader policy's (Claude's) cutoff, ``fit_reader_cutoff`` on the dev split: its highest
        # off-topic question scores 0.128, its lowest answerable one 0.173
        reader_cutoff=0.16,
    ),
}


#: ``READER=on`` (docs/reader.md): the extractive reader decides instead of the logistic model above.
#: A question is answered when the reader's best span beats its no-answer score by at least the
#: reader's threshold (``Reading.margin``, in logits). Resolution, first found: ``READER_THRESHOLD``
#: (the user's knob), this table (keyed by the shipped model's SHA-256, calibrated by the lead on the
#: dev splits: bench/bench_grounding.py and bench/bench_conversations.py with ``--reader on``), the
#: model manifest's ``threshold`` (the dev articles' best SQuAD F1, written by bench/train_reader.py),
#: else :data:`DEFAULT_READER_THRESHOLD` (SQuAD 2.0's own rule: answer when the span beats the null).
READER_THRESHOLDS: dict[str, float] = {}
DEFAULT_READER_THRESHOLD = 0.0
#: the reader found no span that beats "no answer" by the threshold
NO_ANSWER = "no_answer"


def reader_threshold(model_sha256: str | None, manifest: float | None, setting: float | None) -> float:
    """The reader's operating point on the margin (see :data:`READER_THRESHOLDS`)."""
    if setting is not None:
        return setting
    if model_sha256 and model_sha256 in READER_THRESHOLDS:
        return READER_THRESHOLDS[model_sha256]
    return manifest if manifest is not None else DEFAULT_READER_THRESHOLD


def content_words(text: str) -> set[str]:
    """The question's or a text's content words, cut to a common prefix (light stemming)."""
    return {w[:_PREFIX] for w in tokens(text) if not w.isdigit() or len(w) > 1}


def _share(question: set[str], text: set[str]) -> float:
    return len(question & text) / len(question) if question else 0.0


def evidence_passages(
    texts: Sequence[str], limit: int = MAX_PASSAGES, titles: Sequence[str | None] | None = None
) -> list[str]:
    """Passages of two consecutive sentences (one for a one-sentence chunk) of the top chunks (at
    most ``EVIDENCE_CHUNKS``), in order, capped at ``limit``, without Markdown markup. With
    ``titles`` (one per text, ``None`` when unknown) each passage is prefixed with its document's
    title words, as a chunk's own vector is computed with its header: "expense policy: …"."""
    out: list[str] = []
    for i, text in enumerate(texts[:EVIDENCE_CHUNKS]):
        sentences = [p for p in (_plain(s) for s in split_sentences(text)) if p]
        pairs = [f"{a} {b}" for a, b in itertools.pairwise(sentences)] or sentences
        title = title_words(titles[i] or "") if titles is not None and i < len(titles) else ""
        out.extend(f"{title}: {p}" if title else p for p in pairs)
    return out[:limit]


_MARKUP = re.compile(r"[*_`#>|]+")


def _plain(sentence: str) -> str:
    return " ".join(_MARKUP.sub(" ", sentence).split())


def compute_signals(
    question: str,
    similarities: Sequence[float],
    texts: Sequence[str],
    passage_similarities: Sequence[float] | None = None,
    documents: Sequence[str | None] | None = None,
) -> Signals:
    """Signals of one question. ``similarities`` are the vector hits' cosine similarities, best
    first; ``texts`` their texts, best first; ``passage_similarities`` the question's similarity to
    each of :func:`evidence_passages` (``None``: not computed); ``documents`` the hits' document
    ids, best first (rank agreement)."""
    top = similarities[0] if similarities else -1.0
    rest = list(similarities[1:EVIDENCE_CHUNKS])
    margin = top - sum(rest) / len(rest) if rest else 0.0
    asked = content_words(question)
    evidence = texts[:EVIDENCE_CHUNKS]
    coverage = _share(asked, set().union(*(content_words(t) for t in evidence))) if evidence else 0.0
    sentence_cov = max(
        (_share(asked, content_words(s)) for t in evidence for s in split_sentences(t)), default=0.0
    )
    passage = max(passage_similarities) if passage_similarities else None
    return Signals(top, passage, coverage, sentence_cov, margin, _agreement(documents or ()))


def _agreement(documents: Sequence[str | None]) -> int:
    """How many of the top chunks share the top chunk's document."""
    top = documents[:EVIDENCE_CHUNKS]
    return sum(1 for d in top if d == top[0]) if top else 0


def features(signals: Signals, threshold: float) -> dict[str, float]:
    """The logistic model's inputs: similarities relative to the threshold, the coverages, the margin."""
    passage = signals.passage if signals.passage is not None else signals.top
    return {
        "top": signals.top - threshold,
        "passage": passage - threshold,
        "coverage": signals.coverage,
        "sentence_coverage": signals.sentence_coverage,
        "margin": signals.margin,
    }


def probability(signals: Signals, coefficients: Coefficients, threshold: float) -> float:
    x = features(signals, threshold)
    z = coefficients.intercept + sum(w * x[name] for name, w in coefficients.weights.items())
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def decide(signals: Signals, threshold: float, coefficients: Coefficients | None) -> Decision:
    """Answer or refuse. Without ``coefficients``: the seeds' rule (top-1 below ``threshold``
    refuses; equal answers). With them: the calibrated probability against the model's cutoff."""
    if coefficients is None:
        ok = signals.top >= threshold
        return Decision(ok, ANSWERABLE if ok else LOW_SIMILARITY, None, signals)
    p = probability(signals, coefficients, threshold)
    if p >= coefficients.cutoff:
        return Decision(True, ANSWERABLE, p, signals)
    reason = LOW_SIMILARITY if signals.top < threshold else WEAK_EVIDENCE
    return Decision(False, reason, p, signals)


def decide_reader(signals: Signals, threshold: float, coefficients: Coefficients | None) -> Decision:
    """The reader policy (module docstring): refuse only what is clearly unrelated."""
    if coefficients is not None:
        cut = coefficients.reader_cutoff if coefficients.reader_cutoff is not None else coefficients.cutoff
        p = probability(signals, coefficients, threshold)
        if p >= cut and borderline_words(signals) and p < coefficients.cutoff:
            return Decision(False, UNKNOWN_WORDS, p, signals)
        if p >= cut:
            return Decision(True, ANSWERABLE, p, signals)
        return Decision(False, LOW_SIMILARITY if signals.top < threshold else WEAK_EVIDENCE, p, signals)
    ok = signals.coverage > READER_COVERAGE or signals.agreement >= EVIDENCE_CHUNKS
    return Decision(ok, ANSWERABLE if ok else WEAK_EVIDENCE, None, signals)


def borderline_words(signals: Signals) -> bool:
    """Are most of the question's subject words unknown to the notes (:data:`READER_UNKNOWN_WORDS`)?"""
    return signals.unknown_words is not None and signals.unknown_words > READER_UNKNOWN_WORDS


def needs_word_check(decision: Decision, coefficients: Coefficients | None) -> bool:
    """Is this reader decision let through on borderline evidence (answered below the extractive
    cutoff), so that the question's words are looked up among the notes before it stands?"""
    return (
        decision.answer
        and coefficients is not None
        and decision.probability is not None
        and decision.probability < coefficients.cutoff
        and decision.signals.unknown_words is None
    )


def decide_for(
    policy: str, signals: Signals, threshold: float, coefficients: Coefficients | None
) -> Decision:
    """The decision of ``policy`` (``extractive`` or ``reader``)."""
    if policy == READER_POLICY:
        return decide_reader(signals, threshold, coefficients)
    return decide(signals, threshold, coefficients)


def fit_reader_cutoff(answerable: Sequence[float], off_topic: Sequence[float], cutoff: float) -> float:
    """The reader policy's cutoff from the dev set's probabilities: halfway between the highest
    off-topic question's and the lowest answerable question's above it (every off-topic dev question
    refused, every answerable one above them let through), never above the extractive ``cutoff``."""
    worst = max(off_topic, default=0.0)
    above = [p for p in answerable if p > worst]
    mid = (worst + min(above)) / 2 if above else worst + 0.01
    return round(min(cutoff, math.ceil(mid * 100) / 100), 2)


def passage_owners(hits: Sequence[Hit], titles: Sequence[str | None] | None) -> dict[str, str]:
    """The chunk each of the decision's passages of ``hits`` comes from (the first, for a passage
    two chunks share): where a passage embedded on a question is stored."""
    owners: dict[str, str] = {}
    for i, hit in enumerate(hits[:EVIDENCE_CHUNKS]):
        title = titles[i] if titles is not None and i < len(titles) else None
        for passage in evidence_passages([strip_citations(hit.text)], limit=1 << 30, titles=[title]):
            owners.setdefault(passage, hit.id)
    return owners
