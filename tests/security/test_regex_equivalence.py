"""The linear rewrites of issue 30 read text exactly as the patterns they replace (quoted here as they
were): on ordinary text, and on thousands of random strings made of the characters that matter to
each (a seeded generator, so a failure names a reproducible input)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

import pytest
from ragchat import observability
from ragchat.api.security_headers import inline_scripts
from ragchat.cli import render
from ragchat.domain import citations, extraction, extractive, followups, history
from ragchat.domain.markdown_marks import unemphasise, unlink

_OLD_TRAILING = re.compile(
    r"(?:^|\n)"
    + citations.SOURCES_HEADING
    + r"(?P<inline>[^\n]*)(?P<items>(?:\n"
    + citations.SOURCES_ITEM
    + r"[^\n]*)*)\s*\Z",
    re.IGNORECASE,
)
_OLD_EMPHASIS = re.compile(r"(\*\*|\*|~~)(?=\S)(.+?)(?<=\S)\1|(?<!\w)(__|_)(?=\S)(.+?)(?<=\S)\3(?!\w)")
_OLD_EXISTS_WHAT = re.compile(
    r"\b(?:is|are|isn't|aren't|will|would|could|can)\s+there\s+(?:a|an|any|some|one|anywhere|somewhere)?\s*"
    r"([\w'-]+(?:\s+[\w'-]+){0,2})"
)


def _found(match: re.Match[str] | None) -> object:
    return None if match is None else (match.span(), match.groups())


def _sub(
    pattern: str, replacement: str | Callable[[re.Match[str]], str], flags: int = 0
) -> Callable[[str], str]:
    compiled = re.compile(pattern, flags)
    return lambda text: compiled.sub(replacement, text)


def _marks(match: re.Match[str]) -> str:
    return "\n\n" if "\ue000" in match.group() else "\n"


def _tag(match: re.Match[str]) -> str:
    return f"<{match.group(1)}>"


# name → (old, new, pieces random strings are made of, ordinary inputs)
CASES: dict[str, tuple[Callable[[str], object], Callable[[str], object], Sequence[str], list[str]]] = {
    "tag with its spaces": (
        _sub(r"[ \t]*" + citations.CITATION_PATTERN, _tag),
        lambda t: citations._TAG_WITH_SPACE.sub(_tag, t),
        [" ", "\t", "[source: a]", "[source:", "a", "]"],
        ["Refunds take 5 days [source: doc-1]  [source: x_2].", "[source: a]"],
    ),
    "space before punctuation": (
        _sub(r"[ \t]+([.,;:!?]+)(?=[\s\"'”’)\]]|$)", r"\1"),
        lambda t: citations._SPACE_BEFORE_PUNCTUATION.sub(r"\1", t),
        ' \t.,!a"\n)',
        ["refunds , fast .", "types .txt, .md and .pdf", "end !"],
    ),
    "trailing sources block": (
        lambda t: _found(_OLD_TRAILING.search(t)),
        lambda t: _found(citations._TRAILING_SOURCES.search(t)),
        ["\n", "Sources:", " ", "\t", "- a", "1.", "x", "**", "#", ":"],
        [
            "Answer.\n\n**Sources:** [source: a]\n- b-1\n",
            "Answer.\nSource: the 2019 report",
            "x\nCitations:\n",
        ],
    ),
    "summary sources line": (
        _sub(r"\s*Sources:\s*[A-Za-z0-9_,\s-]*$", ""),
        lambda t: history._SOURCES_LINE.sub("", t),
        ["\n", " ", "Sources:", "a", ",", "!", "-"],
        ["It is open. Sources: doc-1, doc_2\n", "Sources: none!"],
    ),
    "html block markers": (
        _sub(r"[ \ue000\ue001]*[\ue000\ue001][ \ue000\ue001]*", _marks),
        lambda t: extraction._MARKS.sub(_marks, t),
        " \ue000\ue001a",
        ["Title \ue000 \ue001 text", "a \ue001b"],
    ),
    "quote markers": (
        _sub(r"^(\s*>)+\s?", ""),
        lambda t: extractive._QUOTE.sub("", t),
        " >a\n\t",
        ["> > quoted", ">no space", " > x > y"],
    ),
    "table rule": (
        lambda t: bool(re.match(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$", t)),
        lambda t: bool(extractive._TABLE_RULE.match(t)),
        [" ", "|", ":", "--", "-", "a", "\n"],
        ["| --- | :---: |", "|---|---|", "  ---  ", "| a | b |"],
    ),
    "existential question": (
        lambda t: _found(_OLD_EXISTS_WHAT.search(t)),
        lambda t: _found(followups._EXISTS_WHAT.search(t)),
        ["is there", " ", "a", "any", "x", "\n", "one"],
        ["is there a café nearby", "are there any lockers", "is there parking"],
    ),
    "terminal sources line": (
        _sub(r"(?:\n[ \t]*)*^" + re.escape(citations.SOURCES_PREFIX) + r"[^\n]*\s*\Z", "", re.MULTILINE),
        render.without_sources_line,
        ["\n", " ", "\t", "Sources: ", "a", "\u2028", "\r"],
        ["It is open.\n\n  \nSources: a, b\n", "Sources: a", "No sources here.\nSources:x"],
    ),
    "space before a marker": (
        _sub(r"[ \t]+(\[\d+\])", r" \1"),
        lambda t: render._SPACE_BEFORE_MARK.sub(r" \1", t),
        [" ", "\t", "[1]", "[", "1", "]", "a"],
        ["open  [1]\t[2].", "x[3]"],
    ),
    "inline scripts": (
        re.compile(r"<script>(.*?)</script>", re.DOTALL | re.IGNORECASE).findall,
        inline_scripts,
        ["<script>", "</script>", "<SCRIPT>", "a", "\n", "</scRipt>"],
        ["<html><script>a()</script><p>x</p><SCRIPT>b\n</Script></html>", "<script>never closed"],
    ),
    "query values in logs": (
        _sub(r"(\?|&)([^=&\s#\"']+)=[^&\s#\"']*", rf"\1\2={observability.MASK}"),
        lambda t: observability._QUERY.sub(observability._mask_value, t),
        "?&=a #'b",
        ["GET /chat?text=what+is+it&k=5 200", "/a?flag&x=1", "??a=1"],
    ),
    "markdown links": (
        _sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1"),
        unlink,
        "![]()a ",
        ["See [the guide](https://x.test/a) and ![logo](l.png).", "[not a link] (x)", "[a [b](c)"],
    ),
    "markdown emphasis": (
        _sub(_OLD_EMPHASIS.pattern, lambda m: m.group(2) if m.group(1) else m.group(4)),
        unemphasise,
        "*_~ a\n.",
        ["**Bold** and *it* and ~~gone~~", "MAX_BODY_BYTES stays", "__init__ and _a_ b", "***both***"],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_linear_rewrite_reads_text_as_the_old_pattern_did(name: str) -> None:
    old, new, pieces, ordinary = CASES[name]
    for text in ordinary:
        assert new(text) == old(text), text
    rng = random.Random(name)
    for _ in range(4_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert new(text) == old(text), repr(text)


def test_plain_text_still_takes_the_markup_off_a_sentence() -> None:
    sentence = "> See **[the guide](https://x.test)** for `MAX_BODY_BYTES` and *why* it_is."
    assert extractive.plain_text(sentence) == "See the guide for MAX_BODY_BYTES and why it_is."
