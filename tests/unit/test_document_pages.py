"""The document viewer's PDF pages (issue 33: "a document viewer (text, and PDF pages)"): GET
/documents/{id}/pages/{n} renders the stored PDF's page as a PNG for members of the document's
workspace only; a page past the end, a document that is no PDF and a page that is no number are
refused with a clear 4xx."""

from __future__ import annotations

import base64
import struct
import subprocess
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

from ragchat.domain.page_images import MAX_PNG_BYTES, PAGE_WIDTH, PageImage, find_passages

from tests.events import json_body
from tests.pdfs import make_pdf
from tests.unit.api_support import make_api

ROOT = Path(__file__).resolve().parents[2]
HARBOUR = make_pdf(["Harbour guide\nThe fuel dock opens at 7 every morning.", ""])


def pixels(data_url: str) -> tuple[int, int, bytes]:
    """(width, height, the RGB bytes without the row filters) of the PNG in a data URL."""
    assert data_url.startswith("data:image/png;base64,")
    data = base64.b64decode(data_url.split(",", 1)[1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    at, idat = 8, b""
    while at < len(data):
        (size,) = struct.unpack(">I", data[at : at + 4])
        if data[at + 4 : at + 8] == b"IDAT":
            idat += data[at + 8 : at + 8 + size]
        at += 12 + size
    raw = zlib.decompress(idat)
    row = 1 + width * 3
    return width, height, b"".join(raw[y * row + 1 : (y + 1) * row] for y in range(height))


def upload(api, data: bytes, name: str, **query: str) -> str:  # type: ignore[no-untyped-def]
    res = api.call(
        "POST",
        "/documents",
        query={"filename": name, **query},
        raw_body=data,
        headers={"Content-Type": "application/octet-stream"},
    )
    assert res["statusCode"] == 202, res
    doc_id: str = json_body(res)["documentId"]
    assert json_body(api.call("GET", f"/documents/{doc_id}"))["status"] == "READY"
    return doc_id


def test_a_pdf_page_is_shown_as_the_reader_sees_it() -> None:
    api = make_api()
    doc_id = upload(api, HARBOUR, "harbour.pdf")
    got = json_body(api.call("GET", f"/documents/{doc_id}/pages/1"))
    assert (got["documentId"], got["page"], got["pages"]) == (doc_id, 1, 2)
    width, height, rgb = pixels(got["image"])
    assert (width, height) == (got["width"], got["height"])
    assert 890 <= width <= 901 and abs(height / width - 792 / 612) < 0.01  # US Letter, 900 px across
    assert min(rgb) < 100  # the text is drawn: dark pixels on the page
    blank = json_body(api.call("GET", f"/documents/{doc_id}/pages/2"))
    assert set(pixels(blank["image"])[2]) == {255}  # the blank second page is white


def test_pages_that_do_not_exist_and_documents_without_pages_are_refused() -> None:
    api = make_api()
    doc_id = upload(api, HARBOUR, "harbour.pdf")
    past = api.call("GET", f"/documents/{doc_id}/pages/3")
    assert past["statusCode"] == 404
    assert json_body(past)["error"] == "Page 3 not found: the document has 2 page(s)"
    for bad in ("0", "one", "-1", "1.5"):
        res = api.call("GET", f"/documents/{doc_id}/pages/{bad}")
        assert res["statusCode"] == 400, bad
        assert "page must be a positive integer" in json_body(res)["error"]
    text_id = upload(api, b"The fuel dock opens at 7.", "dock.txt")
    res = api.call("GET", f"/documents/{text_id}/pages/1")
    assert res["statusCode"] == 400
    assert json_body(res)["error"] == "This document is not a PDF: it has no pages to show (read its text)"
    assert api.call("GET", "/documents/nope/pages/1")["statusCode"] == 404


def test_a_shared_pdf_shows_its_pages_to_members_only() -> None:
    api = make_api()
    ws = json_body(api.call("POST", "/workspaces", body={"name": "Harbour team"}))["id"]
    assert api.call("PUT", f"/workspaces/{ws}/members/bob", body={"role": "viewer"})["statusCode"] == 200
    doc_id = upload(api, HARBOUR, "harbour.pdf", workspace=ws)
    member = api.call("GET", f"/documents/{doc_id}/pages/1", principal="bob")
    assert member["statusCode"] == 200 and json_body(member)["pages"] == 2
    stranger = api.call("GET", f"/documents/{doc_id}/pages/1", principal="mallory")
    assert stranger["statusCode"] == 404
    assert "image" not in json_body(stranger)


class Sized:
    """A renderer whose full-width image is too large for a Lambda response (a full-page photo)."""

    def __init__(self) -> None:
        self.widths: list[int] = []

    def render(self, pdf: bytes, page: int, width: int, find: Sequence[str] = ()) -> PageImage:
        self.widths.append(width)
        size = MAX_PNG_BYTES + 1 if width == PAGE_WIDTH else 1000
        return PageImage(page=page, pages=1, width=width, height=width, png=b"\0" * size)


def test_a_page_too_large_for_a_response_is_rendered_smaller() -> None:
    api = make_api()
    doc_id = upload(api, HARBOUR, "harbour.pdf")
    renderer = Sized()
    api.container.document_service.pages = renderer
    shown = api.container.document_service.page_image("alice", doc_id, 1)
    assert renderer.widths == [PAGE_WIDTH, PAGE_WIDTH // 2] and shown.width == PAGE_WIDTH // 2


def test_pdfium_is_loaded_only_when_a_page_is_shown() -> None:
    """pypdfium2 (a 9 MB native library) is imported by the request that renders a page, not by the
    app's start or any other request."""
    script = (
        "import sys\n"
        "from tests.unit.api_support import make_api\n"
        "api = make_api()\n"
        "api.call('GET', '/documents')\n"
        "print('pypdfium2' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT
    )
    assert out.stdout.strip().splitlines()[-1] == "False"


# ------------------------------------------------------------------ the cited passage on the image
GUIDE = make_pdf(
    [
        "The great telescope of the Quillon observatory\n"  # line 1: baseline 720 pt from the bottom
        "was ground by the optician Mara Venn in 1911.\n"  # line 2: 706
        "Visitors enter through the west gate."  # line 3: 692
    ]
)


def baseline(line: int) -> float:
    """Line ``line``'s baseline as a fraction of the page image from its top (make_pdf: 14 pt apart)."""
    return (792 - (720 - 14 * (line - 1))) / 792


def dark_in(image: str, box: dict[str, float]) -> int:
    """How many dark pixels the image has inside ``box`` (fractions of the image)."""
    width, height, rgb = pixels(image)
    x0, x1 = int(box["x"] * width), int((box["x"] + box["width"]) * width)
    y0, y1 = int(box["y"] * height), int((box["y"] + box["height"]) * height)
    return sum(1 for y in range(y0, y1) for x in range(x0, x1) if rgb[(y * width + x) * 3] < 128)


def test_the_cited_sentence_is_boxed_where_it_stands_on_the_page_image() -> None:
    """Issue 45: the citation panel marked the cited sentence in the page's text only, not on its
    image. ``find`` (the sentences the viewer marks) comes back as boxes over the page's own drawn text."""
    api = make_api()
    doc_id = upload(api, GUIDE, "guide.pdf")
    find = "was ground by the optician Mara Venn in 1911."
    got = json_body(api.call("GET", f"/documents/{doc_id}/pages/1", query={"find": find}))
    (box,) = got["marks"]
    assert box["y"] < baseline(2) < box["y"] + box["height"]  # on line 2 ...
    assert box["y"] > baseline(1)  # ... below line 1's baseline
    assert box["y"] + box["height"] < baseline(3) - 0.005  # ... and above line 3's letters
    assert abs(box["x"] - 72 / 612) < 0.005 and 0.3 < box["width"] < 0.5  # from the margin, the line's length
    assert dark_in(got["image"], box) > 200  # the box lies over drawn text

    # a sentence the viewer shows on one line though the PDF wraps it: a box on each line; words
    # compared without case or punctuation
    wrapped = "THE GREAT TELESCOPE of the Quillon observatory — was ground by the optician Mara Venn in 1911"
    two = json_body(api.call("GET", f"/documents/{doc_id}/pages/1", query={"find": wrapped}))["marks"]
    assert len(two) == 2 and two[0]["y"] < baseline(1) < two[0]["y"] + two[0]["height"]
    assert two[1] == box
    # one passage per line; one not on the page, or none asked: no box
    both = "Visitors enter through the west gate.\nThe tide tables are on page nine."
    (gate,) = json_body(api.call("GET", f"/documents/{doc_id}/pages/1", query={"find": both}))["marks"]
    assert gate["y"] < baseline(3) < gate["y"] + gate["height"]
    assert json_body(api.call("GET", f"/documents/{doc_id}/pages/1"))["marks"] == []
    too_many = api.call(
        "GET", f"/documents/{doc_id}/pages/1", query={"find": "\n".join("abc" for _ in range(9))}
    )
    assert too_many["statusCode"] == 400
    assert json_body(too_many)["error"] == "find: at most 8 passages, one per line"


def test_passages_are_found_by_their_words_or_their_longest_piece() -> None:
    text = "Rent is due monthly.\r\nThe \ufb01sh market opens at\r\nnine; it closes at noon."
    (span,) = find_passages(text, ["The fish market opens at nine"])  # a ligature, a line break
    assert text[span[0] : span[1] + 1] == "The \ufb01sh market opens at\r\nnine"
    # not there whole (the viewer's sentence ran on): its longest piece on the page is
    (piece,) = find_passages(text, ["Moorings are free: it closes at noon."])
    assert text[piece[0] : piece[1] + 1] == "it closes at noon"
    assert find_passages(text, ["market open"]) == []  # whole words only


def turned(rotate: int) -> bytes:
    """One page turned by ``rotate`` degrees with a media box that does not start at 0, 0."""
    from tests.pdfs import pdf_of

    stream = (
        b"BT /F1 12 Tf 14 TL 72 720 Td (The fuel dock opens at seven.) Tj T* (Swimming is forbidden.) Tj ET"
    )
    return pdf_of(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [50 100 612 792] /Rotate %d " % rotate
            + b"/Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        ]
    )


def test_the_box_follows_the_page_as_drawn_turned_and_cropped() -> None:
    """The boxes are placed the way PDFium draws the page (its rotation, its media box's origin)."""
    from ragchat.adapters.local.pdf_pages import PdfiumPages

    for rotate in (0, 90, 180, 270):
        shown = PdfiumPages().render(turned(rotate), 1, PAGE_WIDTH, ["Swimming is forbidden."])
        (m,) = shown.marks
        box = {"x": m.x, "y": m.y, "width": m.width, "height": m.height}
        image = "data:image/png;base64," + base64.b64encode(shown.png).decode("ascii")
        pixels_in = m.width * shown.width * m.height * shown.height
        assert dark_in(image, box) > 0.12 * pixels_in, rotate  # over the drawn words (~22% ink)
        assert (m.height > m.width) == (rotate in (90, 270)), rotate  # a turned line stands upright
