"""Retrieval for a question or a chat turn (docs/retrieval.md).

normalize → empty knowledge base? guard before embedding → embed → vector search (the owner's enabled
notes, the scope; one retry on a transient error) → adaptive: top-1 and top-3 close, the top 5
instead of 3 → the answerability decision (:mod:`ragchat.domain.answerability`; with ``READER=on``
the extractive reader's, :mod:`ragchat.services.reading`) → guard when it refuses →
``RETRIEVAL_MODE=hybrid`` re-ranks with the index's keyword+vector fusion. One exact search of depth
max(topK, adaptive topK) serves both rules (its first topK are what a topK search returns).
``chat.retrieval`` and ``chat.guard`` carry the top similarity, signals, probability and reason.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from aws_lambda_powertools import Logger

from ragchat.domain.answerability import (
    CALIBRATED,
    DEFAULT_READER_THRESHOLD,
    EVIDENCE_CHUNKS,
    EXTRACTIVE_POLICY,
    NO_ANSWER,
    READER_POLICY,
    Coefficients,
    Decision,
    compute_signals,
    decide_for,
    evidence_passages,
    needs_word_check,
    passage_owners,
)
from ragchat.domain.citations import strip_citations
from ragchat.domain.errors import TransientError, ValidationError
from ragchat.domain.models import Hit, SearchFilter
from ragchat.domain.read_answers import Found, holder_first
from ragchat.services.metrics import GUARD_REFUSALS, NO_METRICS
from ragchat.services.reading import read_decision
from ragchat.services.vocabulary import check_words

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.ports import Embedder, EvidenceStore, Metrics, Reader, VectorIndex
    from ragchat.services.titles import DocumentTitles

logger = Logger(service="ragchat", child=True)

EMPTY_KNOWLEDGE_BASE = "empty_knowledge_base"
LOW_SIMILARITY = "low_similarity"

T = TypeVar("T")
#: the chunk each evidence text comes from, worked out only when a text is embedded on a question
Owners = Callable[[], Mapping[str, str]]


@dataclass(slots=True)
class Retrieval:
    """What retrieval found. ``guard`` means: do not ask the model, refuse (``reason`` says why).
    ``hits`` are the notes to answer from, best first (kept on a guard, for logging/suggestions)."""

    hits: list[Hit]
    guard: bool
    reason: str | None
    top_k: int
    timings: dict[str, float] = field(default_factory=dict)
    question: str = ""
    top_similarity: float | None = None
    decision: Decision | None = None
    # the question's embedding: the extractive answerer reuses it
    query_vector: list[float] | None = None
    # the query that was searched, as shown to the user (a follow-up's carried or condensed query;
    # the parts' queries of a multi-part question); "" = ``question``
    query: str = ""
    # names and codes of the question that no document mentions (a refusal says so)
    unknown_names: list[str] = field(default_factory=list)
    # a multi-part question: each part's own retrieval (``hits`` is then the answered parts' notes)
    parts: list[Part] = field(default_factory=list)
    # the answered notes' document titles (document id → title; empty when titles are not wired)
    titles: dict[str, str] = field(default_factory=dict)
    # ``READER=on``: the best answer span the reader found in the notes (``None``: none, or no
    # reader); on an answered retrieval its note is the first of ``hits``
    found: Found | None = None

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hits]


@dataclass(slots=True)
class Part:
    """One part of a multi-part question and its own retrieval."""

    question: str
    retrieval: Retrieval


def similarity_of(hit: Hit) -> float:
    """The vector similarity of a hit (what the gate reads)."""
    return hit.similarity if hit.similarity is not None else hit.score


PASSAGE_CACHE_SIZE = 4096  # passage vectors kept in memory (~6 MB at 384 dimensions)


class PassageVectors:
    """The answerability decision's passage embeddings (and the answer's sentences), remembered by
    text (an embedding is a pure function of its text): a question that lands on chunks asked about
    before embeds nothing new. Bounded (least recently used out first) and safe across the server's
    threads. With an ``EvidenceStore`` (local), texts not in memory are first looked up among the
    vectors precomputed for the chunks they come from (``chunk_ids``; ``ragchat.services.evidence``).
    A text still missing (its document just turned READY and the background warmer has not reached
    it, or it was renamed) is embedded on the request and stored under its chunk: a question at READY
    is decided and answered with the vectors it would read once the warmer is done (issue 31: no
    answer at reduced quality while evidence is missing). Without a store, texts not in memory are
    embedded."""

    def __init__(
        self, embedder: Embedder, size: int = PASSAGE_CACHE_SIZE, *, store: EvidenceStore | None = None
    ) -> None:
        self._embedder = embedder
        self._size = max(0, size)
        self._store = store
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(
        self, passages: Sequence[str], chunk_ids: Sequence[str] = (), owners: Owners | None = None
    ) -> list[list[float]]:
        """The vectors of ``passages``, in order. ``owners``: gives the chunk each text comes from
        (called only when a text has to be embedded here); a text embedded here is stored under it
        (whatever ``EVIDENCE_WARMING`` says: the warmer skips what is stored), so the next question
        on that chunk reads it, as it reads a warmed one."""
        with self._lock:
            known = {p: self._vectors[p] for p in passages if p in self._vectors}
            for p in known:
                self._vectors.move_to_end(p)
        missing = list(dict.fromkeys(p for p in passages if p not in known))
        if missing and chunk_ids and self._store is not None:
            try:
                stored = self._store.vectors_of(chunk_ids, missing)
            except Exception as exc:  # a refinement: the texts are embedded instead
                logger.warning("evidence.read_failed", extra={"error": f"{type(exc).__name__}: {exc}"})
                stored = {}
            self._remember(stored)
            known.update(stored)
            missing = [p for p in missing if p not in stored]
        if missing:
            fresh = self._embedder.embed_documents(missing)
            embedded = dict(zip(missing, fresh, strict=True))
            if owners is not None and self._store is not None:
                embedded.update(self._stored(embedded, owners()))
            self._remember(embedded)
            known.update(embedded)
        return [known[p] for p in passages]

    def _stored(self, embedded: dict[str, list[float]], owners: Mapping[str, str]) -> dict[str, list[float]]:
        """Store ``embedded`` under each text's chunk and return them as stored (the same vectors a
        warmed chunk gives, so an answer does not depend on who embedded them first). A failed write
        is logged: the texts are then used as embedded."""
        assert self._store is not None
        rows: dict[str, list[tuple[str, list[float]]]] = {}
        for text, vector in embedded.items():
            if chunk := owners.get(text):
                rows.setdefault(chunk, []).append((text, vector))
        if not rows:
            return {}
        try:
            self._store.put(rows)
            return self._store.vectors_of(list(rows), [t for pairs in rows.values() for t, _ in pairs])
        except Exception as exc:
            logger.warning("evidence.write_failed", extra={"error": f"{type(exc).__name__}: {exc}"})
            return {}

    def similarities(
        self,
        query: Sequence[float],
        texts: Sequence[str],
        chunk_ids: Sequence[str] = (),
        owners: Owners | None = None,
    ) -> list[float]:
        """Cosine similarity of ``query`` (a unit vector) to each text's vector, in order."""
        if not texts:
            return []
        import numpy as np  # only where passages are scored (not on Lambda's cold path)

        matrix = np.asarray(self(texts, chunk_ids, owners), dtype=np.float32)
        scores: list[float] = (matrix @ np.asarray(query, dtype=np.float32)).tolist()
        return scores

    def _remember(self, vectors: dict[str, list[float]]) -> None:
        if not vectors:
            return
        with self._lock:
            for p, v in vectors.items():
                self._vectors[p] = v
            while len(self._vectors) > self._size:
                self._vectors.popitem(last=False)


