"""Rich Text Format (.rtf) as Markdown-like text (docs/ingestion.md), read with the standard library.

RTF is text: groups in braces, control words (``\\par``, ``\\b``, ``\\u8364``), hex escapes
(``\\'e9``) and plain text. One linear pass over a tokenizer keeps what a reader sees:

- paragraphs (``\\par``), line breaks (``\\line``), tabs; ``\\uN`` (with its ``\\ucN`` fallback
  skipped) and ``\\'hh`` in the document's code page (``\\ansicpg``, default Windows-1252);
- headings: a paragraph with ``\\outlinelevelN`` becomes ``#`` × (N + 1);
- list items: a paragraph in a list (``\\ls``) becomes a ``- `` line (the bullet text RTF writers put
  in ``\\listtext``/``\\pntext`` is left out);
- tables: cells (``\\cell``) joined as ``| a | b |`` rows (``\\row``);
- everything that is not text (font and colour tables, style sheets, document info, pictures,
  objects, ``\\*`` destinations, field instructions) is skipped; ``\\binN`` data is stepped over.

Limits: groups nested deeper than :data:`MAX_RTF_DEPTH` are refused (:class:`ExtractionError`), and
the CPU budget is checked every :data:`CHECK_EVERY` tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ragchat.domain.errors import ExtractionError

MAX_RTF_DEPTH = 256
CHECK_EVERY = 50_000

_TOKEN = re.compile(
    rb"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?|\\'([0-9a-fA-F]{2})|\\(.)|([{}])|([\r\n]+)|([^\\{}\r\n]+)", re.DOTALL
)
_SKIP = frozenset(
    b"fonttbl colortbl stylesheet info pict object header headerl headerr headerf footer footerl "
    b"footerr footerf themedata colorschememapping datastore latentstyles listtable listoverridetable "
    b"rsidtbl generator xmlnstbl mmathPr fldinst listtext pntext pntxta pntxtb filetbl revtbl "
    b"bkmkstart bkmkend field_inst nonshppict private userprops".split()
)


def is_rtf(data: bytes) -> bool:
    return data.lstrip()[:5] == b"{\\rtf"


class _State:
    """Per-group state: skipping this group's text, the ``\\uc`` fallback length."""

    __slots__ = ("skip", "uc")

    def __init__(self, skip: bool = False, uc: int = 1) -> None:
        self.skip, self.uc = skip, uc


def rtf_text(data: bytes, check: Callable[[str], None]) -> str:
    if not is_rtf(data):
        raise ExtractionError("Could not read the RTF document: it does not start with {\\rtf.")
    reader = _Reader(check)
    reader.run(data)
    return reader.result()


