"""Office and e-book documents as Markdown-like text (docs/ingestion.md): .docx, .pptx, .xlsx, .odt
and .epub, read from their zip of XML parts with the standard library (:mod:`ragchat.domain.zipxml`
holds the zip and XML bomb limits). No third-party parser: each format needs only its text, and a
few hundred lines of our own reading cost no install size, no import time and no parser of theirs
to keep safe.

What is kept, so the splitter (Markdown-aware) and the citation panel can use it:

- headings as ``#`` lines (Word heading styles or outline levels, ODF ``text:h``, slide titles,
  sheet names, EPUB ``<h1>``…``<h6>``);
- list items as ``- `` lines, indented two spaces per level;
- table rows as ``| a | b |`` lines (the first row followed by ``| --- |``);
- paragraphs separated by blank lines.

Each slide of a presentation, each sheet of a workbook and each chapter of an e-book is a page of
its own (no page number: the viewer draws PDF pages only).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator
from urllib.parse import unquote
from xml.etree import ElementTree as ET

from ragchat.domain.content_types import DOCX, EPUB, ODT, PPTX, XLSX
from ragchat.domain.errors import ExtractionError
from ragchat.domain.zipxml import SafeZip

Page = tuple[str, dict[str, object]]
Budget = Callable[[str], None]

NAMES = {
    DOCX: "Word document",
    PPTX: "PowerPoint presentation",
    XLSX: "Excel workbook",
    ODT: "OpenDocument text",
    EPUB: "EPUB e-book",
}


def office_pages(data: bytes, content_type: str, check: Budget, *, html: Callable[[str], str]) -> list[Page]:
    """The text pages of an Office or e-book file (:class:`ExtractionError` when it cannot be read);
    ``html``: reads an (X)HTML chapter of an e-book as Markdown-like text."""
    archive = SafeZip(data, NAMES[content_type])
    if content_type == EPUB:
        texts = _epub(archive, check, html)
    else:
        texts = {DOCX: _docx, PPTX: _pptx, XLSX: _xlsx, ODT: _odt}[content_type](archive, check)
    return [(text, {}) for text in texts if text.strip()]


def check_office(data: bytes, content_type: str) -> None:
    """Open the archive and its central directory (cheap: before the 202): not a zip, a zip bomb by
    its declared sizes, or a file of another kind is refused now."""
    archive = SafeZip(data, NAMES[content_type])
    needed = {DOCX: "word/document.xml", PPTX: "ppt/presentation.xml", XLSX: "xl/workbook.xml"}
    needed |= {ODT: "content.xml", EPUB: "META-INF/container.xml"}
    if not archive.has(needed[content_type]):
        raise ExtractionError(
            f"Could not read the {NAMES[content_type]}: it has no {needed[content_type]} "
            "(is it really this kind of file?)."
        )


# ------------------------------------------------------------------------------------ shared


def _text(el: ET.Element) -> str:
    return "".join(el.itertext())


def _clean(text: str) -> str:
    return " ".join(text.split())


def _table(rows: list[list[str]]) -> str:
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    lines = [
        "| " + " | ".join(_clean(c).replace("|", "\\|") for c in r + [""] * (width - len(r))) + " |"
        for r in rows
    ]
    lines.insert(1, "| " + " | ".join(["---"] * width) + " |")
    return "\n".join(lines)


_ITEM = re.compile(r"^ *- ")


def join_blocks(blocks: Iterator[str] | list[str]) -> str:
    """Blocks separated by blank lines, consecutive list items by one line break (one list)."""
    out: list[str] = []
    for block in blocks:
        if not block:
            continue
        if out and _ITEM.match(block) and _ITEM.match(out[-1].rsplit("\n", 1)[-1]):
            out[-1] += "\n" + block
        else:
            out.append(block)
    return "\n\n".join(out)


def _rels(archive: SafeZip, part: str) -> dict[str, str]:
    """A part's relationships (``r:id`` → target path in the archive)."""
    folder, name = posixpath.split(part)
    rels = posixpath.join(folder, "_rels", name + ".rels")
    if not archive.has(rels):
        return {}
    out: dict[str, str] = {}
    for rel in archive.xml(rels).iter("Relationship"):
        target = rel.get("Target", "")
        if rel.get("TargetMode") == "External" or not target:
            continue
        path = (
            target.lstrip("/")
            if target.startswith("/")
            else posixpath.normpath(posixpath.join(folder, target))
        )
        out[rel.get("Id", "")] = path
    return out


# ------------------------------------------------------------------------------------ .docx

_HEADING_NAME = re.compile(r"^(?:heading|titre|überschrift|titolo|encabezado|kop)\s*(\d)$", re.IGNORECASE)


