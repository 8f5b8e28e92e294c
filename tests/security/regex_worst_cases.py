"""Worst-case inputs for a regular expression, generated from its own structure, and a check that
the time it takes grows linearly with them.

A backtracking engine goes super-linear when a quantified part can be retried from many positions
(every start of a run it matches, every way of splitting a run between two quantifiers) and the
attempt fails late. The inputs here are built the way such attacks are (a prefix, a pumped run, a
character that makes the match fail), for every quantifier of the pattern:

* **runs**: ``pump × k + end`` — the search starts inside the run at every position;
* **prefixed runs**: ``prefix + pump × k + end`` — what leads to the quantifier (one sample of
  each element before it, for each branch) then the run, so an anchored pattern reaches it too;
* **repeated units**: ``(prefix + pump + spoiler) × k`` — many starts, each of which could scan to
  the end (``*a *a *a …`` for an emphasis that never closes).

``pump`` is each character the quantified part accepts (the pattern's own characters first, then a
few ordinary ones), and each such character followed by another one of the alphabet (two classes
that alternate); ``end`` is nothing, ``\\x00`` (which almost no class accepts) or a newline before
it; ``spoiler`` is nothing, a space, ``\\x00`` or a newline.

Every input is first timed at sizes growing in small steps from 8 to 128 characters (so an
exponential pattern is caught before it can hang the run), then at 256 and 2,048; the slowest at
the last size (or any far too slow on the way) are then timed at ``n``
and ``8 n`` characters, with ``n`` doubled until one run takes a measurable time (the least of
three runs: a busy machine only ever adds time), and a verdict close to the limit is measured twice.
Linear code takes about 8× longer at ``8 n``; quadratic 64×.
"""

from __future__ import annotations

import gc
import itertools
import re
import re._compiler as sre_compile
import re._constants as C
import re._parser as sre_parse
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

TINY = (8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64, 96, 128)  # characters of the first screenings
SCREEN = (256, 2_048)  # characters of the next screenings (slowest at the last one timed)
SCREEN_SLOW_S = 0.003  # an input of SCREEN characters this slow is timed at once
TOP = 3  # inputs timed at two sizes (the slowest of the screening)
GROW = 8  # the second size is this many times the first
MAX_RATIO = 30.0  # linear: ~8; quadratic: ~64
TARGET_S = 0.0005  # the first size is doubled until one run takes this long …
MAX_START = 65_536  # … or reaches this many characters (halved while it takes 4× as long)
FLOOR_S = 0.008  # at 8 n, a run this short is linear whatever the ratio says (timer noise)
TINY_LIMIT_S = 0.002  # so many characters that take this long: exponential (or cubic)

GENERIC = " a0\n"  # ordinary characters tried besides the pattern's own
SPOILERS = ("", " ", "\x00", "\n")
ENDS = ("", "\x00", "\n\x00")
MAX_PUMP_CHARS = 6
MAX_PAIR_FIRST = 2
MAX_PAIRS = 12
MAX_VARIANTS = 3  # samples kept per element / prefixes kept per quantifier

_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)
_SINGLE = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.CATEGORY)
_CATEGORY_SAMPLES = {
    C.CATEGORY_DIGIT: "0",
    C.CATEGORY_NOT_DIGIT: "a",
    C.CATEGORY_SPACE: " \t\n",
    C.CATEGORY_NOT_SPACE: "a",
    C.CATEGORY_WORD: "a_",
    C.CATEGORY_NOT_WORD: " -",
    C.CATEGORY_LINEBREAK: "\n",
    C.CATEGORY_NOT_LINEBREAK: "a",
}

Node = tuple[Any, Any]


@dataclass(frozen=True, slots=True)
class Use:
    """How the code runs a pattern: ``methods`` None for a search from every position (``search``,
    ``finditer``, ``sub``, ``split``, ``findall``), else the anchored methods it calls."""

    methods: frozenset[str] | None = None

    def run(self, compiled: re.Pattern[str], text: str) -> None:
        if self.methods is None:
            for _ in compiled.finditer(text):
                pass
        else:
            for method in sorted(self.methods):
                getattr(compiled, method)(text)


SEARCH = Use()


