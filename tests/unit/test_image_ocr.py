"""Issue 45 item 2, pictures: a PNG, JPEG, TIFF or WebP is read by OCR (Tesseract locally) into a
READY document whose text keeps the picture's lines and paragraphs and answers questions citing it;
an image bomb (a small file declaring a huge bitmap) is refused from its header before any decoder
sees it; where OCR cannot run the upload gets a 400 saying how to enable it, nothing stored."""

from __future__ import annotations

import base64
import shutil

import pytest
from ragchat.adapters.local.tesseract import TESSERACT_MISSING, TesseractOcr
from ragchat.domain.errors import ExtractionError, ValidationError
from ragchat.domain.extraction import IMAGES_NOT_READ, detect_content_type
from ragchat.domain.images import MAX_IMAGE_PAGES, NO_OCR, check_image, image_info, scanned_unread

from tests.events import json_body
from tests.images import (
    jpeg_header,
    png_header,
    scanned_pdf,
    text_png,
    text_tiff,
    tiff_of_pages,
    webp_lossless_header,
)
from tests.unit.api_support import make_api

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="the tesseract program is not installed (make test installs it as root: make ensure-tesseract)",
)

HARBOUR = [
    "Harbour notes",
    "",
    "The harbour office opens at seven in the morning.",
    "Ferries to the island leave every hour.",
    "",
    "Parking at the pier costs four euros a day.",
]


def post(api, name: str, data: bytes, ctype: str = "application/octet-stream") -> dict:  # type: ignore[no-untyped-def]
    return api.call(
        "POST", "/documents", query={"filename": name}, raw_body=data, headers={"Content-Type": ctype}
    )


# ------------------------------------------------------------------------------- the header


@pytest.mark.parametrize(
    ("data", "ctype", "size"),
    [
        (png_header(1234, 567), "image/png", (1234, 567)),
        (jpeg_header(640, 480), "image/jpeg", (640, 480)),
        (webp_lossless_header(3000, 2000), "image/webp", (3000, 2000)),
        (tiff_of_pages(3, 40, 30), "image/tiff", (40, 30)),
    ],
)
def test_the_header_gives_the_type_and_size_whatever_the_name(data: bytes, ctype: str, size: tuple) -> None:
    info = image_info(data)
    assert info.content_type == ctype
    assert info.frames[0] == size


def test_an_image_bomb_is_refused_from_its_header_with_the_numbers() -> None:
    bomb = png_header(30_000, 30_000)  # ~100 bytes declaring 900 megapixels (3.6 GB decoded)
    assert len(bomb) < 200
    with pytest.raises(ExtractionError) as err:
        check_image(bomb, 50_000_000)
    assert err.value.message.startswith(
        "The image is 30000 × 30000 pixels (900.0 megapixels): "
        "at most 50.0 megapixels are read, so that a small file cannot decode to a huge picture."
    )
    for other in (jpeg_header(20_000, 20_000), webp_lossless_header(16_000, 16_000)):
        with pytest.raises(ExtractionError, match="megapixels are read"):
            check_image(other, 50_000_000)
    assert check_image(png_header(5000, 5000), 50_000_000).pixels == 25_000_000


def test_a_tiff_of_too_many_pages_or_a_looping_directory_is_refused() -> None:
    with pytest.raises(ExtractionError, match=f"more than {MAX_IMAGE_PAGES} pages"):
        check_image(tiff_of_pages(MAX_IMAGE_PAGES + 1), 50_000_000)
    assert len(check_image(tiff_of_pages(MAX_IMAGE_PAGES), 50_000_000).frames) == MAX_IMAGE_PAGES
    looping = bytearray(tiff_of_pages(1))
    looping[-4:] = (8).to_bytes(4, "little")  # the next directory is the first again
    assert len(image_info(bytes(looping)).frames) == 1


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00",
        jpeg_header(10, 10)[:12],
        b"II*\x00\xff\xff\xff\x00",
        b"RIFF\x00\x00\x00\x00WEBPVP8 ",
    ],
)
def test_a_damaged_or_cut_header_is_a_clear_refusal(data: bytes) -> None:
    with pytest.raises(ExtractionError, match="header is damaged or cut short"):
        image_info(data)
    with pytest.raises(
        ExtractionError, match=r"not a readable PNG, JPEG, TIFF or WebP image \(its first bytes"
    ):
        image_info(b"GIF89a....")


@pytest.mark.parametrize(
    ("filename", "declared", "expected"),
    [
        ("scan.png", None, "image/png"),
        ("photo.JPEG", "application/octet-stream", "image/jpeg"),
        ("fax.tif", "text/plain", "image/tiff"),
        ("shot.webp", None, "image/webp"),
        (None, "image/jpg", "image/jpeg"),
    ],
)
def test_picture_types_are_detected(filename: str | None, declared: str | None, expected: str) -> None:
    assert detect_content_type(filename, declared) == expected