def _docx_styles(archive: SafeZip) -> dict[str, int]:
    """Style id → heading level, from the style's name (``heading 2``, ``Title``) or outline level."""
    if not archive.has("word/styles.xml"):
        return {}
    levels: dict[str, int] = {}
    for style in archive.xml("word/styles.xml").iter("style"):
        sid = style.get("styleId", "")
        name_el = style.find("name")
        name = (name_el.get("val", "") if name_el is not None else "").strip()
        outline = style.find("pPr/outlineLvl")
        if name.lower() == "title":
            levels[sid] = 1
        elif m := _HEADING_NAME.match(name):
            levels[sid] = min(int(m.group(1)), 6)
        elif outline is not None and outline.get("val", "").isdigit() and int(outline.get("val", "9")) < 6:
            levels[sid] = int(outline.get("val", "0")) + 1
    return levels


def _docx_runs(p: ET.Element) -> str:
    out: list[str] = []
    for el in p.iter():
        if el.tag == "t":  # deleted text (``w:delText``) is left out
            out.append(el.text or "")
        elif el.tag == "tab":
            out.append("\t")
        elif el.tag in ("br", "cr"):
            out.append("\n")
    return "".join(out)


def _docx_paragraph(p: ET.Element, styles: dict[str, int]) -> str:
    text = _docx_runs(p).strip()
    if not text:
        return ""
    ppr = p.find("pPr")
    style = ppr.find("pStyle") if ppr is not None else None
    sid = style.get("val", "") if style is not None else ""
    outline = ppr.find("outlineLvl") if ppr is not None else None
    level = styles.get(sid) or (
        int(outline.get("val", "9")) + 1 if outline is not None and outline.get("val", "").isdigit() else 0
    )
    if sid in styles or (level and level <= 6):
        return "#" * min(level, 6) + " " + _clean(text)
    num = ppr.find("numPr") if ppr is not None else None
    if num is not None or sid.lower().startswith("list"):
        ilvl = num.find("ilvl") if num is not None else None
        depth = int(ilvl.get("val", "0")) if ilvl is not None and ilvl.get("val", "").isdigit() else 0
        return "  " * min(depth, 8) + "- " + _clean(text)
    return text


def _docx_blocks(el: ET.Element, styles: dict[str, int], check: Budget) -> Iterator[str]:
    for child in el:
        if child.tag == "p":
            yield _docx_paragraph(child, styles)
        elif child.tag == "tbl":
            check("Word table")
            rows = [
                [" ".join(_docx_runs(p).strip() for p in tc.iter("p")) for tc in tr.findall("tc")]
                for tr in child.iter("tr")
            ]
            yield _table(rows)
        elif child.tag not in ("sectPr", "pPr", "rPr"):
            yield from _docx_blocks(child, styles, check)  # content controls, inserted runs…


def _docx(archive: SafeZip, check: Budget) -> list[str]:
    styles = _docx_styles(archive)
    body = archive.xml("word/document.xml").find("body")
    check("Word document parsed")
    if body is None:
        return []
    return [join_blocks(_docx_blocks(body, styles, check))]


# ------------------------------------------------------------------------------------ .pptx


def _slide_paths(archive: SafeZip) -> list[str]:
    """The slides in presentation order (``p:sldIdLst`` through the relationships)."""
    rels = _rels(archive, "ppt/presentation.xml")
    order = archive.xml("ppt/presentation.xml").find("sldIdLst")
    paths = [rels.get(s.get("id", ""), "") for s in (order if order is not None else [])]
    return [p for p in paths if archive.has(p)]


def _slide(tree: ET.Element, number: int) -> str:
    title, lines = "", []
    for shape in tree.iter():
        if shape.tag == "sp":
            ph = next(shape.iter("ph"), None)
            kind = ph.get("type", "body") if ph is not None else ""
            paragraphs = [_clean(_text(p)) for p in shape.iter("p") if p.tag == "p" and _text(p).strip()]
            if kind in ("title", "ctrTitle") and not title:
                title = " ".join(paragraphs)
                continue
            for p_el in (p for p in shape.iter("p") if _text(p).strip()):
                ppr = p_el.find("pPr")
                lvl = int(ppr.get("lvl", "0")) if ppr is not None and ppr.get("lvl", "").isdigit() else 0
                bullet = kind in ("body", "obj") or (ppr is not None and ppr.find("buChar") is not None)
                lines.append(("  " * min(lvl, 8) + "- " if bullet else "") + _clean(_text(p_el)))
        elif shape.tag == "graphicFrame":
            for tbl in shape.iter("tbl"):
                lines.append(_table([[_text(tc) for tc in tr.findall("tc")] for tr in tbl.iter("tr")]))
    heading = f"## Slide {number}" + (f": {title}" if title else "")
    return join_blocks([heading, *lines]) if lines or title else ""


def _pptx(archive: SafeZip, check: Budget) -> list[str]:
    pages = []
    for number, path in enumerate(_slide_paths(archive), start=1):
        check(f"slide {number}")
        pages.append(_slide(archive.xml(path), number))
    return pages


# ------------------------------------------------------------------------------------ .xlsx

_CELL_REF = re.compile(r"^([A-Z]{1,3})\d+$")