class _Generator:
    def __init__(self, compiled: re.Pattern[str]) -> None:
        self.flags = compiled.flags
        self.parsed = sre_parse.parse(compiled.pattern, compiled.flags)
        self.groups: dict[int, str] = {}
        self.named: list[str] = []
        self._collect(self.parsed.data)
        extra = [c for c in GENERIC if c not in self.named]
        self.alphabet = self.named + extra
        self._cache: dict[int, list[str]] = {}

    # ---------------------------------------------------------------- the pattern's own characters
    def _add(self, ch: str) -> None:
        if ch not in self.named:
            self.named.append(ch)

    def _collect(self, seq: Iterable[Node]) -> None:
        for op, av in seq:
            if op in (C.LITERAL, C.NOT_LITERAL):
                self._add(chr(av))
            elif op == C.RANGE:
                self._add(chr(av[0]))
                self._add(chr(av[1]))
            elif op == C.CATEGORY:
                for ch in _CATEGORY_SAMPLES.get(av, ""):
                    self._add(ch)
            elif op == C.IN:
                self._collect(av)
            elif op in _REPEATS:
                self._collect(av[2])
            elif op == C.SUBPATTERN:
                self._collect(av[3])
            elif op == C.ATOMIC_GROUP:
                self._collect(av)
            elif op == C.BRANCH:
                for branch in av[1]:
                    self._collect(branch)
            elif op in (C.ASSERT, C.ASSERT_NOT):
                self._collect(av[1])

    # ------------------------------------------------------------------------------- samples
    def accepts(self, node: Node, ch: str) -> bool:
        """Does a single-character element accept ``ch`` (flags as the pattern's)?"""
        key = id(node)
        if key not in self._cache:
            sub = sre_parse.SubPattern(self.parsed.state, [node])
            matcher = sre_compile.compile(sub, self.flags)
            pool = [*self.alphabet, "x", "é", "\x00", "-", "."]
            self._cache[key] = [c for c in dict.fromkeys(pool) if matcher.fullmatch(c)]
        return ch in self._cache[key]

    def chars(self, node: Node) -> list[str]:
        self.accepts(node, "")
        return self._cache[id(node)]

    def samples(self, seq: Iterable[Node]) -> list[str]:
        """Up to a few strings that the sequence ``seq`` matches ([] when none was found)."""
        out = [""]
        for node in seq:
            options = self._node_samples(node)
            if not options:
                return []
            out = list(dict.fromkeys(a + b for a, b in itertools.product(out, options)))[:MAX_VARIANTS]
        return out

    def _node_samples(self, node: Node) -> list[str]:
        op, av = node
        if op in _SINGLE:
            return self.chars(node)[:1]
        if op in _REPEATS:
            low, _high, body = av
            once = self.samples(body)
            if low == 0:
                return ["", *once[:1]]
            return [s * min(low, 64) for s in once]
        if op == C.SUBPATTERN:
            found = self.samples(av[3])
            if av[0] is not None and found:
                self.groups.setdefault(av[0], found[0])
            return found
        if op == C.ATOMIC_GROUP:
            return self.samples(av)
        if op == C.BRANCH:
            return list(dict.fromkeys(s for b in av[1] for s in self.samples(b)[:1]))[:MAX_VARIANTS]
        if op == C.GROUPREF:
            return [self.groups.get(av, "")]
        return [""]  # anchors, lookarounds, conditionals: no characters of their own

    # ------------------------------------------------------------------------ quantified parts
    def pumps(self, body: list[Node]) -> list[str]:
        if len(body) == 1 and body[0][0] in _SINGLE:
            accepted = self.chars(body[0])[:MAX_PUMP_CHARS]
            pairs = [a + b for a in accepted[:MAX_PAIR_FIRST] for b in self.alphabet if a != b]
            return accepted + pairs[:MAX_PAIRS]
        return self.samples(body)

    def quantified(self) -> Iterator[tuple[str, str]]:
        """(prefix, pump) for every quantifier that can repeat more than a few times."""
        yield from self._walk(self.parsed.data, [""])

    def _walk(self, seq: list[Node], prefixes: list[str]) -> Iterator[tuple[str, str]]:
        for node in seq:
            op, av = node
            if op in _REPEATS:
                if av[1] == C.MAXREPEAT or av[1] > 16:
                    for prefix in prefixes:
                        for pump in self.pumps(av[2]):
                            yield prefix, pump
                yield from self._walk(av[2], prefixes)
            elif op == C.SUBPATTERN:
                yield from self._walk(av[3], prefixes)
            elif op == C.ATOMIC_GROUP:
                yield from self._walk(av, prefixes)
            elif op == C.BRANCH:
                for branch in av[1]:
                    yield from self._walk(branch, prefixes)
            elif op in (C.ASSERT, C.ASSERT_NOT):
                yield from self._walk(av[1], prefixes)
            options = self._node_samples(node)
            if not options:
                return
            prefixes = list(dict.fromkeys(p + s for p, s in itertools.product(prefixes, options)))
            prefixes = prefixes[:MAX_VARIANTS]


Maker = Callable[[int], str]


def _fill(head: str, unit: str, tail: str, size: int) -> str:
    return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


