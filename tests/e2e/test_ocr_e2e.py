"""Issue 45 item 2, pictures through every door of ``ragchat serve`` (its parsing child runs
Tesseract under the ``PARSE_*`` limits): the Add page in Chromium (its file input and the viewer's
"Text read by OCR" note), the raw ``POST /documents`` API, a direct upload (``POST /uploads``),
``ragchat ingest --api`` and ``ragchat ingest`` (local). Each picture becomes READY and answers a
question citing it. Each door gets a picture of different text: identical bytes are one document."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from tests.e2e.conftest import TOKEN, Server, run_server
from tests.e2e.test_cli_ingest import needs_model, run
from tests.e2e.test_pages_browser import SIGNED_IN, browser, fresh_page  # noqa: F401 (the fixture)
from tests.images import text_png

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        shutil.which("tesseract") is None,
        reason="the tesseract program is not installed (as root: make ensure-tesseract)",
    ),
]

WAIT_MS = 90_000


def picture(place: str, hour: str) -> bytes:
    return text_png([f"Opening hours of the {place}", "", f"The {place} opens at {hour} in the morning."])


def ask(server: Server, place: str) -> dict[str, Any]:
    answer: dict[str, Any] = server.request("GET", "/?text=" + quote(f"When does the {place} open?")).json()
    return answer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with run_server(tmp_path_factory.mktemp("ragchat-ocr")) as srv:
        yield srv


def test_a_picture_by_the_api_and_by_a_direct_upload(server: Server) -> None:
    res = server.request(
        "POST",
        "/documents?filename=bakery.png",
        data=picture("bakery", "six"),
        headers={"Content-Type": "image/png"},
    )
    assert res.status == 202, res.body
    doc = server.wait_document(res.json()["documentId"])
    assert doc["status"] == "READY", doc
    assert doc["textFrom"] == "ocr"
    answer = ask(server, "bakery")
    assert "six in the morning" in answer["answer"]
    assert answer["sources"][0]["title"] == "bakery.png"

    grant = server.request("POST", "/uploads", body={"filename": "library.png"}).json()
    boundary = "b0undary"
    form = "".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
        for k, v in grant["fields"].items()
    ).encode()
    form += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="library.png"\r\n'
        "Content-Type: image/png\r\n\r\n"
    ).encode()
    form += picture("library", "nine") + f"\r\n--{boundary}--\r\n".encode()
    direct = server.request(
        "POST",
        urlsplit(grant["url"]).path,
        data=form,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert direct.status in (201, 202, 204), direct.body
    assert server.wait_document(grant["documentId"])["status"] == "READY"
    answer = ask(server, "library")
    assert "nine in the morning" in answer["answer"]
    assert answer["sources"][0]["title"] == "library.png"


def test_a_picture_bomb_is_refused_by_the_server(server: Server) -> None:
    from tests.images import png_header

    res = server.request(
        "POST",
        "/documents?filename=bomb.png",
        data=png_header(40_000, 40_000),
        headers={"Content-Type": "image/png"},
    )
    assert res.status == 400
    assert "at most 50.0 megapixels are read" in res.json()["error"]


def test_ragchat_ingest_reads_pictures_locally_and_through_the_api(server: Server, tmp_path: Path) -> None:
    needs_model()
    (tmp_path / "museum.png").write_bytes(picture("museum", "ten"))
    cli = run(
        ["ingest", "--api", server.url, "--token", TOKEN, "museum.png"], tmp_path / "unused", cwd=tmp_path
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "1 ready" in cli.stdout, cli.stdout
    answer = ask(server, "museum")
    assert "ten in the morning" in answer["answer"] and answer["sources"][0]["title"] == "museum.png"

    local = tmp_path / "local"
    local.mkdir()
    (local / "pool.png").write_bytes(picture("swimming pool", "eight"))
    data = tmp_path / "data"
    cli = run(["ingest", "pool.png"], data, cwd=local)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "1 ready" in cli.stdout, cli.stdout
    asked = run(["ask", "When does the swimming pool open?"], data, cwd=local)
    assert "eight in the morning" in asked.stdout, asked.stdout + asked.stderr
    assert "pool.png" in asked.stdout


def test_a_picture_added_on_the_page_is_read_and_shown_as_ocr_text(browser: Any, server: Server) -> None:  # noqa: F811
    from playwright.sync_api import expect

    with fresh_page(browser, server, init_script=SIGNED_IN) as page:
        page.goto("/write")
        accept = page.locator("#file").get_attribute("accept") or ""
        assert {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"} <= set(accept.split(","))
        page.set_input_files(
            "#file", files=[{"name": "cafe.png", "mimeType": "image/png", "buffer": picture("cafe", "seven")}]
        )
        page.get_by_role("button", name="Upload").click()
        expect(page.locator("#uploads li .file-status")).to_have_text("“cafe.png”: READY", timeout=WAIT_MS)
        answer = ask(server, "cafe")
        assert "seven in the morning" in answer["answer"] and answer["sources"][0]["title"] == "cafe.png"

        page.goto("/documents/ui")
        page.get_by_role("button", name="View cafe.png").click()
        viewer = page.get_by_role("dialog")
        expect(viewer.locator(".ocr-note")).to_have_text(
            "Text read by OCR: check names and numbers against the original."
        )
        expect(viewer.locator(".doc-text")).to_contain_text("The cafe opens at seven in the morning.")
        expect(viewer.get_by_role("img", name="The picture cafe.png")).to_be_visible()
        page.wait_for_function(  # the picture itself, above the text OCR read from it
            "() => { const i = document.querySelector('figure.pdf-page img');"
            " return !!i && i.complete && i.naturalWidth > 0; }",
            timeout=WAIT_MS,
        )
        expect(viewer.locator("h3.doc-h")).to_have_text("Text read from the picture")
        page.screenshot(path=str(server.log.parent / "ocr-picture-1280.png"))


def test_a_scanned_pdf_shows_its_page_and_the_ocr_text(browser: Any, server: Server) -> None:  # noqa: F811
    from playwright.sync_api import expect

    from tests.images import scanned_pdf

    pdf = scanned_pdf([["Opening hours of the ferry office", "", "The ferry office opens at noon."]])
    res = server.request(
        "POST", "/documents?filename=ferry-scan.pdf", data=pdf, headers={"Content-Type": "application/pdf"}
    )
    assert res.status == 202, res.body
    assert server.wait_document(res.json()["documentId"])["status"] == "READY"
    answer = ask(server, "ferry office")
    assert "noon" in answer["answer"] and answer["sources"][0]["page"] == 1
    with fresh_page(browser, server, init_script=SIGNED_IN) as page:
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto("/documents/ui")
        page.get_by_role("button", name="View ferry-scan.pdf").click()
        viewer = page.get_by_role("dialog")
        page.wait_for_function(  # the scanned page itself, rendered by the server
            "() => { const i = document.querySelector('figure.pdf-page img');"
            " return !!i && i.complete && i.naturalWidth > 0; }",
            timeout=WAIT_MS,
        )
        expect(viewer.locator(".ocr-note")).to_have_text(
            "Text read by OCR: check names and numbers against the original."
        )
        expect(viewer.locator(".doc-text")).to_contain_text("The ferry office opens at noon.")
        page.screenshot(path=str(server.log.parent / "ocr-scanned-pdf-390.png"))
