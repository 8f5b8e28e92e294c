"""The history window of a turn (docs/chat.md): the latest summary and the messages after its cursor,
capped, and summarized when the window grows too long (flag ``ENABLE_CHAT_SUMMARIZATION``).

Who writes summaries is a capability handed in (:class:`ragchat.ports.Summarizer`): an LLM through
:class:`ModelSummarizer`, or :class:`ExtractiveSummarizer` when there is no LLM.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.citations import strip_citation_tags, strip_citations
from ragchat.domain.history import (
    SUMMARY_TOKEN_LIMIT,
    HistoryWindow,
    PendingSummary,
    after_cursor,
    cap_window,
    extractive_summary,
    plan_summary,
    transcript,
)
from ragchat.domain.ids import new_id
from ragchat.domain.models import ChatTurn, Conversation, Message, ModelRequest
from ragchat.domain.prompts import SUMMARY_PROMPT
from ragchat.services.chat.metrics import timed
from ragchat.services.logs import log_error, message_of

if TYPE_CHECKING:
    from ragchat.ports import ConversationStore, Summarizer
    from ragchat.services.model_calls import ModelCaller

logger = Logger(service="ragchat", child=True)


class ExtractiveSummarizer:
    """A summary without an LLM: the questions, the gist of the answers and the source ids."""

    def summarize(
        self, messages: Sequence[Message], *, previous: str | None, deadline: float | None = None
    ) -> str:
        return extractive_summary(messages, previous=previous)


class ModelSummarizer:
    """The chat model writes the summary with docs/chat.md's prompt; the extractive summary stands in
    when it fails or answers nothing."""

    def __init__(self, caller: ModelCaller) -> None:
        self.caller = caller

    def summarize(
        self, messages: Sequence[Message], *, previous: str | None, deadline: float | None = None
    ) -> str:
        request = ModelRequest(
            system=SUMMARY_PROMPT,
            messages=[ChatTurn("user", transcript(messages, previous=previous))],
            sources=[],
            question=SUMMARY_PROMPT,
            max_tokens=400,
        )
        try:
            text = strip_citations(self.caller.complete(request, deadline=deadline).text)
            if text.strip():
                return strip_citation_tags(text)
        except Exception as exc:
            conv_id = messages[0].conversation_id if messages else None
            log_error(conv_id, type(exc).__name__, f"summary: {message_of(exc)}")
        return extractive_summary(messages, previous=previous)


class HistoryKeeper:
    """Builds a turn's :class:`HistoryWindow`, writing a new summary when one is due; the turn stores
    it after its answer (:meth:`store_pending`)."""

    def __init__(
        self,
        conversations: ConversationStore,
        summarizer: Summarizer,
        *,
        max_history: int,
        summarize: bool,
        token_factor: float = 1.0,
    ) -> None:
        """``token_factor``: the answer model's tokens per estimated token (1.3 for Claude 4.7 and
        later, whose tokenizer counts ~30 % more): the summary's token limit is the model's."""
        self.conversations = conversations
        self.summarizer = summarizer
        self.max_history = max_history
        self.summarize = summarize
        self.token_limit = round(SUMMARY_TOKEN_LIMIT / token_factor)

    def window(
        self,
        conv: Conversation,
        ascending: list[Message],
        timings: dict[str, float],
        *,
        deadline: float | None = None,
    ) -> tuple[HistoryWindow, Conversation]:
        """The window over ``ascending`` (the newest messages, ending with the current user
        message) and the conversation (with its new summary cursor when one was written)."""
        summary, after = after_cursor(ascending, summary_id=conv.last_summary_id, cursor=conv.summary_cursor)
        if summary is None and conv.last_summary_id:
            summary_id = conv.last_summary_id
            summary = timed(
                timings, "db_read", lambda: self.conversations.get_message(conv.owner, conv.id, summary_id)
            )
        window = HistoryWindow(summary, after)
        if self.summarize:
            return self._maybe_summarize(conv, window, timings, deadline)
        return HistoryWindow(window.summary, cap_window(window.messages, self.max_history)), conv

    def _maybe_summarize(
        self, conv: Conversation, window: HistoryWindow, timings: dict[str, float], deadline: float | None
    ) -> tuple[HistoryWindow, Conversation]:
        plan = plan_summary(window, self.max_history, token_limit=self.token_limit)
        if plan is None:
            return HistoryWindow(window.summary, cap_window(window.messages, self.max_history)), conv
        previous = window.summary.content if window.summary else None
        text = self.summarizer.summarize(plan.to_summarize, previous=previous, deadline=deadline)
        summary = Message(
            id=new_id(), conversation_id=conv.id, owner=conv.owner, role="system-summary", content=text
        )
        pending = PendingSummary(plan.to_summarize[-1].id, len(plan.to_summarize), plan.reason)
        return HistoryWindow(summary, plan.keep, pending), conv

    def store_pending(
        self, conv: Conversation, window: HistoryWindow, timings: dict[str, float]
    ) -> Conversation:
        """Store the summary written this turn (if any) and move the conversation's summary cursor.
        Called after the turn's answer is stored, so the conversation reads question, answer,
        summary (the summary gets its id now: ids sort after the answer's)."""
        pending, summary = window.pending, window.summary
        if pending is None or summary is None:
            return conv
        msg = dataclasses.replace(summary, id=new_id())
        stored = timed(timings, "db_write", lambda: self.conversations.add_message(msg))
        changes: dict[str, object] = {"summary_cursor": pending.cursor, "last_summary_id": stored.id}
        timed(
            timings, "db_write", lambda: self.conversations.update_conversation(conv.owner, conv.id, changes)
        )
        logger.info(
            "chat.summary",
            extra={
                "conversationId": conv.id,
                "replacedCount": pending.replaced_count,
                "summaryId": stored.id,
                "reason": pending.reason,
            },
        )
        return dataclasses.replace(conv, summary_cursor=pending.cursor, last_summary_id=stored.id)
