"""Follow-up questions in a conversation (docs/retrieval.md step 1): is a message standalone, and what does it
carry over from the conversation when it is not.

A follow-up leans on what came before: it opens like a continuation ("And on Sundays?", "What about
a tandem?"), refers back with a pronoun ("How big is the deposit for one?", "Is it safe for my
cat?"), or is too short to stand alone ("At what time?", "What time does the supermarket close?").
For such a message the local method searches with a *carried* query too: the conversation's subject
question (the latest user message that stood alone) followed by the message itself. Retrieval then
decides between the raw and the carried query (``ragchat.services.questions``); the user sees the
query that was used.

Only a continuation, a reference back or a message without a subject word of its own *leans* on the
conversation (:func:`leans_on_history`). A short message that names its own subject and neither
continues nor refers back ("What time does the supermarket close?", "Is there a sauna?") is about
that subject: history may complete it, but never makes it relevant (the carried notes must mention
its subject, see ``ragchat.services.questions``). "There" in "is there …" / "are there …" says that
something exists; it refers back to nothing. Nor do time phrases ("these days", "today", "this
weekend") or the "it" of the weather ("Will it rain?", "Is it going to be windy?").

A message can also bring a subject of its own into the conversation: "What about the swimming
pool?" / "How about council tax?" (the words after the opener), or "Is there a café …?" (the thing
asked for). Such *new* subject words — not in the earlier user messages — must be found in the notes
the answer comes from (:func:`new_subject_words`, :func:`uncovered`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragchat.domain.extractive import tokens

#: openings of a message that continues the previous one
OPENERS = (
    "and ",
    "and,",
    "what about",
    "how about",
    "also",
    "or ",
    "but ",
    "then ",
    "so ",
    "what if",
    "same ",
    "in that case",
    "for ",
)
#: words by which a question refers back to something named earlier
REFERRING = frozenset(
    """it its it's itself they them their theirs that this those these there one ones he she him her
    his hers such same either both""".split()  # noqa: SIM905
)
#: openers after which the message names what it is now about ("What about kids?")
ABOUT_OPENERS = ("what about", "how about")
#: content words that ask about an attribute rather than name a subject ("how long", "what cost")
GENERIC = frozenset(
    """cost costs price prices much many long big large small time times take takes get need needs
    allowed possible happen happens mean means work works open close opens closes day days hour
    hours week weeks year years well too instead way ways thing things kind kinds sort""".split()  # noqa: SIM905
)
#: words that say when, not what: not subject words ("Will it rain on Sunday?" is about rain)
TIME_WORDS = frozenset(
    """today tonight tomorrow yesterday nowadays currently morning mornings afternoon afternoons
    evening evenings night nights weekend weekends weekday weekdays monday tuesday wednesday thursday
    friday saturday sunday mondays tuesdays wednesdays thursdays fridays saturdays sundays""".split()  # noqa: SIM905
)
#: the same word in everyday speech and in documents ("kids" for "children"): a subject word is
#: also found as its document spelling (compared by the first letters, as other words)
EQUIVALENTS = {
    "kids": ("child",),
    "kid": ("child",),
    "bike": ("bicycl", "cycl"),
    "bikes": ("bicycl", "cycl"),
    "car": ("vehicl",),
    "cars": ("vehicl",),
    "fix": ("repair",),
    "fixe": ("repair",),
    "fixed": ("repair",),
    "fixing": ("repair",),
}
#: a pronoun makes a follow-up only in a message with at most this many subject words of its own: a
#: longer one names its subject itself ("All stem cells segregate their chromosomes randomly.")
REFERRING_MAX_WORDS = 4
#: a message with at most this many subject words of its own is elliptical (the local method
#: searches it both ways, which costs no model call)
SHORT = 2
#: the same for the condense step of Claude mode (a model call): "Why is grass green?" stands alone
CONDENSE_SHORT = 1
_PREFIX = 5  # words sharing their first letters are the same word (as in answerability)
_WORD = re.compile(r"[\w']+")
#: "is there", "are there", "isn't there", "there is" …: "there" says something exists
_EXISTENTIAL = re.compile(
    r"\b(?:is|are|was|were|isn't|aren't|wasn't|weren't|will|would|could|can|might)\s+there\b"
    r"|\bthere(?:\s+|')(?:is|are|was|were|s|be|been)\b"
)
#: the thing an existential question asks for: "is there a café …", "are there any lockers …"
_EXISTS_WHAT = re.compile(
    # possessive spaces: ``\s+`` then ``\s*`` around the optional word split a run of spaces every way
    r"\b(?:is|are|isn't|aren't|will|would|could|can)\s+there\s++(?:a|an|any|some|one|anywhere|somewhere)?\s*+"
    r"([\w'-]+(?:\s+[\w'-]+){0,2})"
)
#: time phrases: they say when, and refer back to nothing ("these days", "this weekend")
_TIME = re.compile(
    r"\b(?:these days|those days|nowadays|today|tonight|tomorrow|right now|at the moment|"
    r"(?:this|that|next|last) (?:morning|afternoon|evening|night|week|weekend|month|year|time))\b"
)
#: the "it" of the weather: "Will it rain?", "Is it going to be windy?", "it's snowing"
_WEATHER_IT = re.compile(
    r"\bit(?:'s|\s+(?:is|was|will|be|been|going|to|gonna|get|getting|might|may|could|would|stay))*\s+"
    r"(?:rain|snow|sunny|windy|cloudy|foggy|icy|freez|storm|hail|thunder|frost|cold|hot|warm|chilly|wet)"
)


def subject_words(question: str) -> list[str]:
    """The question's own content words that may name a subject (attribute and time words, and
    the words of time phrases such as "right now", left out)."""
    plain = _TIME.sub(" ", _lower(question))
    return [t for t in tokens(plain) if t not in GENERIC and t not in TIME_WORDS]


def _lower(question: str) -> str:
    return " ".join(question.lower().replace("’", "'").split())


def _refers_back(lower: str, own: int) -> bool:
    """A referring word in a message of at most :data:`REFERRING_MAX_WORDS` subject words of its
    own ("there" of "is there" left out)."""
    plain = _WEATHER_IT.sub(" ", _TIME.sub(" ", _EXISTENTIAL.sub(" ", lower)))
    words = {w.strip("'") for w in _WORD.findall(plain)}
    return bool(words & REFERRING) and own <= REFERRING_MAX_WORDS


def leans_on_history(question: str) -> bool:
    """Does the message continue the previous one ("And on Sundays?"), refer back to something
    named before ("How big is the deposit for one?"), or name no subject of its own ("At what
    time?")? Such a message may take its relevance from the conversation; any other stands for its
    own subject, even when it is short."""
    lower = _lower(question)
    if lower.startswith(OPENERS):
        return True
    own = len(subject_words(question))
    return own == 0 or _refers_back(lower, own)


def names_own_subject(question: str, short: int = SHORT) -> bool:
    """A short message (at most ``short`` subject words) that neither continues nor refers back:
    "What time does the supermarket close?", "Is there a sauna?". It is about its own subject."""
    own = len(subject_words(question))
    return 0 < own <= short and not leans_on_history(question)


def is_follow_up(question: str, short: int = SHORT) -> bool:
    """Is this message searched with the conversation's subject too (it leans on the conversation,
    or has at most ``short`` subject words of its own)?"""
    return leans_on_history(question) or len(subject_words(question)) <= short


def needs_condensing(question: str) -> bool:
    """Claude mode: is the message rewritten by the model as a standalone question before it is
    searched? Every message that leans on the conversation — a continuation, a reference back
    (whatever its length: "Does that also apply to contractors working from home?"), a message
    with at most :data:`CONDENSE_SHORT` subject words of its own."""
    if is_follow_up(question, CONDENSE_SHORT):
        return True
    lower = _lower(question)
    return _refers_back(lower, 0)


def subject_question(previous: Sequence[str]) -> str | None:
    """The conversation's subject: the latest earlier user message that stood alone (``previous``:
    the earlier user messages, oldest first); ``None`` when there is none."""
    for text in reversed(previous):
        if not is_follow_up(text):
            return text
    return previous[0] if previous else None


def carried_query(question: str, subject: str) -> str:
    """The query searched for a follow-up: the subject question, then the message itself."""
    subject = " ".join(subject.split())
    if not subject.endswith(("?", ".", "!")):
        subject += "."
    return f"{subject} {question}"


def _same_word(word: str, other: str) -> bool:
    return word[:_PREFIX] == other[:_PREFIX]


def new_subject_words(question: str, previous: Sequence[str]) -> list[str]:
    """The subject a message brings into the conversation, in words the earlier user messages
    (``previous``) do not have: the words after "What about" / "How about", or the thing an
    existential question asks for ("Is there a café at the marina?" → café); ``[]`` for other
    messages. Referring words ("What about same-day ones?") are no subject."""
    lower = _lower(question)
    if lower.startswith(ABOUT_OPENERS):
        asked = subject_words(lower.split(" ", 2)[2] if lower.count(" ") >= 2 else "")
    else:
        match = _EXISTS_WHAT.search(lower)
        asked = subject_words(match.group(1))[:1] if match else []
    before = [w for text in previous for w in tokens(text)]
    return [
        w for w in dict.fromkeys(asked) if w not in REFERRING and not any(_same_word(w, b) for b in before)
    ]


def uncovered(words: Sequence[str], texts: Sequence[str]) -> list[str]:
    """The ``words`` (subject words) none of ``texts`` has (compared by their first letters, a
    short word also in its plural, an everyday word also as its document spelling)."""
    found_words = {w for t in texts for w in tokens(t)}
    found = {w[:_PREFIX] for w in found_words}
    short = [w for w in found_words if len(w) <= _PREFIX + 1]

    def covered(word: str) -> bool:
        if word[:_PREFIX] in found or any(e[:_PREFIX] in found for e in EQUIVALENTS.get(word, ())):
            return True
        # a word shorter than the prefix: "pass" is in "Day passes" (folded "passe")
        return len(word) < _PREFIX and any(w.startswith(word) and len(w) - len(word) <= 2 for w in short)

    return [w for w in words if not covered(w)]


def own_words_covered(question: str, texts: Sequence[str]) -> float:
    """The share of the message's own subject words (first letters, as the answerability decision
    compares words) found in ``texts``; 1.0 when it names no subject of its own ("At what time?")."""
    own = set(subject_words(question))
    if not own:
        return 1.0
    return 1 - len(uncovered(sorted(own), texts)) / len(own)
