"""Real Office, e-book and RTF files built in the tests (the parts and namespaces the writers use:
Word, PowerPoint, Excel, LibreOffice, EPUB 3), plus hostile ones (zip and XML bombs)."""

from __future__ import annotations

import io
import zipfile
from xml.sax.saxutils import escape

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
R = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
A = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
P = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
RELS = 'xmlns="http://schemas.openxmlformats.org/package/2006/relationships"'
XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'


def zipped(parts: dict[str, str | bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in parts.items():
            z.writestr(name, data)
    return buf.getvalue()


def _rels(targets: dict[str, str]) -> str:
    rows = "".join(f'<Relationship Id="{i}" Type="x" Target="{t}"/>' for i, t in targets.items())
    return f"{XML}<Relationships {RELS}>{rows}</Relationships>"


# ------------------------------------------------------------------------------ Word
def w_para(text: str, style: str | None = None, numbered: int | None = None) -> str:
    ppr = ""
    if style or numbered is not None:
        num = (
            f'<w:numPr><w:ilvl w:val="{numbered}"/><w:numId w:val="1"/></w:numPr>'
            if numbered is not None
            else ""
        )
        ppr = "<w:pPr>" + (f'<w:pStyle w:val="{style}"/>' if style else "") + num + "</w:pPr>"
    return f'<w:p>{ppr}<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>'


def w_table(rows: list[list[str]]) -> str:
    cells = lambda row: "".join(f"<w:tc>{w_para(c)}</w:tc>" for c in row)  # noqa: E731
    return "<w:tbl>" + "".join(f"<w:tr>{cells(r)}</w:tr>" for r in rows) + "</w:tbl>"


def docx(body: str, *, document: str | None = None) -> bytes:
    styles = (
        f"{XML}<w:styles {W}>"
        '<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>'
        '<w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/></w:style>'
        '<w:style w:type="paragraph" w:styleId="Titel"><w:name w:val="Title"/></w:style></w:styles>'
    )
    return zipped(
        {
            "[Content_Types].xml": f"{XML}<Types/>",
            "word/document.xml": document
            or f"{XML}<w:document {W}><w:body>{body}<w:sectPr/></w:body></w:document>",
            "word/styles.xml": styles,
        }
    )


def sample_docx() -> bytes:
    return docx(
        w_para("Office hours", "Titel")
        + w_para("The help desk opens at nine on weekdays.")
        + w_para("Where to find us", "Heading2")
        + w_para("Room 4.12, second floor", numbered=0)
        + w_para("Bring your badge", numbered=1)
        + w_table([["Day", "Opens"], ["Monday", "09:00"], ["Saturday", "closed"]])
    )


# ------------------------------------------------------------------------------ PowerPoint
def _shape(kind: str | None, paragraphs: list[str]) -> str:
    ph = (
        f'<p:nvSpPr><p:cNvPr id="1" name="s"/><p:cNvSpPr/><p:nvPr><p:ph type="{kind}"/></p:nvPr></p:nvSpPr>'
        if kind
        else ""
    )
    paras = "".join(f"<a:p><a:r><a:t>{escape(t)}</a:t></a:r></a:p>" for t in paragraphs)
    return f"<p:sp>{ph}<p:txBody>{paras}</p:txBody></p:sp>"


def pptx(slides: list[tuple[str, list[str]]]) -> bytes:
    parts: dict[str, str | bytes] = {"[Content_Types].xml": f"{XML}<Types/>"}
    ids = "".join(f'<p:sldId id="{256 + n}" r:id="rId{n}"/>' for n in range(len(slides)))
    parts["ppt/presentation.xml"] = (
        f"{XML}<p:presentation {P} {R}><p:sldIdLst>{ids}</p:sldIdLst></p:presentation>"
    )
    # stored in reverse file order: the presentation's order wins over the file names
    parts["ppt/_rels/presentation.xml.rels"] = _rels(
        {f"rId{n}": f"slides/slide{len(slides) - n}.xml" for n in range(len(slides))}
    )
    for n, (title, bullets) in enumerate(slides):
        tree = _shape("title", [title]) + _shape("body", bullets)
        parts[f"ppt/slides/slide{len(slides) - n}.xml"] = (
            f"{XML}<p:sld {P} {A}><p:cSld><p:spTree>{tree}</p:spTree></p:cSld></p:sld>"
        )
    return zipped(parts)


# ------------------------------------------------------------------------------ Excel
def xlsx(sheets: dict[str, list[list[str | int]]]) -> bytes:
    strings: list[str] = []
    parts: dict[str, str | bytes] = {"[Content_Types].xml": f"{XML}<Types/>"}
    listed = "".join(
        f'<sheet name="{escape(name)}" sheetId="{n + 1}" r:id="rId{n + 1}"/>' for n, name in enumerate(sheets)
    )
    parts["xl/workbook.xml"] = f"{XML}<workbook {S} {R}><sheets>{listed}</sheets></workbook>"
    parts["xl/_rels/workbook.xml.rels"] = _rels(
        {f"rId{n + 1}": f"worksheets/sheet{n + 1}.xml" for n in range(len(sheets))}
    )
    for n, rows in enumerate(sheets.values()):
        xml_rows = []
        for r, row in enumerate(rows, start=1):
            cells = []
            for c, value in enumerate(row):
                ref = f"{chr(65 + c)}{r}"
                if isinstance(value, int):
                    cells.append(f'<c r="{ref}"><v>{value}</v></c>')
                elif value:
                    strings.append(value)
                    cells.append(f'<c r="{ref}" t="s"><v>{len(strings) - 1}</v></c>')
            xml_rows.append(f'<row r="{r}">{"".join(cells)}</row>')
        parts[f"xl/worksheets/sheet{n + 1}.xml"] = (
            f"{XML}<worksheet {S}><sheetData>{''.join(xml_rows)}</sheetData></worksheet>"
        )
    shared = "".join(f"<si><t>{escape(s)}</t></si>" for s in strings)
    parts["xl/sharedStrings.xml"] = f"{XML}<sst {S}>{shared}</sst>"
    return zipped(parts)


# ------------------------------------------------------------------------------ OpenDocument
ODF = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"'
)


def odt(inner: str) -> bytes:
    body = f"<office:body><office:text>{inner}</office:text></office:body>"
    content = f"{XML}<office:document-content {ODF}>{body}</office:document-content>"
    return zipped({"mimetype": "application/vnd.oasis.opendocument.text", "content.xml": content})


def sample_odt() -> bytes:
    return odt(
        '<text:h text:outline-level="1">Parking rules</text:h>'
        '<text:p>Visitors park<text:s text:c="1"/>on level two.</text:p>'
        "<text:list><text:list-item><text:p>Show the ticket</text:p></text:list-item>"
        "<text:list-item><text:p>Pay at the machine</text:p></text:list-item></text:list>"
        "<table:table><table:table-row><table:table-cell><text:p>Hours</text:p></table:table-cell>"
        "<table:table-cell><text:p>Price</text:p></table:table-cell></table:table-row>"
        "<table:table-row><table:table-cell><text:p>1</text:p></table:table-cell>"
        "<table:table-cell><text:p>2 EUR</text:p></table:table-cell></table:table-row></table:table>"
    )


# ------------------------------------------------------------------------------ EPUB
def epub(chapters: list[str]) -> bytes:
    container = (
        f'{XML}<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
        '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>"
    )
    items = "".join(
        f'<item id="c{n}" href="text/ch%20{n}.xhtml" media-type="application/xhtml+xml"/>'
        for n in range(len(chapters))
    )
    spine = "".join(f'<itemref idref="c{n}"/>' for n in range(len(chapters)))
    opf = (
        f'{XML}<package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        f"<manifest>{items}</manifest><spine>{spine}</spine></package>"
    )
    parts: dict[str, str | bytes] = {
        "mimetype": "application/epub+zip",
        "META-INF/container.xml": container,
        "OEBPS/content.opf": opf,
    }
    for n, body in enumerate(chapters):
        parts[f"OEBPS/text/ch {n}.xhtml"] = (
            '<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml">'
            f"<head><title>c</title></head><body>{body}</body></html>"
        )
    return zipped(parts)


# ------------------------------------------------------------------------------ RTF
SAMPLE_RTF = (
    rb"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Calibri;}}{\colortbl;\red0\green0\blue0;}"
    rb"{\*\generator Writer}{\info{\title Hidden title}}"
    rb"\pard\outlinelevel0 Caf\'e9 opening times\par"
    rb"\pard The caf\'e9 serves lunch until 14:00 \u8364\'80 5 a meal.\par"
    rb"\pard\ls1{\listtext\'b7\tab}Soup of the day\par"
    rb"\pard\ls1{\listtext\'b7\tab}Sandwiches\par"
    rb"\trowd\pard\intbl Item\cell Price\cell\row"
    rb"\trowd\pard\intbl Tea\cell 2\cell\row"
    rb"\pard Closing words.\par}"
)


# ------------------------------------------------------------------------------ bombs
def zip_bomb(name: str, size: int = 8 * 1024 * 1024, extra: dict[str, str | bytes] | None = None) -> bytes:
    """A part of ``size`` zero bytes: a few hundred KB on the wire."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for n, data in (extra or {}).items():
            z.writestr(n, data)
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as f:
            block = b"\0" * (1024 * 1024)
            for _ in range(size // len(block)):
                f.write(block)
    return buf.getvalue()


def many_entries(n: int = 10_001, extra: dict[str, str | bytes] | None = None) -> bytes:
    parts: dict[str, str | bytes] = dict(extra or {})
    parts.update({f"x/{i}": b"" for i in range(n)})
    return zipped(parts, compression=zipfile.ZIP_STORED)


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
)


def deep_xml(root: str, depth: int = 100_000) -> str:
    return f"{XML}{root}" + "<x>" * depth + "</x>" * depth
