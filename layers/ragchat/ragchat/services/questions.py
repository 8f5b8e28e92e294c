"""The question a turn searches for (docs/retrieval.md step 1): standalone queries for follow-ups, multi-part
questions part by part, and names no document mentions refused.

- **Follow-ups.** A message that leans on the conversation (:mod:`ragchat.domain.followups`) is
  searched twice: as written (*raw*) and as a *carried* query — the conversation's subject question
  followed by the message (or, with Claude, the model's condensed question). The answerability
  decision is made for both; the carried query is used when it is answerable **and** its evidence
  fits the message itself: the message's own similarity to the carried notes' best passage is at
  least :data:`CARRIED_FLOOR` (or half of its own subject words occur in them), and not more than
  :data:`CARRIED_MARGIN` below its similarity to what the raw query found. So "And on Sundays?"
  after a question on the library's hours answers from the library, and "Who won the match last
  night?" is refused as it would be on a first turn: history never makes an off-topic question
  answerable. With Claude, the model's own standalone rewrite (the condense step) is
  searched as it wrote it whenever the guard lets it through: the fit check is for the local
  carried query, which only pastes the subject question in front of the message. When the rewrite's
  notes refuse the message (a rewrite built on the wrong earlier message: "What about kids?"
  rewritten around a price), the local carried query is tried, with the same checks, as when the
  condense call fails. A standalone message is searched once (once more, carried, when it is
  refused).
- **A message that names its own subject** — short, but neither continuing nor referring back
  ("What time does the supermarket close?", "Is there a sauna?") — and that is refused on its own
  stays refused unless the carried notes mention its subject (at least half of its own subject
  words occur in them, :data:`CARRIED_COVERAGE`), whatever the similarity: similarity cannot tell a
  supermarket's closing time from a museum's. The same holds when the message as written is
  answerable (the rental desk's closing time answers "What time does the supermarket close?" for
  the decision): in a conversation (or as the second part of a question) it is answered only from
  notes that mention its subject (reason ``other_subject``). "Who looks after the garden?" after a
  question on a tenancy finds "garden" in the tenancy's notes and is answered from them.
- **A new subject** — the words after "What about" / "How about", or the thing an existential
  question asks for ("Is there a café at the marina?"), when no earlier user message has them — must
  all be found in the notes answered from ("What about council tax?" after a tenancy question is
  refused, "What about kids?" after a kayak question finds the children's rule). These notes, and
  the half of a short message's subject words above, are the top note's document's among the
  evidence: a word another document mentions in passing (a café on a cycling club's ride) does not
  make a museum question about lunch answerable. Time words ("these days", "on Sunday") and the
  weather's "it" are no reference back (:mod:`ragchat.domain.followups`). A first
  turn and a one-shot question keep the single-turn decision: a paraphrase with one subject word
  ("Can I work from abroad?" for "working from another country") is answered there.
- **Parts.** "How much notice do I give and who fixes the boiler?" is split
  (:mod:`ragchat.domain.parts`); each part is retrieved and decided on its own (a short part leans
  on the one before it), the answered parts' notes are answered from, and a part that nothing
  covers is said to be not covered. All parts refused: the turn refuses.
- **Unknown names.** Names and codes of the message (:mod:`ragchat.domain.names`) that neither the
  notes found nor a keyword lookup among the caller's notes mention → refusal (reason
  ``unknown_name``), whose reply says what was not found. The lookup runs only for a name the found
  notes do not mention (one keyword search per such name).

The query used (``Retrieval.query``) is logged as ``chat.query`` and returned with the turn.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.answerability import EVIDENCE_CHUNKS, READER_POLICY
from ragchat.domain.citations import strip_citations
from ragchat.domain.followups import (
    carried_query,
    is_follow_up,
    leans_on_history,
    names_own_subject,
    new_subject_words,
    own_words_covered,
    subject_question,
    uncovered,
)
from ragchat.domain.models import ChatTurn, ModelRequest
from ragchat.domain.names import specific_names, unknown_names
from ragchat.domain.parts import split_parts
from ragchat.domain.prompts import CONDENSE_PROMPT, truncate_at_word
from ragchat.domain.retrieval import normalize_question
from ragchat.services.retrieval import EMPTY_KNOWLEDGE_BASE, Part, Retrieval

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ragchat.domain.models import Hit, Message, SearchFilter
    from ragchat.services.model_calls import ModelCaller
    from ragchat.services.retrieval import Retriever

logger = Logger(service="ragchat", child=True)

UNKNOWN_NAME = "unknown_name"
#: a short message about a subject of its own that the notes found never mention
OTHER_SUBJECT = "other_subject"
#: the message's similarity to the carried query's best passage must reach this (tuned on the dev
#: split of bench/conversations/)
CARRIED_FLOOR = 0.25
#: ... or this share of the message's own subject words must occur in the carried notes
CARRIED_COVERAGE = 0.5
#: a standalone message the raw query could not answer: the carried notes must fit it this well
STANDALONE_FLOOR = 0.35
#: the carried query wins unless the raw query's evidence fits the message this much better
CARRIED_MARGIN = 0.10
#: notes read per name by the keyword lookup
LOOKUP_HITS = 5
#: the condense call's own deadline (seconds; within the turn's model budget)
CONDENSE_BUDGET_S = 4.0
CONDENSE_MESSAGES = 6  # the latest messages shown to the condense call
CONDENSE_CHARS = 400  # of each of them
MAX_QUERY_CHARS = 500


def condense(
    caller: ModelCaller, history: Sequence[Message], question: str, *, deadline: float
) -> str | None:
    """Claude mode: the follow-up ``question`` rewritten by the model as a standalone question, from
    the latest messages of ``history`` (one short call, :data:`CONDENSE_BUDGET_S` at most, no
    circuit breaker). ``None`` when the call fails: the local carried query is searched instead."""
    lines = []
    for m in [m for m in history if m.role in ("user", "assistant")][-CONDENSE_MESSAGES:]:
        head, sep, tail = strip_citations(m.content).rpartition("\n\nSources: ")
        body = head if sep else tail
        lines.append(f"{m.role}: {truncate_at_word(' '.join(body.split()), CONDENSE_CHARS)}")
    lines.append(f"user (last message): {question}")
    request = ModelRequest(
        system=CONDENSE_PROMPT,
        messages=[ChatTurn("user", "\n".join(lines))],
        sources=[],
        question=question,
        max_tokens=100,
    )
    own_deadline = min(deadline, caller.clock() + CONDENSE_BUDGET_S)
    t0 = time.perf_counter()
    try:
        reply = caller.complete(request, deadline=own_deadline).text
    except Exception as exc:  # the local method still answers
        logger.warning("chat.condense_failed", extra={"error": type(exc).__name__})
        return None
    finally:
        logger.info(
            "chat.metrics", extra={"phase": "condense", "ms": round((time.perf_counter() - t0) * 1000, 1)}
        )
    line = next((ln.strip().strip('"') for ln in reply.splitlines() if ln.strip()), "")
    return line[:MAX_QUERY_CHARS] or None


def _blend(raw: Retrieval, carried: Retrieval) -> list[float] | None:
    """The vector the answer's sentences are chosen by: the message's and the carried query's,
    averaged (the message says what is asked, the carried query about what). On the dev split this
    answered 35/37 follow-ups right, the message's vector alone 30, the carried query's alone 28."""
    if raw.query_vector is None or carried.query_vector is None:
        return carried.query_vector
    mixed = [a + b for a, b in zip(raw.query_vector, carried.query_vector, strict=True)]
    norm = math.sqrt(sum(x * x for x in mixed)) or 1.0
    return [x / norm for x in mixed]


def retrieve_question(
    retriever: Retriever,
    question: str,
    flt: SearchFilter,
    *,
    previous: list[str] | None = None,
    condensed: str | None = None,
    conversation_id: str | None = None,
) -> Retrieval:
    """A turn's retrieval (see the module docstring): :meth:`Retriever.retrieve` for the raw
    message, the carried query, the parts, and the names check. ``previous``: the conversation's
    earlier user messages, oldest first; ``condensed``: the model's standalone rewrite of a
    follow-up (Claude mode), searched instead of the carried query."""
    previous = previous or []
    parts = split_parts(normalize_question(question))
    if len(parts) == 1:
        result = _single(retriever, question, flt, previous, condensed, conversation_id)
    else:
        result = _parts(retriever, parts, flt, previous, conversation_id)
    logger.info(
        "chat.query",
        extra={"conversationId": conversation_id, "carried": result.query != result.question},
    )
    return result


# ---------------------------------------------------------------------- one question
def _single(
    retriever: Retriever,
    question: str,
    flt: SearchFilter,
    previous: list[str],
    condensed: str | None,
    conversation_id: str | None,
) -> Retrieval:
    subject = subject_question(previous)
    raw = retriever.retrieve(question, flt, conversation_id=conversation_id)
    if raw.reason == EMPTY_KNOWLEDGE_BASE:
        return raw
    result = _choose(retriever, raw, flt, previous, subject, condensed, conversation_id)
    if condensed is not None and result.guard and result.reason != UNKNOWN_NAME and subject is not None:
        # Claude's rewrite found nothing to answer from (built on the wrong earlier message, say):
        # the local carried query, under the same checks, as when the condense call fails
        local = _choose(retriever, raw, flt, previous, subject, None, conversation_id)
        if not local.guard:
            return local
    return result


def _choose(
    retriever: Retriever,
    raw: Retrieval,
    flt: SearchFilter,
    previous: list[str],
    subject: str | None,
    condensed: str | None,
    conversation_id: str | None,
) -> Retrieval:
    """The retrieval answered from for the message (``raw``): its own, or the condensed / carried
    query's (module docstring), then the subject and names checks."""
    question = raw.question
    chosen = dataclasses.replace(raw, query=raw.question)
    if retriever.reader_decides():
        chosen = _choose_read(retriever, raw, flt, subject, condensed, conversation_id)
        return _check_names(retriever, raw.question, chosen, flt, conversation_id)
    follow_up = condensed is not None or is_follow_up(question)
    query = normalize_question(condensed or (carried_query(raw.question, subject) if subject else ""))
    reads = retriever.policy == READER_POLICY
    if query and query != raw.question and (follow_up or raw.guard):
        carried = retriever.retrieve(query, flt, conversation_id=conversation_id)
        # the model's own standalone question is searched as it wrote it (Claude reads the notes)
        trusted = condensed is not None and reads and not carried.guard
        if trusted or _carried_fits(
            retriever, raw, carried, flt.owner, follow_up=follow_up, conversation_id=conversation_id
        ):
            chosen = dataclasses.replace(carried, query=query, query_vector=_blend(raw, carried))
    if subject is not None:
        chosen = _check_subject(retriever, raw, chosen, previous, conversation_id)
    return _check_names(retriever, raw.question, chosen, flt, conversation_id)


