"""Answering from retrieved notes (docs/retrieval.md): the core shared by one-shot questions and chat turns.

``Answerer`` turns a :class:`~ragchat.services.retrieval.Retrieval` into an :class:`Answer`: the exact
guard reply when retrieval refused; otherwise the fixed system prompt rebuilt with fresh sources, a
model call, and citation validation (only retrieved ids survive, stored sources carry ≤ 160 chars).

``AskService`` is the one-shot ``GET /?text=`` path: same retrieval and answer path as a chat turn,
without history.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.answerability import NO_ANSWER
from ragchat.domain.citations import CitationResult, validate_citations
from ragchat.domain.errors import ModelError, TransientError, ValidationError
from ragchat.domain.excerpts import source_refs
from ragchat.domain.messages import (
    FALLBACK_MODEL,
    GUARD_MODEL,
    NO_DOCUMENTS_HINT,
    indexing_hint,
    sanitize_message,
)
from ragchat.domain.models import ChatTurn, DocumentStatus, Hit, ModelRequest, SearchFilter, SourceRef
from ragchat.domain.names import not_found_sentence
from ragchat.domain.parts import parts_reply
from ragchat.domain.prompts import (
    GUARD_REPLY,
    asked_for_model,
    build_system_prompt,
    detect_injection,
    fallback_reply,
)
from ragchat.domain.read_answers import passage_suggestions
from ragchat.services.logs import log_error
from ragchat.services.metrics import NO_METRICS, record_turn
from ragchat.services.model_calls import ModelCaller
from ragchat.services.questions import retrieve_question
from ragchat.services.sources import locate_sources, with_documents

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.ports import DocumentStore, Metrics, NoteTools
    from ragchat.services.model_calls import BreakerScope
    from ragchat.services.retrieval import Retrieval, Retriever

logger = Logger(service="ragchat", child=True)

EXTRACTIVE_MODEL = "extractive"  # answers a multi-part question part by part


@dataclass(slots=True)
class Answer:
    text: str
    sources: list[SourceRef]
    guard_used: bool
    model: str
    citations: CitationResult | None = None
    timings: dict[str, float] = field(default_factory=dict)
    # a refusal's closest passages, offered as suggestions (``READER=on``)
    suggestions: list[str] = field(default_factory=list)


@dataclass(slots=True)
class AskResult:
    answer: str
    sources: list[SourceRef]
    guard_used: bool
    model: str
    suggestions: list[str] = field(default_factory=list)


def model_messages(history: Sequence[ChatTurn], question: str, asked: str | None = None) -> list[ChatTurn]:
    """History followed by the current user turn (``asked``: the message as the model should read
    it, by default ``question``), never with the current message twice (a history that already ends
    with it — e.g. just persisted — is not doubled)."""
    turns = list(history)
    if turns and turns[-1].role == "user" and turns[-1].content.strip() == question.strip():
        turns.pop()
    turns.append(ChatTurn("user", asked or question))
    return turns


def uncovered_parts(retrieval: Retrieval) -> list[str]:
    return [p.question for p in retrieval.parts if p.retrieval.guard]


class Answerer:
    """Retrieval → answer: the guard reply, or request → model (through ``caller``) → citation
    validation; the fallback reply when the model cannot answer."""

    def __init__(self, caller: ModelCaller, settings: Settings) -> None:
        self.caller = caller
        self.settings = settings

    def guard_answer(self, retrieval: Retrieval, *, indexing: int = 0) -> Answer:
        """The exact guard reply; a question naming things no document mentions gets one more
        sentence saying what was not found; ``indexing`` documents still being indexed, one saying
        so; with nothing indexed and nothing on its way, one saying to add a document."""
        from ragchat.services.retrieval import EMPTY_KNOWLEDGE_BASE

        text = GUARD_REPLY
        empty = retrieval.reason == EMPTY_KNOWLEDGE_BASE
        if retrieval.unknown_names and not empty:
            text = f"{text} {not_found_sentence(retrieval.unknown_names)}"
        if indexing:
            text = f"{text} {indexing_hint(indexing)}"
        elif empty:
            text = f"{text} {NO_DOCUMENTS_HINT}"
        # the reader read the notes and found no answer: the closest passages are offered instead
        offered = retrieval.decision is not None and retrieval.decision.reason == NO_ANSWER
        return Answer(
            text=text,
            sources=[],
            guard_used=True,
            model=GUARD_MODEL,
            timings=dict(retrieval.timings),
            suggestions=passage_suggestions(retrieval.hits, retrieval.titles) if offered else [],
        )

    def request(
        self,
        question: str,
        retrieval: Retrieval,
        *,
        history: Sequence[ChatTurn] = (),
        persona: str | None = None,
        reinforce: bool = False,
        conversation_id: str | None = None,
    ) -> ModelRequest:
        """The model request: the fixed system prompt with fresh sources (persona ahead, reinforcement
        line after), the history and the current user turn, and the hits themselves."""
        if reinforce:
            logger.info("chat.injection", extra={"conversationId": conversation_id})
        system = build_system_prompt(
            retrieval.hits,
            persona=persona,
            reinforce=reinforce,
            max_chars=self.settings.context_chars,
            titles=retrieval.titles,
        )
        return ModelRequest(
            system=system,
            messages=model_messages(
                history, question, asked_for_model(question, retrieval.query, uncovered_parts(retrieval))
            ),
            sources=list(retrieval.hits),
            question=question,
            question_vector=retrieval.query_vector,
            source_titles=retrieval.titles or None,
            found=retrieval.found,
        )

    def finish(
        self,
        text: str,
        retrieval: Retrieval,
        *,
        model: str,
        tool_hits: Sequence[Hit] = (),
        conversation_id: str | None = None,
        timings: dict[str, float] | None = None,
    ) -> Answer:
        """Validate citations of a generated ``text`` against the retrieved notes (and any a tool
        returned); sources are the valid ids with ≤ 160 chars of their text."""
        hits = [*retrieval.hits, *tool_hits]
        retrieved_ids = list(dict.fromkeys(h.id for h in hits))
        result = validate_citations(text, retrieved_ids, enabled=self.settings.enable_citation_validation)
        logger.info(
            "chat.citations",
            extra={
                "conversationId": conversation_id,
                "generatedIds": result.generated_ids,
                "validIds": result.valid_ids,
                "removed": result.removed,
            },
        )
        sources = source_refs(hits, result.valid_ids, result.text)
        if retrieval.found is not None:  # the citation of the note holding the span highlights it
            found = retrieval.found
            sources = [replace(s, highlight=found.span) if s.id == found.hit_id else s for s in sources]
        return Answer(
            text=result.text,
            sources=with_documents(sources, hits),
            guard_used=False,
            model=model,
            citations=result,
            timings=dict(timings or {}),
        )

    def fallback(
        self,
        retrieval: Retrieval,
        *,
        conversation_id: str | None = None,
        timings: dict[str, float] | None = None,
    ) -> Answer:
        """docs/retrieval.md's fallback reply (the model failed or its breaker is open), sources validated."""
        return self.finish(
            fallback_reply(retrieval.hits),
            retrieval,
            model=FALLBACK_MODEL,
            conversation_id=conversation_id,
            timings=timings,
        )

    def answer(
        self,
        question: str,
        retrieval: Retrieval,
        *,
        history: Sequence[ChatTurn] = (),
        persona: str | None = None,
        reinforce: bool = False,
        conversation_id: str | None = None,
        timings: dict[str, float] | None = None,
        scope: BreakerScope | None = None,
        tools: NoteTools | None = None,
        deadline: float | None = None,
    ) -> Answer:
        """Model call (retries; ``scope``'s breaker; ``tools`` in tool-use mode) + citation
        validation, for a question the guard let through (:func:`refuses`, decided once by the
        caller). A failed model call propagates; ``timings`` (updated in place) gets
        ``ai_completion`` either way."""
        timings = dict(retrieval.timings) if timings is None else timings
        if retrieval.parts and tools is None and self.caller.model_id == EXTRACTIVE_MODEL:
            return self._answer_parts(retrieval, conversation_id=conversation_id, timings=timings)
        req = self.request(
            question,
            retrieval,
            history=history,
            persona=persona,
            reinforce=reinforce,
            conversation_id=conversation_id,
        )
        t0 = time.perf_counter()
        try:
            completion = self.caller.complete(req, scope=scope, tools=tools, deadline=deadline)
        finally:
            timings["ai_completion"] = (time.perf_counter() - t0) * 1000
        return self.finish(
            completion.text,
            retrieval,
            model=completion.model or self.caller.model_id,
            tool_hits=completion.tool_hits,
            conversation_id=conversation_id,
            timings=timings,
        )

    def _answer_parts(
        self, retrieval: Retrieval, *, conversation_id: str | None, timings: dict[str, float]
    ) -> Answer:
        """The extractive answer of a multi-part question: each covered part answered from its own
        notes, in order; a part nothing covers says so (:func:`parts_reply`)."""
        t0 = time.perf_counter()
        answers: list[str | None] = []
        try:
            for part in retrieval.parts:
                if part.retrieval.guard:
                    answers.append(None)
                    continue
                req = self.request(part.question, part.retrieval, conversation_id=conversation_id)
                answers.append(self.caller.complete(req).text)
        finally:
            timings["ai_completion"] = (time.perf_counter() - t0) * 1000
        text = parts_reply([p.question for p in retrieval.parts], answers)
        return self.finish(
            text, retrieval, model=EXTRACTIVE_MODEL, conversation_id=conversation_id, timings=timings
        )