class _Reader:
    def __init__(self, check: Callable[[str], None]) -> None:
        self.check = check
        self.stack: list[_State] = []
        self.state = _State()
        self.encoding = "cp1252"
        self.blocks: list[str] = []
        self.para: list[str] = []
        self.cells: list[str] = []
        self.rows: list[str] = []
        self.heading = 0
        self.listed = False
        self.skip_chars = 0  # fallback characters still to drop after a ``\uN``
        self.group_start = False  # the next token is the first in its group (``\*`` is checked there)

    def run(self, data: bytes) -> None:
        pos, count = 0, 0
        while pos < len(data):
            m = _TOKEN.match(data, pos)
            if m is None:  # a lone backslash at the end
                break
            pos = m.end()
            count += 1
            if count % CHECK_EVERY == 0:
                self.check("RTF text")
            word, arg, hexa, symbol, brace, newline, text = m.groups()
            first, self.group_start = self.group_start, False
            if brace is not None:
                self._brace(brace)
            elif word is not None:
                pos = self._word(word, arg, first, data, pos)
            elif hexa is not None:
                self._chars(bytes([int(hexa, 16)]).decode(self.encoding, errors="replace"))
            elif symbol is not None:
                self._symbol(symbol, first)
            elif text is not None:
                self._chars(text.decode(self.encoding, errors="replace"))
            elif newline is not None:
                continue

    def _brace(self, brace: bytes) -> None:
        if brace == b"{":
            if len(self.stack) >= MAX_RTF_DEPTH:
                raise ExtractionError(
                    f"Could not read the RTF document: its groups nest deeper than {MAX_RTF_DEPTH}."
                )
            self.stack.append(self.state)
            self.state = _State(self.state.skip, self.state.uc)
            self.group_start = True
        elif self.stack:
            self.state = self.stack.pop()

    def _symbol(self, symbol: bytes, first: bool) -> None:
        if symbol == b"*" and first:
            self.state.skip = True
        elif symbol == b"~":
            self._chars("\u00a0")
        elif symbol in (b"\\", b"{", b"}"):
            self._chars(symbol.decode())
        elif symbol in (b"\n", b"\r"):
            self._paragraph()
        elif symbol == b"-" or symbol == b"_":
            self._chars("-" if symbol == b"_" else "")

    def _word(self, word: bytes, arg: bytes | None, first: bool, data: bytes, pos: int) -> int:
        n = int(arg) if arg is not None else None
        if word in _SKIP:
            self.state.skip = True
        elif word == b"bin" and n:
            return pos + max(n, 0)
        elif word == b"ansicpg" and n:
            self.encoding = f"cp{n}" if _known(f"cp{n}") else self.encoding
        elif word == b"uc" and n is not None:
            self.state.uc = max(n, 0)
        elif word == b"u" and n is not None:
            self._chars(chr(n + 65536 if n < 0 else n) if 0 <= (n + 65536 if n < 0 else n) < 0x110000 else "")
            self.skip_chars = self.state.uc
            return pos
        elif word in (b"par", b"sect", b"page"):
            self._paragraph()
        elif word == b"line":
            self._chars("\n")
        elif word == b"tab":
            self._chars("\t")
        elif word == b"cell":
            self.cells.append(" ".join("".join(self.para).split()))
            self.para = []
        elif word == b"row":
            self.rows.append("| " + " | ".join(c.replace("|", "\\|") for c in self.cells) + " |")
            self.cells, self.para = [], []
        elif word == b"pard":
            self.heading, self.listed = 0, False
        elif word == b"outlinelevel" and n is not None and 0 <= n < 6:
            self.heading = n + 1
        elif word == b"ls":
            self.listed = True
        elif word in (b"emdash", b"endash", b"bullet", b"lquote", b"rquote", b"ldblquote", b"rdblquote"):
            self._chars(_PUNCT[word])
        self.skip_chars = 0 if word != b"u" else self.skip_chars
        return pos

    def _chars(self, text: str) -> None:
        if self.skip_chars:
            take = min(self.skip_chars, len(text))
            self.skip_chars -= take
            text = text[take:]
        if not self.state.skip and text:
            self.para.append(text)

    def _paragraph(self) -> None:
        if self.rows and not self.cells:
            self._flush_table()
        text = "".join(self.para).strip()
        self.para = []
        if not text:
            return
        if self.heading:
            text = "#" * self.heading + " " + " ".join(text.split())
        elif self.listed:
            text = "- " + " ".join(text.split())
        self.blocks.append(text)

    def _flush_table(self) -> None:
        width = self.rows[0].count(" | ") + 1
        self.blocks.append(
            "\n".join([self.rows[0], "| " + " | ".join(["---"] * width) + " |", *self.rows[1:]])
        )
        self.rows = []

    def result(self) -> str:
        self._paragraph()
        if self.rows:
            self._flush_table()
        from ragchat.domain.office import join_blocks

        return join_blocks(self.blocks)


_PUNCT = {
    b"emdash": "—",
    b"endash": "–",
    b"bullet": "•",
    b"lquote": "‘",
    b"rquote": "’",
    b"ldblquote": "“",
    b"rdblquote": "”",
}


def _known(encoding: str) -> bool:
    import codecs

    try:
        codecs.lookup(encoding)
    except LookupError:
        return False
    return True