def inputs(compiled: re.Pattern[str]) -> dict[tuple[str, str, str], Maker]:
    """Each generated input shape, (head, repeated unit, tail), and how to build it at a size."""
    shapes: set[tuple[str, str, str]] = set()
    for prefix, pump in _Generator(compiled).quantified():
        if not pump:
            continue
        for end in ENDS:
            shapes.add(("", pump, end))
        if not prefix or len(pump) > 1:
            continue  # two-character pumps alternate classes: tried as runs only
        for end in ENDS:
            shapes.add((prefix, pump, end))
        for spoiler in SPOILERS:
            shapes.add(("", prefix + pump + spoiler, ""))
    return {shape: (lambda size, s=shape: _fill(*s, size)) for shape in sorted(shapes)}


def _seconds(compiled: re.Pattern[str], use: Use, text: str) -> float:
    """CPU seconds of this thread: other processes on a loaded machine do not count."""
    started = time.thread_time()
    use.run(compiled, text)
    return time.thread_time() - started


def _least(compiled: re.Pattern[str], use: Use, text: str) -> float:
    return min(_seconds(compiled, use, text) for _ in range(3))


@dataclass(frozen=True, slots=True)
class Growth:
    shape: tuple[str, str, str]
    size: int
    small: float
    large: float

    @property
    def ratio(self) -> float:
        return self.large / max(self.small, 1e-9)

    @property
    def linear(self) -> bool:
        return self.large < FLOOR_S or self.ratio <= MAX_RATIO

    def __str__(self) -> str:
        head, unit, tail = self.shape
        return (
            f"{head!r} + {unit!r} × k + {tail!r}: {self.small * 1e3:.1f} ms at {self.size} chars, "
            f"{self.large * 1e3:.1f} ms at {GROW * self.size} (×{self.ratio:.0f})"
        )


def growth(compiled: re.Pattern[str], use: Use, shape: tuple[str, str, str], make: Maker) -> Growth:
    """Times at ``n`` and ``GROW × n``: ``n`` doubled from 256 until a run takes ``TARGET_S`` (halved
    while it takes over twice that: a cubic pattern must not take minutes at ``GROW × n``). Each
    time is the least of its runs (a busy machine only ever adds time): three at ``n``, and at
    ``GROW × n`` up to two, stopping at the first that shows linear growth."""
    size = 256
    took = _seconds(compiled, use, make(size))
    if took > 2 * TARGET_S:
        while took > 2 * TARGET_S and size > 32:
            size //= 2
            took = _seconds(compiled, use, make(size))
    else:
        while took < TARGET_S and size < MAX_START:
            size *= 2
            took = _seconds(compiled, use, make(size))
    text = make(size)
    small = _least(compiled, use, text)
    text = make(size * GROW)
    measured = Growth(shape, size, small, float("inf"))
    for _ in range(2):
        measured = Growth(shape, size, small, min(measured.large, _seconds(compiled, use, text)))
        if measured.linear:
            break
    return measured


def super_linear(compiled: re.Pattern[str], use: Use = SEARCH) -> list[str]:
    """What makes ``compiled`` super-linear under ``use`` ([] when nothing generated does). The
    garbage collector is off meanwhile: a collection in one timing is not the pattern's doing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _super_linear(compiled, use)
    finally:
        if enabled:
            gc.enable()


def _super_linear(compiled: re.Pattern[str], use: Use) -> list[str]:
    made = inputs(compiled)
    for size in TINY:  # in small steps: an exponential pattern is caught before it can hang the run
        slow = [shape for shape, make in made.items() if _seconds(compiled, use, make(size)) > TINY_LIMIT_S]
        slow = [shape for shape in slow if _least(compiled, use, made[shape](size)) > TINY_LIMIT_S]
        if slow:  # linear code reads a few dozen characters in microseconds
            return [f"{shape!r} takes over {TINY_LIMIT_S * 1e3:.0f} ms at {size} chars" for shape in slow[:3]]
    checked: set[tuple[str, str, str]] = set()
    screened: list[tuple[float, tuple[str, str, str]]] = []
    for size in SCREEN:
        screened = []
        for shape, make in made.items():
            took = _seconds(compiled, use, make(size))
            if took > SCREEN_SLOW_S and shape not in checked:  # far beyond linear: time it at once
                checked.add(shape)
                if found := _verdict(compiled, use, [shape], made):
                    return found
            screened.append((took, shape))
    slowest = [shape for _t, shape in sorted(screened, reverse=True) if shape not in checked]
    return _verdict(compiled, use, slowest[:TOP], made)


def _verdict(
    compiled: re.Pattern[str],
    use: Use,
    shapes: list[tuple[str, str, str]],
    made: dict[tuple[str, str, str], Maker],
) -> list[str]:
    for shape in shapes:
        measured = growth(compiled, use, shape, made[shape])
        if not measured.linear and measured.ratio < 2 * MAX_RATIO:  # close: once more, from the start
            measured = growth(compiled, use, shape, made[shape])
        if not measured.linear:
            return [str(measured)]
    return []