def _column(ref: str) -> int | None:
    m = _CELL_REF.match(ref)
    if m is None:
        return None
    n = 0
    for ch in m.group(1):
        n = n * 26 + ord(ch) - 64
    return n - 1


MAX_SHEET_COLUMNS = 256  # wider rows are cut (a stray cell at XFD1 would make every row 16,384 wide)


def _xlsx_cell(cell: ET.Element, shared: list[str]) -> str:
    kind = cell.get("t", "n")
    if kind == "inlineStr":
        inline = cell.find("is")
        return _text(inline) if inline is not None else ""
    value = cell.findtext("v") or ""
    if kind == "s":
        return shared[int(value)] if value.isdigit() and int(value) < len(shared) else ""
    if kind == "b":
        return "TRUE" if value == "1" else "FALSE"
    return value


def _xlsx_sheet(tree: ET.Element, name: str, shared: list[str]) -> str:
    rows: list[list[str]] = []
    for row in tree.iter("row"):
        cells: list[str] = []
        for cell in row.findall("c"):
            col = _column(cell.get("r", ""))
            col = len(cells) if col is None else col
            if col >= MAX_SHEET_COLUMNS:
                continue
            cells += [""] * (col - len(cells))
            cells.append(_xlsx_cell(cell, shared))
        rows.append(cells)
    table = _table(rows)
    return f"## {name}\n\n{table}" if table else ""


def _xlsx(archive: SafeZip, check: Budget) -> list[str]:
    shared: list[str] = []
    if archive.has("xl/sharedStrings.xml"):
        shared = [_text(si) for si in archive.xml("xl/sharedStrings.xml").findall("si")]
    rels = _rels(archive, "xl/workbook.xml")
    sheets = archive.xml("xl/workbook.xml").iter("sheet")
    pages = []
    for sheet in sheets:
        path = rels.get(sheet.get("id", ""), "")
        if archive.has(path):
            check(f"sheet {sheet.get('name', '')}")
            pages.append(_xlsx_sheet(archive.xml(path), sheet.get("name", "Sheet"), shared))
    return pages


# ------------------------------------------------------------------------------------ .odt


def _odf_inline(el: ET.Element) -> str:
    out = [el.text or ""]
    for child in el:
        if child.tag == "s":
            c = child.get("c", "1")
            out.append(" " * min(int(c) if c.isdigit() else 1, 100))
        elif child.tag == "tab":
            out.append("\t")
        elif child.tag == "line-break":
            out.append("\n")
        elif child.tag not in ("note-citation", "annotation"):
            out.append(_odf_inline(child))
        out.append(child.tail or "")
    return "".join(out)


def _odf_blocks(el: ET.Element, check: Budget, depth: int = -1) -> Iterator[str]:
    for child in el:
        if child.tag == "h":
            level = child.get("outline-level", "1")
            yield "#" * min(int(level) if level.isdigit() else 1, 6) + " " + _clean(_odf_inline(child))
        elif child.tag == "p":
            text = _odf_inline(child).strip()
            yield ("  " * depth + "- " + _clean(text)) if depth >= 0 and text else text
        elif child.tag == "list":
            yield from _odf_blocks(child, check, min(depth + 1, 8))
        elif child.tag == "list-item":
            yield from _odf_blocks(child, check, max(depth, 0))
        elif child.tag == "table":
            check("OpenDocument table")
            rows = [
                [" ".join(_odf_inline(p) for p in cell.iter("p")) for cell in row.findall("table-cell")]
                for row in child.iter("table-row")
            ]
            yield _table(rows)
        elif child.tag not in ("sequence-decls", "variable-decls", "tracked-changes", "forms"):
            yield from _odf_blocks(child, check, depth)


def _odt(archive: SafeZip, check: Budget) -> list[str]:
    root = archive.xml("content.xml")
    check("OpenDocument parsed")
    body = root.find("body/text")
    if body is None:
        return []
    return [join_blocks(_odf_blocks(body, check))]


# ------------------------------------------------------------------------------------ .epub


def _epub_chapters(archive: SafeZip) -> list[str]:
    """The spine's XHTML parts, in reading order."""
    rootfile = next(archive.xml("META-INF/container.xml").iter("rootfile"), None)
    opf = rootfile.get("full-path", "") if rootfile is not None else ""
    if not archive.has(opf):
        raise ExtractionError("Could not read the EPUB e-book: its package file (.opf) is missing.")
    package = archive.xml(opf)
    folder = posixpath.dirname(opf)
    items = {
        item.get("id", ""): posixpath.normpath(posixpath.join(folder, unquote(item.get("href", ""))))
        for item in package.iter("item")
    }
    return [
        items[i]
        for ref in package.iter("itemref")
        if (i := ref.get("idref", "")) in items and archive.has(items[i])
    ]


def _epub(archive: SafeZip, check: Budget, html_markdown: Callable[[str], str]) -> list[str]:
    pages = []
    for number, path in enumerate(_epub_chapters(archive), start=1):
        check(f"chapter {number}")
        pages.append(html_markdown(archive.read(path).decode("utf-8", errors="replace")))
    return pages
