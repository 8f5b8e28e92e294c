"""Retrieval for a question or a chat turn (SPEC §6).

normalize → empty knowledge base? guard before embedding → embed → vector search (filtered to the
owner's enabled notes and the scope; one retry on a transient error) → guard when the top-1
similarity is below the threshold → adaptive: when top-1 and top-3 are close, answer from the top 5
instead of the top 3. One search of depth max(topK, adaptive topK) serves both: an exact search
ranks the same notes first whatever the depth, so its first topK are what a topK search returns.
``RETRIEVAL_MODE=hybrid`` ranks with the index's keyword+vector fusion while the gate still reads
the vector similarity.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from aws_lambda_powertools import Logger

from ragchat.domain.errors import TransientError, ValidationError
from ragchat.domain.models import Hit, SearchFilter
from ragchat.services.metrics import GUARD_REFUSALS, NO_METRICS

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.ports import Embedder, Metrics, VectorIndex

logger = Logger(service="ragchat", child=True)

EMPTY_KNOWLEDGE_BASE = "empty_knowledge_base"
LOW_SIMILARITY = "low_similarity"

T = TypeVar("T")


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

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hits]


def similarity_of(hit: Hit) -> float:
    """The vector similarity of a hit (what the gate reads)."""
    return hit.similarity if hit.similarity is not None else hit.score


class Retriever:
    def __init__(
        self, embedder: Embedder, index: VectorIndex, settings: Settings, *, metrics: Metrics = NO_METRICS
    ) -> None:
        self.embedder = embedder
        self.index = index
        self.settings = settings
        self.metrics = metrics

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _retry_once(what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except TransientError as exc:
            logger.warning("chat.retry", extra={"operation": what, "error": exc.message})
            return fn()

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
    ) -> Retrieval:
        logger.info("chat.guard", extra={"conversationId": conversation_id, "reason": reason})
        self.metrics.add(GUARD_REFUSALS)
        return Retrieval(
            hits=hits,
            guard=True,
            reason=reason,
            top_k=top_k,
            timings=timings,
            question=question,
            top_similarity=top_similarity,
        )

    # ------------------------------------------------------------------ use case
    def retrieve(self, question: str, flt: SearchFilter, *, conversation_id: str | None = None) -> Retrieval:
        from ragchat.domain.retrieval import needs_adaptive, normalize_question, should_guard

        q = normalize_question(question)
        if not q:
            raise ValidationError("A question is required")
        top_k = self.settings.top_k
        timings: dict[str, float] = {}

        if self.index.count(flt.owner) == 0:
            return self._guard(
                EMPTY_KNOWLEDGE_BASE, q, conversation_id, hits=[], top_k=top_k, timings=timings
            )

        t0 = time.perf_counter()
        vector = self._retry_once("embed_query", lambda: self.embedder.embed_query(q))
        timings["embedding_generation"] = (time.perf_counter() - t0) * 1000

        hybrid = self.settings.retrieval_mode == "hybrid"
        search_ms = 0.0

        def vector_search(k: int) -> list[Hit]:
            nonlocal search_ms
            t = time.perf_counter()
            try:
                return self._retry_once("vector_search", lambda: self.index.search(vector, flt, k))
            finally:
                search_ms += (time.perf_counter() - t) * 1000

        def hybrid_search(k: int) -> list[Hit]:
            nonlocal search_ms
            t = time.perf_counter()
            try:
                return self._retry_once("hybrid_search", lambda: self.index.hybrid_search(q, vector, flt, k))
            finally:
                search_ms += (time.perf_counter() - t) * 1000

        # One exact search deep enough for the adaptive rule: the first ``top_k`` of the deeper
        # ranking are exactly what a ``top_k`` search returns, so the guard and the spread rule read
        # the same scores, and widening to ``adaptive_top_k`` needs no second search.
        adaptive_k = self.settings.adaptive_top_k
        ranked = vector_search(max(top_k, adaptive_k))
        vector_hits = ranked[:top_k]
        scores = [similarity_of(h) for h in vector_hits]
        top1 = scores[0] if scores else None

        if should_guard(vector_hits, self.settings.similarity_threshold):
            timings["vector_search"] = search_ms
            self._log_retrieval(conversation_id, vector_hits)
            return self._guard(
                LOW_SIMILARITY,
                q,
                conversation_id,
                hits=vector_hits,
                top_k=top_k,
                timings=timings,
                top_similarity=top1,
            )

        if adaptive_k > top_k and needs_adaptive(
            vector_hits, spread=self.settings.adaptive_spread, top_k=top_k
        ):
            top_k = adaptive_k
            vector_hits = ranked[:top_k]
        hits = hybrid_search(top_k) if hybrid else vector_hits
        timings["vector_search"] = search_ms
        self._log_retrieval(conversation_id, hits)
        return Retrieval(
            hits=hits,
            guard=False,
            reason=None,
            top_k=top_k,
            timings=timings,
            question=q,
            top_similarity=top1,
        )

    @staticmethod
    def _log_retrieval(conversation_id: str | None, hits: list[Hit]) -> None:
        logger.info(
            "chat.retrieval",
            extra={
                "conversationId": conversation_id,
                "ids": [h.id for h in hits],
                "scores": [round(h.score, 4) for h in hits],
            },
        )
