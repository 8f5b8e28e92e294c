"""The history window and its summary (docs/chat.md): what the model sees of the past, when to summarize,
and the extractive summary used when no LLM writes one."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragchat.domain.citations import citation_ids, strip_citation_tags
from ragchat.domain.messages import estimate_tokens
from ragchat.domain.models import ChatTurn, Message

SUMMARY_TOKEN_LIMIT = 6000
SUMMARY_MAX_TOKENS = 180
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(slots=True, frozen=True)
class PendingSummary:
    """A summary written during a turn and not stored yet: it is stored after the turn's answer, so a
    conversation reads question, answer, summary. ``cursor``: the last message it covers."""

    cursor: str
    replaced_count: int
    reason: str


@dataclass(slots=True, frozen=True)
class HistoryWindow:
    """What the model sees of the past: the latest summary (if any) and the messages after its cursor,
    ascending, ending with the current user message. ``pending`` is set when ``summary`` was written
    this turn and is still to be stored."""

    summary: Message | None
    messages: list[Message]
    pending: PendingSummary | None = None

    def tokens(self) -> int:
        total = estimate_tokens(self.summary.content) if self.summary else 0
        return total + sum(estimate_tokens(m.content) for m in self.messages)


def after_cursor(
    ascending: Sequence[Message], *, summary_id: str | None, cursor: str | None
) -> tuple[Message | None, list[Message]]:
    """Split a contiguous ascending run of the newest messages into (latest summary, messages after
    the summary cursor). ``system-summary`` records never count as conversation messages. When the
    cursor is older than the run, every message of the run is after it."""
    summary = next((m for m in ascending if m.id == summary_id and m.role == "system-summary"), None)
    plain = [m for m in ascending if m.role != "system-summary"]
    if cursor is not None:
        for i, m in enumerate(plain):
            if m.id == cursor:
                plain = plain[i + 1 :]
                break
    return summary, plain


def _protected_start(messages: Sequence[Message], protect_users: int = 2) -> int:
    """Index of the oldest of the last ``protect_users`` user messages (``len`` when there are none)."""
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            seen += 1
            if seen == protect_users:
                return i
    # fewer user messages than protected: protect from the oldest one there is
    for i, m in enumerate(messages):
        if m.role == "user":
            return i
    return len(messages)


def cap_window(messages: Sequence[Message], max_history: int) -> list[Message]:
    """The newest ``max_history`` messages, extended backwards if needed so the last 2 user messages
    are always kept (docs/retrieval.md invariant 4)."""
    start = max(0, len(messages) - max_history)
    start = min(start, _protected_start(messages))
    return list(messages[start:])


@dataclass(slots=True, frozen=True)
class SummaryPlan:
    to_summarize: list[Message]
    keep: list[Message]
    reason: str  # "count" | "tokens"


def plan_summary(
    window: HistoryWindow, max_history: int, *, token_limit: int = SUMMARY_TOKEN_LIMIT
) -> SummaryPlan | None:
    """docs/chat.md: summarize when the window has more than ``max_history`` messages or more than
    ``token_limit`` estimated tokens. Everything older than the newest ``max_history - 2`` messages is
    summarized, never the last 2 user messages. ``None`` when nothing needs (or can) be summarized."""
    msgs = window.messages
    by_count = len(msgs) > max_history
    by_tokens = window.tokens() > token_limit
    if not (by_count or by_tokens):
        return None
    protect = _protected_start(msgs)
    start = max(0, len(msgs) - (max_history - 2))
    if by_tokens and not by_count:
        # Few but long messages: fold everything before the protected tail.
        start = protect
    start = min(start, protect)
    if start <= 0:
        return None
    return SummaryPlan(list(msgs[:start]), list(msgs[start:]), "count" if by_count else "tokens")


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# entered only where a run of spaces starts, and possessive: tried from each space of a long run, or
# splitting it between ``\s*`` and the class, the old pattern was quadratic (issue 30)
_SOURCES_LINE = re.compile(r"(?<!\s)\s*+Sources:\s*+[A-Za-z0-9_,\s-]*+$")


def _first_sentence(text: str, max_chars: int = 200) -> str:
    text = _SOURCES_LINE.sub("", strip_citation_tags(text))
    first = _SENTENCE.split(text, maxsplit=1)[0] if text else ""
    if len(first) > max_chars:
        first = first[:max_chars].rsplit(" ", 1)[0] + "…"
    return first


_EARLIER = re.compile(r"^(?:\s*Earlier:\s*)+")
_GOALS, _ANSWERS, _IDS = "User asked: ", "Answers given: ", "Relevant source ids: "
_ITEM_SEP = " | "
MAX_SUMMARY_IDS = 20


@dataclass(slots=True)
class _SummaryParts:
    earlier: list[str]
    goals: list[str]
    answers: list[str]
    ids: list[str]

    def text(self) -> str:
        parts = [f"Earlier: {' '.join(self.earlier)}"] if self.earlier else []
        if self.goals:
            parts.append(_GOALS + _ITEM_SEP.join(self.goals))
        if self.answers:
            parts.append(_ANSWERS + _ITEM_SEP.join(self.answers))
        if self.ids:
            parts.append(_IDS + ", ".join(self.ids[-MAX_SUMMARY_IDS:]))
        return "\n".join(parts) or "No earlier messages."

    def drop_oldest(self) -> bool:
        """Leave out the oldest content (free text first, then the oldest question and answer);
        ``False`` when only the newest question and answer are left."""
        if self.earlier:
            self.earlier.clear()
        elif len(self.goals) > 1 or len(self.answers) > 1:
            for items in (self.goals, self.answers):
                if len(items) > 1:
                    items.pop(0)
        else:
            return False
        return True


def _parse_summary(previous: str | None) -> _SummaryParts:
    """An earlier summary's content, flattened: an extractive one's questions, answers and ids go
    back into their lists; any other text (an LLM's summary) becomes ``earlier`` without the
    ``Earlier:`` prefixes it may already carry, so prefixes never nest."""
    parts = _SummaryParts([], [], [], [])
    for raw in (previous or "").splitlines():
        line = _EARLIER.sub("", strip_citation_tags(raw)).strip()
        if line.startswith(_GOALS.strip()):
            parts.goals += [g for g in line[len(_GOALS) :].split(_ITEM_SEP.strip()) if g.strip()]
        elif line.startswith(_ANSWERS.strip()):
            parts.answers += [a for a in line[len(_ANSWERS) :].split(_ITEM_SEP.strip()) if a.strip()]
        elif line.startswith(_IDS.strip()):
            parts.ids += [i.strip() for i in line[len(_IDS) :].split(",") if i.strip()]
        elif line and line != "No earlier messages.":
            parts.earlier.append(line)
    parts.goals = [g.strip() for g in parts.goals]
    parts.answers = [a.strip() for a in parts.answers]
    return parts


def extractive_summary(
    messages: Sequence[Message], *, previous: str | None = None, max_tokens: int = SUMMARY_MAX_TOKENS
) -> str:
    """A summary without an LLM: the user's questions (first sentence each), the gist of the answers,
    and the source ids the answers used, merged with the earlier summary's (never nested: one
    ``User asked:`` line, at most one ``Earlier:`` prefix). Plain text, no citation tags, at most
    ``max_tokens`` estimated tokens: the oldest content goes first."""
    parts = _parse_summary(previous)
    parts.goals += [g for g in (_first_sentence(m.content) for m in messages if m.role == "user") if g]
    parts.answers += [a for a in (_first_sentence(m.content) for m in messages if m.role == "assistant") if a]
    ids: dict[str, None] = dict.fromkeys(parts.ids)
    for m in messages:
        for ref in m.sources or []:
            ids.setdefault(ref.id, None)
        for cid in citation_ids(m.content):
            ids.setdefault(cid, None)
    parts.ids = list(ids)
    text = parts.text()
    while estimate_tokens(text) > max_tokens and parts.drop_oldest():
        text = parts.text()
    return _truncate_tokens(text, max_tokens)


def _truncate_tokens(text: str, max_tokens: int) -> str:
    if estimate_tokens(text) <= max_tokens:
        return text
    for count, m in enumerate(_TOKEN.finditer(text), start=1):
        if count == max_tokens:
            return text[: m.end()].rstrip() + " …"
    return text


def transcript(messages: Iterable[Message], *, previous: str | None = None) -> str:
    """The text handed to an LLM summarizer."""
    lines = [f"Earlier summary: {previous}"] if previous else []
    for m in messages:
        who = "User" if m.role == "user" else "Assistant"
        lines.append(f"{who}: {m.content}")
    return "\n".join(lines)


def model_turns(window: HistoryWindow) -> list[ChatTurn]:
    """The chat turns sent to the model: the summary first (as context from the user side), then
    the window's messages. The current user message is the last element, exactly once."""
    turns: list[ChatTurn] = []
    if window.summary is not None:
        turns.append(ChatTurn("user", f"Summary of the earlier conversation: {window.summary.content}"))
    for m in window.messages:
        if m.role == "user":
            turns.append(ChatTurn("user", m.content))
        elif m.role == "assistant" and m.content:
            turns.append(ChatTurn("assistant", m.content))
    return turns