class Retriever:
    def __init__(
        self,
        embedder: Embedder,
        index: VectorIndex,
        settings: Settings,
        *,
        metrics: Metrics = NO_METRICS,
        passage_cache_size: int = PASSAGE_CACHE_SIZE,
        titles: DocumentTitles | None = None,
        passage_vectors: PassageVectors | None = None,
        answer_titles: bool = False,
        policy: str = EXTRACTIVE_POLICY,
        calibration: Coefficients | None = None,
        reader: Reader | None = None,
        reader_threshold: float = DEFAULT_READER_THRESHOLD,
    ) -> None:
        """``passage_vectors``: a cache shared with others embedding texts with the same embedder
        (the extractive answerer's sentences); by default one of ``passage_cache_size`` of its own.
        ``answer_titles``: read the answered notes' titles into ``Retrieval.titles`` (with
        ``titles``): the extractive answerer by meaning reads them, and a model that reads shows them
        on its source lines. ``policy``: the answerability decision's (``extractive``, or ``reader``
        for a model that reads); ``calibration``: coefficients ``ragchat calibrate`` stored for this
        embedder (ahead of the built-in ones); ``reader``: the extractive reader (``READER=on``,
        docs/reader.md) reading the question with the retrieved notes, whose best span against "no
        answer" (``reader_threshold`` on the margin) is then the decision, whoever answers."""
        self.reader = reader
        self.reader_threshold = reader_threshold
        self.policy = policy
        self.calibration = calibration
        self.embedder = embedder
        self.titles = titles
        self.answer_titles = answer_titles
        self.index = index
        self.settings = settings
        self.metrics = metrics
        self.passage_vectors = (
            passage_vectors if passage_vectors is not None else PassageVectors(embedder, passage_cache_size)
        )

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _retry_once(what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except TransientError as exc:
            logger.warning("chat.retry", extra={"operation": what, "error": exc.message})
            return fn()

    @classmethod
    def _searched(cls, timings: dict[str, float], what: str, fn: Callable[[], list[Hit]]) -> list[Hit]:
        """``fn`` with one retry on a transient error; its time adds to ``timings["vector_search"]``."""
        t = time.perf_counter()
        try:
            return cls._retry_once(what, fn)
        finally:
            timings["vector_search"] = timings.get("vector_search", 0.0) + (time.perf_counter() - t) * 1000

    def _guard(
        self,
        reason: str,
        question: str,
        conversation_id: str | None,
        *,
        hits: list[Hit],
        top_k: int,
        timings: dict[str, float],
        top_similarity: float | None = None,
        decision: Decision | None = None,
        vector: list[float] | None = None,
    ) -> Retrieval:
        logger.info(
            "chat.guard",
            extra={"conversationId": conversation_id, "reason": reason, **_decision_fields(decision)},
        )
        self.metrics.add(GUARD_REFUSALS)
        return Retrieval(
            hits=hits,
            guard=True,
            reason=reason,
            top_k=top_k,
            timings=timings,
            question=question,
            top_similarity=top_similarity,
            decision=decision,
            query_vector=vector,
        )

    def refuse(self, retrieval: Retrieval, reason: str, *, conversation_id: str | None = None) -> Retrieval:
        """``retrieval`` turned into a refusal for ``reason`` (logged as ``chat.guard``; counted once)."""
        logger.info(
            "chat.guard",
            extra={
                "conversationId": conversation_id,
                "reason": reason,
                **_decision_fields(retrieval.decision),
            },
        )
        if not retrieval.guard:
            self.metrics.add(GUARD_REFUSALS)
        return replace(retrieval, guard=True, reason=reason)

    def searched(self, fn: Callable[[], list[Hit]]) -> list[Hit]:
        """An extra index call (a keyword lookup), retried once on a transient error."""
        return self._retry_once("keyword_lookup", fn)

    # ------------------------------------------------------------------ use case
    def retrieve(self, question: str, flt: SearchFilter, *, conversation_id: str | None = None) -> Retrieval:
        from ragchat.domain.retrieval import needs_adaptive, normalize_question

        q = normalize_question(question)
        if not q:
            raise ValidationError("A question is required")
        top_k = self.settings.top_k
        timings: dict[str, float] = {}
        if not any(self.index.count(owner) for owner in flt.partitions):
            return self._guard(
                EMPTY_KNOWLEDGE_BASE, q, conversation_id, hits=[], top_k=top_k, timings=timings
            )

        t0 = time.perf_counter()
        vector = self._retry_once("embed_query", lambda: self.embedder.embed_query(q))
        timings["embedding_generation"] = (time.perf_counter() - t0) * 1000

        # One exact search deep enough for the adaptive rule: the first ``top_k`` of the deeper
        # ranking are exactly what a ``top_k`` search returns, so the decision and the spread rule
        # read the same scores, and widening to ``adaptive_top_k`` needs no second search.
        adaptive_k = self.settings.adaptive_top_k
        depth = max(top_k, adaptive_k)
        ranked = self._searched(timings, "vector_search", lambda: self.index.search(vector, flt, depth))
        vector_hits = ranked[:top_k]
        if adaptive_k > top_k and needs_adaptive(
            vector_hits, spread=self.settings.adaptive_spread, top_k=top_k
        ):
            top_k = adaptive_k
            vector_hits = ranked[:top_k]
        decision, found = self._judge(q, vector, vector_hits, timings, flt)
        top1 = decision.signals.top if vector_hits else None
        if not decision.answer:
            self._log_retrieval(conversation_id, vector_hits, decision)
            guarded = self._guard(
                decision.reason, q, conversation_id, hits=vector_hits, top_k=top_k, timings=timings,
                top_similarity=top1, decision=decision, vector=vector,
            )  # fmt: skip
            titled = self.titles_of(flt.owner, vector_hits) if decision.reason == NO_ANSWER else {}
            return replace(guarded, found=found, titles=titled)  # the suggestions name the documents
        hits = vector_hits
        if self.settings.retrieval_mode == "hybrid":
            hits = self._searched(
                timings, "hybrid_search", lambda: self.index.hybrid_search(q, vector, flt, top_k)
            )
        if found is not None:  # the note holding the answer first (the model reads it, it is quoted)
            hits = holder_first(found.hit_id, vector_hits, hits)[:top_k]
        self._log_retrieval(conversation_id, hits, decision)
        titles: dict[str, str] = {}
        if self.titles is not None and self.answer_titles:
            titles = self.titles_of(flt.owner, hits)
        return Retrieval(
            hits=hits, guard=False, reason=None, top_k=top_k, timings=timings, question=q,
            top_similarity=top1, decision=decision, query_vector=vector, titles=titles, found=found,
        )  # fmt: skip

    def _judge(
        self, q: str, vector: list[float], hits: list[Hit], timings: dict[str, float], flt: SearchFilter
    ) -> tuple[Decision, Found | None]:
        """The reader's decision (and its best span) with ``READER=on``, else the calibrated one."""
        if self.reader is not None and self.reader_decides():
            known = self.titles_of(flt.owner, hits)  # read on each passage's first line
            named = [known.get(h.document_id or "") for h in hits]
            return read_decision(self.reader, self.reader_threshold, q, hits, timings, named)
        return self._decide(q, vector, hits, timings, flt), None

    def reader_decides(self) -> bool:
        """Is the answerability decision the reader's (``READER=on``; ``ANSWERABILITY=similarity``
        keeps the seeds' top-1 rule whoever reads)?"""
        return self.reader is not None and self.settings.answerability == "calibrated"

    def _decide(
        self,
        q: str,
        query: list[float],
        vector_hits: list[Hit],
        timings: dict[str, float],
        flt: SearchFilter,
    ) -> Decision:
        """The answerability decision over the vector similarities and the texts answered from; the
        top chunks' passages (with their documents' titles) are embedded only for an embedding
        model with calibrated coefficients."""
        threshold = self.settings.similarity_threshold
        coefficients = self.coefficients()
        texts = [strip_citations(h.text) for h in vector_hits]
        passage_scores: list[float] | None = None
        if coefficients is not None and vector_hits:
            t = time.perf_counter()
            titles = self._titles(flt.owner, vector_hits)
            passages = evidence_passages(texts, titles=titles)
            chunks = [h.id for h in vector_hits[:EVIDENCE_CHUNKS]]
            owners = partial(passage_owners, vector_hits, titles)
            if passages:
                passage_scores = self._retry_once(
                    "embed_passages",
                    lambda: self.passage_vectors.similarities(query, passages, chunks, owners),
                )
            timings["answerability"] = (time.perf_counter() - t) * 1000
        similarities = [similarity_of(h) for h in vector_hits]
        documents = [h.document_id for h in vector_hits]
        signals = compute_signals(q, similarities, texts, passage_scores, documents)
        # ANSWERABILITY=similarity: the seeds' top-1 rule whoever answers
        policy = self.policy if self.settings.answerability == "calibrated" else EXTRACTIVE_POLICY
        decision = decide_for(policy, signals, threshold, coefficients)
        # borderline evidence for Claude: are its words the notes' at all? (every index searches by
        # keyword: the local FTS5, OpenSearch's match query, S3 Vectors' queryTexts)
        if policy == READER_POLICY and coefficients is not None and needs_word_check(decision, coefficients):

            def search(word: str, k: int) -> list[Hit]:
                return self.searched(lambda: self.index.hybrid_search(word, query, flt, k))

            decision = check_words(search, q, vector_hits, decision, threshold, coefficients)
        return decision

    def coefficients(self) -> Coefficients | None:
        """The decision's coefficients for this embedder: stored by ``ragchat calibrate``, else
        built in; ``None`` when uncalibrated or with ``ANSWERABILITY=similarity``."""
        if self.settings.answerability != "calibrated":
            return None
        model_id = getattr(self.embedder, "model_id", "")
        return self.calibration or CALIBRATED.get(model_id)

    def evidence_similarity(self, query: list[float], hits: list[Hit], owner: str) -> float | None:
        """The best similarity of ``query`` to a passage of ``hits`` (as the decision reads them:
        title-prefixed pairs of sentences of the top chunks); ``None`` without hits or passages.
        Passage vectors come from the cache, so hits already decided on embed nothing new."""
        texts = [strip_citations(h.text) for h in hits]
        titles = self._titles(owner, hits)
        passages = evidence_passages(texts, titles=titles)
        if not passages:
            return None
        chunks = [h.id for h in hits[:EVIDENCE_CHUNKS]]
        owners = partial(passage_owners, hits, titles)
        scores = self._retry_once(
            "embed_passages", lambda: self.passage_vectors.similarities(query, passages, chunks, owners)
        )
        return max(scores)

    def _titles(self, owner: str, hits: list[Hit]) -> list[str | None] | None:
        """The evidence chunks' document titles (``None`` when titles are not wired or unknown)."""
        if self.titles is None:
            return None
        evidence = hits[:EVIDENCE_CHUNKS]
        known = self.titles_of(owner, evidence)
        return [known.get(h.document_id or "") for h in evidence]

    def titles_of(self, owner: str, hits: Sequence[Hit]) -> dict[str, str]:
        """Document id → title of the hits' documents, each read in its own workspace (the hit's
        ``owner``, else ``owner``); empty when titles are not wired."""
        if self.titles is None:
            return {}
        out: dict[str, str] = {}
        for ws in dict.fromkeys(h.owner or owner for h in hits):
            out.update(
                self.titles(ws, [h.document_id for h in hits if h.document_id and (h.owner or owner) == ws])
            )
        return out

    @staticmethod
    def _log_retrieval(conversation_id: str | None, hits: list[Hit], decision: Decision) -> None:
        logger.info(
            "chat.retrieval",
            extra={
                "conversationId": conversation_id,
                "ids": [h.id for h in hits],
                "scores": [round(h.score, 4) for h in hits],
                **_decision_fields(decision),
            },
        )


def _decision_fields(decision: Decision | None) -> dict[str, object]:
    """What the guard and retrieval events carry for tuning: top similarity, signals, probability."""
    if decision is None:
        return {}
    return {
        "topSimilarity": round(decision.signals.top, 4),
        "signals": decision.signals.as_log(),
        "answerProbability": None if decision.probability is None else round(decision.probability, 4),
        "decision": decision.reason,
    }