def _choose_read(
    retriever: Retriever,
    raw: Retrieval,
    flt: SearchFilter,
    subject: str | None,
    condensed: str | None,
    conversation_id: str | None,
) -> Retrieval:
    """``READER=on``: a message that leans on the conversation (a continuation, a reference back, no
    subject of its own; or the model's condensed rewrite of it) is also searched as the carried query,
    which is kept only when the reader finds an answer under it (the reader reads the carried query
    with the carried notes); otherwise the message stands on its own. A message that changes subject
    is searched on its own, never glued to the previous question."""
    question = raw.question
    own = dataclasses.replace(raw, query=question)
    if condensed is None and (subject is None or not leans_on_history(question)):
        return own
    query = normalize_question(condensed or carried_query(question, subject or ""))
    if not query or query == question:
        return own
    carried = retriever.retrieve(query, flt, conversation_id=conversation_id)
    used = not carried.guard
    logger.info(
        "chat.carried",
        extra={
            "conversationId": conversation_id,
            "reader": True,
            "rawAnswerable": not raw.guard,
            "carriedMargin": None if carried.found is None else round(carried.found.margin, 3),
            "used": used,
        },
    )
    if not used:
        return own
    return dataclasses.replace(carried, query=query, query_vector=_blend(raw, carried))