INDEXING_LOOKED_AT = 50  # the newest documents a refusal looks at for ones still being indexed


def documents_indexing(documents: DocumentStore | None, owner: str, collection: str | None = None) -> int:
    """How many of the owner's newest documents (in ``collection``) are still PENDING or PROCESSING:
    a refusal says so ("1 document is still being indexed"). One list read, on refusals only."""
    if documents is None:
        return 0
    page = documents.list_documents(owner, collection=collection or None, limit=INDEXING_LOOKED_AT)
    return sum(1 for d in page.items if d.status in (DocumentStatus.PENDING, DocumentStatus.PROCESSING))


def refuses(retrieval: Retrieval, *, tools: bool) -> bool:
    """The answerability guard's decision for one question, made once per turn: answer with the
    guard reply (no model call). With note tools the model searches itself, so only an empty
    knowledge base refuses."""
    return retrieval.guard and (not tools or retrieval.reason == "empty_knowledge_base")


class AskService:
    """One-shot questions (``GET /?text=``): the chat turn's retrieval and answer path, no history."""

    def __init__(
        self,
        retriever: Retriever,
        answerer: Answerer,
        settings: Settings,
        *,
        metrics: Metrics = NO_METRICS,
        documents: DocumentStore | None = None,  # where sources come from (title, page)
    ) -> None:
        self.retriever = retriever
        self.answerer = answerer
        self.settings = settings
        self.metrics = metrics
        self.documents = documents

    def ask(
        self,
        owner: str,
        text: str,
        *,
        collection: str | None = None,
        document_id: str | None = None,
        workspaces: Mapping[str, str] | None = None,
    ) -> AskResult:
        """``workspaces`` (id → name): the workspaces searched (default: ``owner`` alone); the
        sources say which one each comes from."""
        question = sanitize_message(text, max_chars=self.settings.max_message_chars)
        if not question:  # pragma: no cover - sanitize_message raises first
            raise ValidationError("A question is required")
        flt = SearchFilter(
            owner=owner,
            collection=collection or None,
            document_id=document_id or None,
            owners=tuple(workspaces or ()),
        )
        retrieval = retrieve_question(self.retriever, question, flt)
        reinforce = detect_injection(question)
        try:
            if refuses(retrieval, tools=False):
                indexing = documents_indexing(self.documents, owner, collection)
                ans = self.answerer.guard_answer(retrieval, indexing=indexing)
            else:
                ans = self.answerer.answer(question, retrieval, reinforce=reinforce)
        except (ModelError, TransientError) as exc:
            log_error(None, type(exc).__name__, exc.message)
            ans = self.answerer.fallback(retrieval, timings=retrieval.timings)
        for phase, ms in ans.timings.items():
            logger.info("chat.metrics", extra={"conversationId": None, "phase": phase, "ms": round(ms, 1)})
        record_turn(self.metrics, ans.timings)
        sources = locate_sources(self.documents, owner, ans.sources, workspaces=workspaces)
        return AskResult(
            answer=ans.text,
            sources=sources,
            guard_used=ans.guard_used,
            model=ans.model,
            suggestions=ans.suggestions,
        )
