"""Issue 30: no regular expression in the package can be made to backtrack super-linearly by the text
it reads (the old HTML pre-pass held the server 84 s on 900 KB of ``<a ``; the old heading pattern
37 s on 128 KB of `` #``).

Every pattern is collected without a list to keep up to date:

* every module of ``ragchat`` is imported and each module-level compiled pattern taken, however it
  was built (concatenated constants, joined alternatives);
* the source is read with ``ast`` for every ``re.<function>(literal, …)`` call (patterns compiled
  inside functions, ``re.sub(r"\\s+", …)``);
* a ``re`` call whose pattern is neither a literal nor a module-level pattern (one built from data at
  run time) must be named in :data:`BUILT_AT_RUN_TIME` with a typical instance, or the collection
  test fails.

How the code runs each pattern decides what is timed: a pattern only ever given to ``match`` or
``fullmatch`` is tried at the start of the text; any other use (``search``, ``finditer``, ``sub``,
``split``, ``findall``, or handing the pattern on) is timed as ``finditer``, a search from every
position. Each pattern then goes through :mod:`tests.security.regex_worst_cases`, which builds the
inputs from the pattern's own structure and checks the time grows linearly.

Adding a pattern: nothing to do when it is a literal or a module-level constant; a pattern built at
run time gets an entry in :data:`BUILT_AT_RUN_TIME`. A pattern this test flags is made linear
(possessive ``*+``/``++``, atomic groups, a lookbehind so a run is entered only at its start, or a
small scanner with ``str.find``), not listed: :data:`ALLOWED` is for patterns proven linear that
the generator cannot time reliably, each with its reason, and is empty today.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import ragchat
from ragchat.domain.names import _pattern as name_pattern

from tests.security.regex_worst_cases import SEARCH, Use, super_linear

_ROOT = Path(ragchat.__file__).parent
_SOURCES = {path: path.read_text(encoding="utf-8") for path in sorted(_ROOT.rglob("*.py"))}
_FUNCTIONS = {"compile", "sub", "subn", "split", "findall", "finditer", "search", "match", "fullmatch"}
_ANCHORED = frozenset({"match", "fullmatch"})
_FLAGS = {"IGNORECASE": re.I, "I": re.I, "MULTILINE": re.M, "M": re.M, "DOTALL": re.S, "S": re.S}
_FLAGS |= {"VERBOSE": re.X, "X": re.X, "UNICODE": re.U, "U": re.U, "ASCII": re.A, "A": re.A}
_FLAG_POSITION = {"compile": 1, "split": 3, "sub": 4, "subn": 4}  # others: (pattern, string, flags)

#: patterns built from data at run time ("file:function" of the ``re`` call → typical instances)
BUILT_AT_RUN_TIME: dict[str, list[re.Pattern[str]]] = {
    # a name the user asked about ("Blue Lagoon Spa"), found in the retrieved passages
    "domain/names.py:_pattern": [name_pattern("Blue Lagoon Spa's"), name_pattern("x")],
}
#: patterns proven linear that the generated inputs cannot time reliably: (pattern, flags) → reason
ALLOWED: dict[tuple[str, int], str] = {}


@dataclass(frozen=True, slots=True)
class Found:
    where: str
    compiled: re.Pattern[str]
    use: Use


def _flags(node: ast.expr | None) -> int:
    if node is None:
        return 0
    if isinstance(node, ast.Attribute) and node.attr in _FLAGS:
        return int(_FLAGS[node.attr])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(node.left) | _flags(node.right)
    raise AssertionError(f"flags this test cannot read: {ast.dump(node)}")


def _re_calls(tree: ast.Module) -> list[tuple[ast.Call, str, bool]]:
    """(call, enclosing function or "", at module level) of each ``re.<function>(…)`` call."""
    found: list[tuple[ast.Call, str, bool]] = []

    def visit(node: ast.AST, function: str, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            is_top = top and not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and isinstance(child.func.value, ast.Name)
                and child.func.value.id == "re"
                and child.func.attr in _FUNCTIONS
            ):
                found.append((child, function, is_top))
            visit(child, inner, is_top)

    visit(tree, "", True)
    return found


def _literal_patterns() -> tuple[list[Found], list[str]]:
    """Literal patterns given to ``re`` calls, and the run-time-built ones not in BUILT_AT_RUN_TIME."""
    found, unknown = [], []
    for path, source in _SOURCES.items():
        rel = path.relative_to(_ROOT).as_posix()
        for call, function, top in _re_calls(ast.parse(source)):
            name = call.func.attr  # type: ignore[attr-defined]
            first = call.args[0] if call.args else None
            if top and name == "compile":
                continue  # a module-level pattern: imported below, timed as its uses need
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                if not top and f"{rel}:{function}" not in BUILT_AT_RUN_TIME:
                    unknown.append(f"{rel}:{call.lineno} (in {function or 'a class body'})")
                continue  # module level: imported below, whatever it was built from
            flag_node = next((k.value for k in call.keywords if k.arg == "flags"), None)
            position = _FLAG_POSITION.get(name, 2)
            if flag_node is None and len(call.args) > position:
                flag_node = call.args[position]
            compiled = re.compile(first.value, _flags(flag_node))
            use = Use(frozenset({name})) if name in _ANCHORED else SEARCH
            found.append(Found(f"{rel}:{call.lineno}", compiled, use))
    return found, unknown


def _methods(source: str, attr: str) -> set[str] | None:
    """The methods ``source`` calls on ``attr``; None when it hands the pattern on (an argument, a
    container, a loop): whoever receives it may search."""
    methods: set[str] = set()
    for m in re.finditer(rf"(?<![\w.]){attr}\b(?:\.(\w+)\(([^()\n]*))?", source):
        line = source[source.rfind("\n", 0, m.start()) + 1 : source.find("\n", m.end())]
        if m.group(1):  # a call; ``match(text, pos)`` in a loop tries many starts: a search
            methods.add("search" if "," in (m.group(2) or "") else m.group(1))
        elif not re.match(rf"\s*{attr}\s*[:=]|from |import |\s*{attr},?\s*$", line):
            return None
    return methods


def _qualified_uses() -> dict[str, set[str] | None]:
    """For each name used as ``something.name`` anywhere: the methods called on it (None when it is
    also handed on)."""
    uses: dict[str, set[str] | None] = {}
    for source in _SOURCES.values():
        for m in re.finditer(r"\.([A-Za-z_]\w*)\b(?:\.(\w+)\(([^()\n]*))?(?!\s*\()", source):
            name, method, args = m.groups()
            known = uses.setdefault(name, set())
            if known is not None:
                uses[name] = None if method is None else known | {"search" if "," in args else method}
    return uses


_QUALIFIED = _qualified_uses()


def _patterns_in(value: object) -> list[re.Pattern[str]]:
    """``value`` if it is a ``str`` pattern, or the ones a list, tuple, set or dict of them holds."""
    items = value.values() if isinstance(value, dict) else value
    if isinstance(value, re.Pattern):
        items = [value]
    elif not isinstance(value, list | tuple | set | frozenset | dict):
        return []
    return [p for p in items if isinstance(p, re.Pattern) and isinstance(p.pattern, str)]


def _module_patterns() -> list[Found]:
    """Each pattern a module holds at its top level (alone or in a container), timed as every module
    that holds it uses it (anchored only if each use is ``match``/``fullmatch``)."""
    where: dict[int, tuple[str, re.Pattern[str]]] = {}
    methods: dict[int, set[str] | None] = {}
    for name in ["ragchat", *(m.name for m in pkgutil.walk_packages(ragchat.__path__, "ragchat."))]:
        module = importlib.import_module(name)
        source = _SOURCES.get(Path(module.__file__ or ""), "")
        for attr, value in vars(module).items():
            for compiled in _patterns_in(value):
                key = id(compiled)
                where.setdefault(key, (f"{name}.{attr}", compiled))
                used = _methods(source, attr) if compiled is value else None
                if key not in methods or methods[key] is not None:
                    methods[key] = None if used is None else (methods.get(key) or set()) | used
                if methods[key] is not None:  # used from elsewhere as ``module.attr.method(``
                    qualified = _QUALIFIED.get(attr, set())
                    methods[key] = None if qualified is None else methods[key] | qualified
    found = []
    for key, (label, compiled) in where.items():
        used = methods[key]
        anchored = used is not None and used and used <= _ANCHORED
        found.append(Found(label, compiled, Use(frozenset(used)) if anchored else SEARCH))
    return found


def collect() -> tuple[list[Found], list[str]]:
    """Every distinct (pattern, flags), timed as searched if any of its uses searches."""
    literal, unknown = _literal_patterns()
    built = [Found(where, c, SEARCH) for where, cs in BUILT_AT_RUN_TIME.items() for c in cs]
    merged: dict[tuple[str, int], Found] = {}
    for item in [*literal, *_module_patterns(), *built]:
        key = (item.compiled.pattern, item.compiled.flags)
        seen = merged.get(key)
        if seen is None:
            merged[key] = item
        elif seen.use.methods is not None and (
            item.use.methods is None or item.use.methods != seen.use.methods
        ):
            methods = None if item.use.methods is None else seen.use.methods | item.use.methods
            merged[key] = Found(seen.where, seen.compiled, Use(methods))
    return sorted(merged.values(), key=lambda f: f.where), unknown


PATTERNS, UNKNOWN = collect()


def test_every_pattern_of_the_package_is_collected() -> None:
    assert not UNKNOWN, f"patterns built at run time: add a typical instance to BUILT_AT_RUN_TIME: {UNKNOWN}"
    from ragchat.domain import citations, context, extraction, extractive, parts

    found = {(f.compiled.pattern, f.compiled.flags): f for f in PATTERNS}
    for compiled in (extraction._TAG_START, context._HEADING_START, extractive._BOUNDARY, parts._SPLIT):
        assert (compiled.pattern, compiled.flags) in found
    # built by concatenation at module level, and a literal given straight to re.sub
    assert (citations._TRAILING_SOURCES.pattern, citations._TRAILING_SOURCES.flags) in found
    assert (r"[ \t]{2,}", re.U) in found
    assert found[(extractive._HEADING.pattern, extractive._HEADING.flags)].use.methods == {"match"}
    assert found[(extractive._CODE.pattern, extractive._CODE.flags)].use is SEARCH
    assert len(PATTERNS) > 60


@pytest.mark.parametrize("found", PATTERNS, ids=[f.where for f in PATTERNS])
def test_every_pattern_runs_in_linear_time_on_its_worst_generated_input(found: Found) -> None:
    if (found.compiled.pattern, found.compiled.flags) in ALLOWED:
        pytest.skip(ALLOWED[(found.compiled.pattern, found.compiled.flags)])
    problems = super_linear(found.compiled, found.use)
    assert not problems, f"{found.where} {found.compiled.pattern!r} is super-linear on " + "; ".join(problems)


# Patterns this package once had (git history), each super-linear on text a user can send: the
# generator must find that out by itself, or a new pattern like them would pass unnoticed.
_MATCH = Use(frozenset({"match"}))
HISTORICAL: dict[str, tuple[str, int, Use]] = {
    # extraction._TAG: ``<a `` × 300,000 held the server 84 s
    "html tag": (r"<(/?)([A-Za-z][A-Za-z0-9:-]*)\b[^>]*>", 0, SEARCH),
    # context._HEADING: ``# x`` + `` #`` × 64,000 + ``y`` froze the server 37 s
    "markdown heading": (r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M, SEARCH),
    # extractive._BOUNDARY: runs of ``!``
    "sentence end": (r"([.!?…]+)[\"'”’)\]]*\s+", 0, SEARCH),
    # api.body._STRING: an unterminated string of ``\"``
    "json string": (r'"(?:[^"\\]|\\.)*"', re.S, SEARCH),
    # parts._SPLIT: spaces before "and" (cubic)
    "question parts": (r"(?<=\?)\s+(?=\S)|\s*,?\s+and\s+(?:also\s+)?(?=(?:what|how)\b)", re.I, SEARCH),
    # extractive._EMPHASIS: ``**x `` × n, each opening scanned to the end of the line
    "emphasis": (r"(\*\*|\*|~~)(?=\S)(.+?)(?<=\S)\1|(?<!\w)(__|_)(?=\S)(.+?)(?<=\S)\3(?!\w)", 0, SEARCH),
    # citations._TRAILING_SOURCES: a heading, then spaces given back one by one (needs its prefix)
    "trailing sources": (
        r"(?:^|\n)[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?(?:sources?|citations?)"
        r"[ \t]*(?::(?:\*\*|__)?|(?:\*\*|__):)"
        r"(?P<inline>[^\n]*)(?P<items>(?:\n[ \t]*(?:[-*•]|\d+[.)])[^\n]*)*)\s*\Z",
        re.I,
        SEARCH,
    ),
    # extractive._TABLE_RULE: leading spaces split between two ``\s*`` (anchored: ``match`` only)
    "table rule": (r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$", 0, _MATCH),
    # extractive._LINK: ``[`` × n, none closed
    "markdown link": (r"!?\[([^\]]*)\]\([^)]*\)", 0, SEARCH),
    # not from the package: the classic exponential shape, caught before it can hang the run
    "nested quantifiers": (r"^(\w+\s?)*$", 0, _MATCH),
}


@pytest.mark.parametrize("name", sorted(HISTORICAL))
def test_the_check_flags_the_patterns_that_froze_the_server(name: str) -> None:
    pattern, flags, use = HISTORICAL[name]
    assert super_linear(re.compile(pattern, flags), use), f"{name}: not flagged"