def _check_subject(
    retriever: Retriever,
    raw: Retrieval,
    chosen: Retrieval,
    previous: list[str],
    conversation_id: str | None,
) -> Retrieval:
    """A message in a conversation that brings a subject of its own (module docstring) is refused
    when the notes it would be answered from — the top note's document's, among the evidence — do
    not mention that subject: every new subject word of "What about X?" / "Is there a X …?", and
    half the words of a short message naming its own subject. When the carried query's notes fail
    this and the message as written is answerable from notes that pass it, those are answered from
    (as on a first turn)."""
    if chosen.guard:
        return chosen
    question = raw.question
    if _subject_found(question, chosen, previous):
        return chosen
    if chosen is not raw and not raw.guard and _subject_found(question, raw, previous):
        return dataclasses.replace(raw, query=raw.question)
    logger.info("chat.other_subject", extra={"conversationId": conversation_id})
    return retriever.refuse(chosen, OTHER_SUBJECT, conversation_id=conversation_id)


def _subject_found(question: str, found: Retrieval, previous: list[str]) -> bool:
    if not found.hits:
        return True
    top = found.hits[0].document_id
    evidence = [h.text for h in found.hits[:EVIDENCE_CHUNKS] if h.document_id == top]
    if uncovered(new_subject_words(question, previous), evidence):
        return False
    return not names_own_subject(question) or own_words_covered(question, evidence) >= CARRIED_COVERAGE