@pytest.mark.parametrize(
    ("filename", "declared"), [("anim.gif", None), ("photo.heic", None), (None, "image/gif")]
)
def test_other_picture_formats_are_refused_saying_which_are_read(
    filename: str | None, declared: str | None
) -> None:
    with pytest.raises(ValidationError) as err:
        detect_content_type(filename, declared)
    assert err.value.message == IMAGES_NOT_READ
    assert "OCR reads .png, .jpg, .tif and .webp pictures" in IMAGES_NOT_READ


# ---------------------------------------------------------------------- through the API


@needs_tesseract
def test_a_picture_of_text_becomes_a_document_that_answers_citing_it() -> None:
    api = make_api()
    res = post(api, "harbour.png", text_png(HARBOUR), "image/png")
    assert res["statusCode"] == 202, res["body"]
    doc_id = json_body(res)["documentId"]
    doc = json_body(api.call("GET", f"/documents/{doc_id}", query={"include": "body"}))
    assert doc["status"] == "READY", doc
    assert doc["title"] == "harbour.png"
    assert doc["textFrom"] == "ocr"
    # the picture's lines stay lines, its paragraphs are kept apart (what the citation panel shows)
    assert (
        "The harbour office opens at seven in the morning.\nFerries to the island leave every hour."
        in doc["body"]
    )
    assert "leave every hour.\n\nParking at the pier" in doc["body"]
    notes = json_body(api.call("GET", "/notes", query={"documentId": doc_id}))["items"]
    assert notes and all(n["metadata"].get("ocr") == "tesseract" for n in notes)
    body = json_body(api.call("GET", "/", query={"text": "When does the harbour office open?"}))
    assert "seven in the morning" in body["answer"]
    assert body["sources"][0]["title"] == "harbour.png"


@needs_tesseract
def test_each_page_of_a_tiff_is_a_page_of_the_document() -> None:
    api = make_api()
    tiff = text_tiff([["The first page is about apples."], ["The second page is about pears."]], width=1200)
    res = post(api, "fax.tiff", tiff)
    assert res["statusCode"] == 202, res["body"]
    doc_id = json_body(res)["documentId"]
    assert json_body(api.call("GET", f"/documents/{doc_id}"))["status"] == "READY"
    notes = json_body(api.call("GET", "/notes", query={"documentId": doc_id}))["items"]
    pages = {n["metadata"]["page"]: n["text"] for n in notes}
    assert "apples" in pages[1] and "pears" in pages[2]


@needs_tesseract
def test_a_picture_with_no_text_fails_saying_ocr_found_none() -> None:
    api = make_api()
    res = post(api, "blank.png", text_png([""]), "image/png")
    assert res["statusCode"] == 202, res["body"]
    doc = json_body(api.call("GET", f"/documents/{json_body(res)['documentId']}"))
    assert doc["status"] == "FAILED"
    assert doc["error"].startswith("OCR found no text in the picture.")


def test_an_image_bomb_is_refused_before_anything_is_stored() -> None:
    api = make_api(ocr=TesseractOcr())
    api.container.ocr._missing[:] = [None]  # (installed or not: the header is what refuses it)
    res = post(api, "bomb.png", png_header(30_000, 30_000), "image/png")
    assert res["statusCode"] == 400
    assert "at most 50.0 megapixels are read" in json_body(res)["error"]
    assert api.launcher.started == [] and json_body(api.call("GET", "/documents"))["items"] == []


def test_a_picture_over_the_size_limit_is_refused_with_413() -> None:
    api = make_api()
    res = post(api, "big.png", png_header(100, 100) + b"\x00" * 21_500_000, "image/png")
    assert res["statusCode"] == 413
    assert json_body(res)["error"] == "The file is too large (21.5 MB): the limit is 21.0 MB for a picture."
    assert api.launcher.started == []


def test_without_tesseract_a_picture_gets_a_400_saying_how_to_install_it() -> None:
    api = make_api(ocr=TesseractOcr(binary="tesseract-not-installed-here"))
    res = post(api, "harbour.png", png_header(100, 100), "image/png")
    assert res["statusCode"] == 400
    error = json_body(res)["error"]
    assert error == TESSERACT_MISSING
    assert "sudo apt-get install tesseract-ocr" in error and "brew install tesseract" in error
    assert api.launcher.started == [] and json_body(api.call("GET", "/documents"))["items"] == []


@needs_tesseract
def test_a_missing_language_names_its_package() -> None:
    reason = TesseractOcr(languages="eng+xyz").missing()
    assert reason is not None
    assert "language data for xyz, which is not installed (OCR=eng+xyz): install tesseract-ocr-xyz" in reason


def test_with_ocr_off_a_picture_gets_a_400_saying_so() -> None:
    api = make_api({"OCR": "off"})
    res = post(api, "harbour.png", png_header(100, 100), "image/png")
    assert res["statusCode"] == 400
    assert json_body(res)["error"] == NO_OCR
    assert api.launcher.started == []


