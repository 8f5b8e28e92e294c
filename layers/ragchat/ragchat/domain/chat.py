"""Pure chat logic (SPEC §7, §8, §9, §11): message sanitization, titles, token estimates, the history
window and summarization plan, the extractive summary, rate-limit / flood / circuit-breaker
arithmetic, the persona registry, the rolling latency window and the streaming citation filter.

Nothing here does I/O: the chat service reads and writes through the ports and asks this module what
to do.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ragchat.domain.errors import PayloadTooLarge, ValidationError
from ragchat.domain.models import ChatTurn, Hit, Message, SourceRef

# --------------------------------------------------------------------------- limits and constants
MAX_MESSAGE_CHARS = 4000
TITLE_CHARS = 80
SOURCE_TEXT_CHARS = 160
SUMMARY_TOKEN_LIMIT = 6000
SUMMARY_MAX_TOKENS = 180
BREAKER_THRESHOLD = 5
BREAKER_WINDOW_S = 120
FLOOD_MESSAGES = 5
FLOOD_MIN_AVG_GAP_S = 2.0
MAX_TOOL_ROUNDS = 4
MAX_TOOL_LIMIT = 20
# The model id stored on an assistant message that was not produced by a model.
FALLBACK_MODEL = "fallback"
GUARD_MODEL = "guard"
# Suggestions sent with an SSE ``refusal`` event.
REFUSAL_SUGGESTIONS = ("Rephrase your question", "Add documents that cover this topic")

_WS = re.compile(r"\s+")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_CITATION_TAG = re.compile(r"\[source:\s*([A-Za-z0-9_-]+)\]")
_PERSONA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


# --------------------------------------------------------------------------- user input
def sanitize_message(raw: object, *, max_chars: int = MAX_MESSAGE_CHARS) -> str:
    """Control characters removed, whitespace collapsed to single spaces, trimmed (SPEC §11).

    Raises ``ValidationError`` (400) when nothing is left or the content is not a string, and
    ``PayloadTooLarge`` (413) when the sanitized text is longer than ``max_chars``."""
    if not isinstance(raw, str):
        raise ValidationError("content must be a string")
    text = "".join(ch for ch in raw if ch in "\t\n\r" or unicodedata.category(ch) != "Cc")
    text = _WS.sub(" ", text).strip()
    if not text:
        raise ValidationError("content must not be empty")
    if len(text) > max_chars:
        raise PayloadTooLarge(f"content is longer than {max_chars} characters ({len(text)})")
    return text


def make_title(text: str, *, limit: int = TITLE_CHARS) -> str:
    """A conversation title from the first user message: the first ``limit`` characters, cut at the
    last word boundary, with ``…`` appended when cut."""
    text = _WS.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    if not text[limit].isspace():
        space = cut.rfind(" ")
        if space > 0:
            cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def estimate_tokens(text: str) -> int:
    """SPEC §8 estimate: the number of pieces left when the text is split on whitespace and
    punctuation."""
    return len(_TOKEN.findall(text))


# --------------------------------------------------------------------------- history window
@dataclass(slots=True, frozen=True)
class HistoryWindow:
    """What the model sees of the past: the latest summary (if any) and the messages after its cursor,
    ascending, ending with the current user message."""

    summary: Message | None
    messages: list[Message]

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
    are always kept (SPEC §7 invariant 4)."""
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
    """SPEC §8: summarize when the window has more than ``max_history`` messages or more than
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


def strip_citation_tags(text: str) -> str:
    without = _CITATION_TAG.sub("", text)
    return _WS.sub(" ", without).strip()


def citation_ids(text: str) -> list[str]:
    """Cited ids in order of first use."""
    seen: dict[str, None] = {}
    for m in _CITATION_TAG.finditer(text):
        seen.setdefault(m.group(1), None)
    return list(seen)


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SOURCES_LINE = re.compile(r"\s*Sources:\s*[A-Za-z0-9_,\s-]*$")


def _first_sentence(text: str, max_chars: int = 200) -> str:
    text = _SOURCES_LINE.sub("", strip_citation_tags(text))
    first = _SENTENCE.split(text, maxsplit=1)[0] if text else ""
    if len(first) > max_chars:
        first = first[:max_chars].rsplit(" ", 1)[0] + "…"
    return first


def extractive_summary(
    messages: Sequence[Message], *, previous: str | None = None, max_tokens: int = SUMMARY_MAX_TOKENS
) -> str:
    """A summary without an LLM: the earlier summary, the user's questions (first sentence each), the
    gist of the answers, and the source ids the answers used. Plain text, no citation tags, at most
    ``max_tokens`` estimated tokens."""
    goals = [_first_sentence(m.content) for m in messages if m.role == "user"]
    answers = [_first_sentence(m.content) for m in messages if m.role == "assistant"]
    ids: dict[str, None] = {}
    for m in messages:
        for ref in m.sources or []:
            ids.setdefault(ref.id, None)
        for cid in citation_ids(m.content):
            ids.setdefault(cid, None)
    parts: list[str] = []
    if previous:
        parts.append(f"Earlier: {strip_citation_tags(previous)}")
    if goals:
        parts.append("User asked: " + " | ".join(g for g in goals if g))
    if answers:
        parts.append("Answers given: " + " | ".join(a for a in answers if a))
    if ids:
        parts.append("Relevant source ids: " + ", ".join(ids))
    text = "\n".join(parts) or "No earlier messages."
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


def source_refs(hits: Sequence[Hit], ids: Sequence[str]) -> list[SourceRef]:
    """Stored sources: one ``{id, text ≤ 160}`` per valid id, in the order of ``ids``."""
    by_id = {h.id: h for h in hits}
    return [SourceRef(i, _WS.sub(" ", by_id[i].text).strip()[:SOURCE_TEXT_CHARS]) for i in ids if i in by_id]


# --------------------------------------------------------------------------- rate limiting
@dataclass(slots=True, frozen=True)
class WindowPosition:
    bucket: int
    elapsed: float  # seconds since the current bucket began


def window_position(now: float, window_s: int) -> WindowPosition:
    bucket = math.floor(now / window_s)
    return WindowPosition(bucket, now - bucket * window_s)


def sliding_count(previous: int, current: int, elapsed: float, window_s: int) -> float:
    """Two-bucket sliding window counter: the previous bucket weighted by how much of it still
    overlaps the window, plus the current bucket."""
    overlap = max(0.0, 1.0 - elapsed / window_s)
    return previous * overlap + current


def sliding_retry_after(previous: int, current: int, elapsed: float, window_s: int, limit: int) -> int:
    """Seconds until one more request fits under ``limit`` (at least 1)."""
    room = limit - 1  # the estimate must drop to this for one more request to be allowed
    if current <= room:
        if previous <= 0:
            return 1
        # previous * (1 - e/W) + current <= room  ⇔  e >= W * (1 - (room - current)/previous)
        needed = window_s * (1.0 - (room - current) / previous)
        wait = needed - elapsed
    else:
        # The current bucket alone is over: wait for the next bucket, where it becomes "previous".
        needed_next = window_s * max(0.0, 1.0 - room / current) if current else 0.0
        wait = (window_s - elapsed) + needed_next
    return max(1, math.ceil(wait))


def flood_retry_after(
    user_times: Sequence[float],
    now: float,
    *,
    count: int = FLOOD_MESSAGES,
    min_avg_gap: float = FLOOD_MIN_AVG_GAP_S,
) -> int | None:
    """Flood check (SPEC §11): ``user_times`` are the earlier user messages' times (any order); with
    the incoming message at ``now`` the last ``count`` must be on average at least ``min_avg_gap``
    seconds apart. Returns the seconds to wait, or ``None`` when the message may go through."""
    times = sorted(user_times)[-(count - 1) :] if count > 1 else []
    if len(times) < count - 1:
        return None
    span = now - times[0]
    gaps = count - 1
    if span / gaps >= min_avg_gap:
        return None
    return max(1, math.ceil(min_avg_gap * gaps - span))


# --------------------------------------------------------------------------- circuit breaker
def breaker_open(consecutive_failures: int, *, threshold: int = BREAKER_THRESHOLD) -> bool:
    """Open after ``threshold`` consecutive failures inside the breaker window (the counter that holds
    them expires ``BREAKER_WINDOW_S`` after the first failure; a success resets it)."""
    return consecutive_failures >= threshold


def fallback_needs_breaker_read(history: Sequence[Message]) -> bool:
    """Whether the breaker counter must be read before calling the model: only when the latest
    assistant reply was itself a fallback (a success resets the counter, so after a model answer
    the count is known to be 0 without a read)."""
    for m in reversed(history):
        if m.role == "assistant":
            return m.model == FALLBACK_MODEL
    return False


# --------------------------------------------------------------------------- personas
DEFAULT_PERSONA = "default"
BUILTIN_PERSONAS: dict[str, str] = {DEFAULT_PERSONA: ""}


def parse_personas(data: Mapping[str, object]) -> dict[str, str]:
    """Persona registry from a parsed JSON/TOML document. Accepted shapes::

        {"analyst": "You are a financial analyst ..."}
        {"personas": {"analyst": {"prompt": "You are ...", "description": "..."}}}

    (``prompt``, ``role`` or ``paragraph`` name the role paragraph). The built-in ``default`` (no
    extra paragraph) is always present and may be overridden. Raises ``ValueError`` on bad entries."""
    raw = data.get("personas", data)
    if not isinstance(raw, Mapping):
        raise ValueError("personas: expected a table of name → role paragraph")
    registry = dict(BUILTIN_PERSONAS)
    for name, value in raw.items():
        if not isinstance(name, str) or not _PERSONA_NAME.match(name):
            raise ValueError(f"persona name {name!r}: use 1-64 letters, digits, '-' or '_'")
        if isinstance(value, Mapping):
            value = next((value[k] for k in ("prompt", "role", "paragraph") if k in value), None)
        if not isinstance(value, str):
            raise ValueError(f"persona {name!r}: expected a role paragraph (string)")
        registry[name] = value.strip()
    return registry


def resolve_persona(registry: Mapping[str, str], name: str | None) -> str:
    """The role paragraph of a persona; unknown names are a 400."""
    key = name or DEFAULT_PERSONA
    if key not in registry:
        known = ", ".join(sorted(registry))
        raise ValidationError(f"unknown persona '{key}' (known: {known})")
    return registry[key]


# --------------------------------------------------------------------------- latency window
class LatencyWindow:
    """The last ``size`` turn latencies; every ``every``-th sample returns (p50, p95)."""

    def __init__(self, size: int = 50, every: int = 10) -> None:
        self._samples: deque[float] = deque(maxlen=size)
        self._every = every
        self._seen = 0

    def add(self, ms: float) -> tuple[float, float] | None:
        self._samples.append(ms)
        self._seen += 1
        if self._seen % self._every:
            return None
        return percentile(self._samples, 50), percentile(self._samples, 95)


def percentile(values: Iterable[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


# --------------------------------------------------------------------------- streaming citations
class CitationStreamFilter:
    """Drops ``[source: id]`` tags whose id is not in ``valid`` (with the spaces before them, as
    citation validation does) from a stream of text deltas, holding back only what could still become
    a tag and trailing spaces. ``removed`` lists the dropped ids."""

    _MAX_TAG = 200

    def __init__(self, valid: Iterable[str]) -> None:
        self._valid = set(valid)
        self._buf = ""
        self._ws = ""
        self.removed: list[str] = []

    def _emit(self, text: str) -> str:
        text = self._ws + text
        kept = text.rstrip(" \t")
        self._ws = text[len(kept) :]
        return kept

    def feed(self, delta: str) -> str:
        self._buf += delta
        out: list[str] = []
        while self._buf:
            start = self._buf.find("[")
            if start < 0:
                out.append(self._emit(self._buf))
                self._buf = ""
                break
            if start > 0:
                out.append(self._emit(self._buf[:start]))
                self._buf = self._buf[start:]
            m = _CITATION_TAG.match(self._buf)
            if m:
                if m.group(1) in self._valid:
                    out.append(self._emit(m.group(0)))
                else:
                    self.removed.append(m.group(1))
                    self._ws = ""
                self._buf = self._buf[m.end() :]
                continue
            if self._could_be_tag(self._buf):
                break  # wait for more text
            out.append(self._emit(self._buf[0]))
            self._buf = self._buf[1:]
        return "".join(out)

    def flush(self) -> str:
        rest, self._buf, self._ws = self._ws + self._buf, "", ""
        return rest

    def _could_be_tag(self, buf: str) -> bool:
        if len(buf) > self._MAX_TAG or "]" in buf:
            return False
        prefix = "[source:"
        if len(buf) <= len(prefix):
            return prefix.startswith(buf)
        if not buf.startswith(prefix):
            return False
        return re.fullmatch(r"\[source:\s*[A-Za-z0-9_-]*", buf) is not None


# --------------------------------------------------------------------------- tools (tool-use mode)
class NoteTools(Protocol):
    """What the chat model may call in tool-use mode (SPEC §9). Implemented by the chat service,
    confined to the caller and the conversation's scope."""

    def search_notes(self, query: str, limit: int) -> list[Hit]: ...

    def get_note(self, note_id: str) -> Hit | None: ...


def clamp_limit(value: object, default: int = 5) -> int:
    try:
        n = int(str(value))
    except (TypeError, ValueError):
        n = default
    return max(1, min(MAX_TOOL_LIMIT, n))


# --------------------------------------------------------------------------- model-call retries
Sleep = Callable[[float], None]
RETRY_DELAYS: tuple[float, ...] = (0.2, 0.4)
R = TypeVar("R")


def call_with_retries(
    call: Callable[[], R],
    *,
    retryable: Callable[[BaseException], bool],
    sleep: Sleep,
    delays: Sequence[float] = RETRY_DELAYS,
) -> R:
    """Run ``call``; on an exception ``retryable`` accepts, sleep ``delays[i]`` and try again (so
    ``len(delays)`` retries: SPEC §7's 2 retries with 200 ms then 400 ms). Anything else, or the last
    failure, propagates."""
    for attempt in range(len(delays) + 1):
        try:
            return call()
        except Exception as exc:
            if attempt >= len(delays) or not retryable(exc):
                raise
            sleep(delays[attempt])
    raise AssertionError("unreachable")  # pragma: no cover