def _carried_fits(
    retriever: Retriever,
    raw: Retrieval,
    carried: Retrieval,
    owner: str,
    *,
    follow_up: bool,
    conversation_id: str | None,
) -> bool:
    """Is the carried query's evidence an answer to the message as written? (module docstring)"""
    if carried.guard or raw.query_vector is None:
        return False
    fit = retriever.evidence_similarity(raw.query_vector, carried.hits, owner) or -1.0
    covered = own_words_covered(raw.question, [h.text for h in carried.hits[:EVIDENCE_CHUNKS]])
    leans = follow_up and leans_on_history(raw.question)
    if leans or (follow_up and not raw.guard):
        ok = fit >= CARRIED_FLOOR or covered >= CARRIED_COVERAGE
    elif follow_up:  # short, refused on its own, naming its own subject: the notes must mention it
        ok = covered >= CARRIED_COVERAGE
    else:  # a standalone message the raw query could not answer
        ok = fit >= STANDALONE_FLOOR and covered >= CARRIED_COVERAGE
    own = None
    if ok and not raw.guard:
        own = raw.decision.signals.passage if raw.decision is not None else None
        if own is None:
            own = retriever.evidence_similarity(raw.query_vector, raw.hits, owner)
        ok = own is None or fit >= own - CARRIED_MARGIN
    logger.info(
        "chat.carried",
        extra={
            "conversationId": conversation_id,
            "followUp": follow_up,
            "leans": leans,
            "rawAnswerable": not raw.guard,
            "carriedFit": round(fit, 4),
            "ownFit": None if own is None else round(own, 4),
            "coverage": round(covered, 4),
            "used": ok,
        },
    )
    return ok


# ---------------------------------------------------------------------- names
def _check_names(
    retriever: Retriever, question: str, chosen: Retrieval, flt: SearchFilter, conversation_id: str | None
) -> Retrieval:
    names = specific_names(question)
    if not names:
        return chosen
    missing = unknown_names(names, _texts(retriever, chosen.hits, flt.owner))
    if missing and chosen.query_vector is not None:
        missing = [n for n in missing if not _found_anywhere(retriever, n, chosen.query_vector, flt)]
    if not missing:
        return chosen
    refused = retriever.refuse(chosen, UNKNOWN_NAME, conversation_id=conversation_id)
    return dataclasses.replace(refused, unknown_names=missing)


def _found_anywhere(retriever: Retriever, name: str, vector: list[float], flt: SearchFilter) -> bool:
    """Does any of the caller's notes (within the filter) mention ``name``? A keyword search for
    it, then the exact check on the texts it returns."""
    index = retriever.index
    hits = retriever.searched(lambda: index.hybrid_search(name, vector, flt, LOOKUP_HITS))
    return not unknown_names([name], _texts(retriever, hits, flt.owner))


def _texts(retriever: Retriever, hits: list[Hit], owner: str) -> list[str]:
    return [h.text for h in hits] + list(retriever.titles_of(owner, hits).values())


# ---------------------------------------------------------------------- parts
def _parts(
    retriever: Retriever,
    parts: list[str],
    flt: SearchFilter,
    previous: list[str],
    conversation_id: str | None,
) -> Retrieval:
    done: list[Part] = []
    for i, part in enumerate(parts):
        done.append(Part(part, _single(retriever, part, flt, [*previous, *parts[:i]], None, conversation_id)))
    answered = [p.retrieval for p in done if not p.retrieval.guard]
    first = answered[0] if answered else done[0].retrieval
    hits: dict[str, Hit] = {}
    for r in answered:
        for h in r.hits:
            hits.setdefault(h.id, h)
    timings: dict[str, float] = {}
    for p in done:
        for phase, ms in p.retrieval.timings.items():
            timings[phase] = timings.get(phase, 0.0) + ms
    names = list(dict.fromkeys(n for p in done for n in p.retrieval.unknown_names))
    return dataclasses.replace(
        first,
        hits=list(hits.values()) if answered else first.hits,
        guard=not answered,
        timings=timings,
        question=" ".join(parts),
        query=" | ".join(p.retrieval.query or p.question for p in done),
        parts=done,
        unknown_names=names,
        titles={k: v for r in answered for k, v in r.titles.items()},
    )