# ------------------------------------------------------------------------------ scanned PDFs


@needs_tesseract
def test_a_scanned_pdf_is_read_page_by_page_and_answers_citing_its_page() -> None:
    api = make_api()
    pdf = scanned_pdf([["The first scanned page is about apples."], ["The orchard sells pears on Fridays."]])
    res = post(api, "scan.pdf", pdf, "application/pdf")
    assert res["statusCode"] == 202, res["body"]
    doc_id = json_body(res)["documentId"]
    doc = json_body(api.call("GET", f"/documents/{doc_id}", query={"include": "body"}))
    assert doc["status"] == "READY", doc
    assert "The orchard sells pears on Fridays." in doc["body"]
    notes = json_body(api.call("GET", "/notes", query={"documentId": doc_id}))["items"]
    assert sorted((n["metadata"]["page"], n["metadata"]["ocr"]) for n in notes) == [
        (1, "tesseract"),
        (2, "tesseract"),
    ]
    body = json_body(api.call("GET", "/", query={"text": "When does the orchard sell pears?"}))
    assert "Fridays" in body["answer"]
    assert body["sources"][0]["title"] == "scan.pdf" and body["sources"][0]["page"] == 2


def test_where_ocr_cannot_run_a_scanned_pdf_is_refused_saying_why() -> None:
    pdf = scanned_pdf([["A page with no text layer."]], width=400)
    api = make_api({"OCR": "off"})
    res = post(api, "scan.pdf", pdf, "application/pdf")
    assert res["statusCode"] == 400
    assert json_body(res)["error"] == scanned_unread(NO_OCR)
    assert json_body(res)["error"].startswith("The PDF has no extractable text: it may be scanned pages")
    missing = make_api(ocr=TesseractOcr(binary="tesseract-not-installed-here"))
    res = post(missing, "scan.pdf", pdf, "application/pdf")
    assert res["statusCode"] == 400 and json_body(res)["error"] == scanned_unread(TESSERACT_MISSING)
    assert api.launcher.started == [] and missing.launcher.started == []


class SlowOcr:
    """An engine that takes ``seconds`` of the (fake) wall clock per page and reads "Page text"."""

    engine = "fake"

    def __init__(self, clock: list[float], seconds: float) -> None:
        self.clock, self.seconds, self.calls = clock, seconds, 0

    def missing(self) -> None:
        return None

    def read(self, image: bytes, content_type: str, seconds: float) -> list[str]:
        self.calls += 1
        self.clock[0] += self.seconds
        return [f"Page text {self.calls}."]


def test_the_engines_time_counts_against_the_documents_cpu_budget() -> None:
    """Tesseract works in its own process, which this thread's CPU clock does not see: each page's
    time is charged to the budget, so a long scan stops at PARSE_CPU_SECONDS instead of reading on."""
    from ragchat.domain.extraction import extract
    from ragchat.domain.read_budget import CpuBudget

    scan = scanned_pdf([[f"page {n}"] for n in range(5)], width=300)
    wall = [0.0]
    engine = SlowOcr(wall, seconds=25)
    budget = CpuBudget(60, clock=lambda: 0.0, wall=lambda: wall[0])
    with pytest.raises(ExtractionError, match=r"^The file took too long to read: the limit is 60 s of CPU"):
        extract(scan, content_type="application/pdf", budget=budget, ocr=engine)
    assert engine.calls == 3  # 25 + 25 + 25 s: over 60 after the third page, the fourth is never read
    wall[0] = 0.0
    two = CpuBudget(60, clock=lambda: 0.0, wall=lambda: wall[0])
    pages = extract(
        scanned_pdf([["a"], ["b"]], width=300), content_type="application/pdf", budget=two, ocr=engine
    )
    assert [meta["page"] for _, meta in pages] == [1, 2]


@needs_tesseract
def test_the_viewer_gets_the_picture_itself_and_a_tiff_is_refused_saying_why() -> None:
    api = make_api()
    png = text_png(HARBOUR, width=900)
    doc_id = json_body(post(api, "harbour.png", png, "image/png"))["documentId"]
    shown = json_body(api.call("GET", f"/documents/{doc_id}/pages/1"))
    assert shown["image"] == "data:image/png;base64," + base64.b64encode(png).decode()
    assert (shown["pages"], shown["width"], shown["height"]) == (1, *image_info(png).frames[0])
    assert 895 <= shown["width"] <= 905
    assert api.call("GET", f"/documents/{doc_id}/pages/2")["statusCode"] == 404
    tiff = text_tiff([["A fax about apples."]], width=600)
    tiff_id = json_body(post(api, "fax.tif", tiff))["documentId"]
    res = api.call("GET", f"/documents/{tiff_id}/pages/1")
    assert res["statusCode"] == 400
    assert (
        json_body(res)["error"]
        == "A TIFF picture cannot be shown in a browser: its text, read by OCR, is below"
    )
