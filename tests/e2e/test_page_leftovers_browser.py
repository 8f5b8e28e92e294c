"""Issue 45's leftovers in headless Chromium against ``ragchat serve`` with a users file (Ana owns
"Harbour team", Vic is its editor, Zed is in no workspace of theirs):

- an upload fetches no /openapi.json; bytes already there are said ("Already there: <title>") by the
  grant itself, also when the upload goes to S3 (S3's own 204 is played here by a route: nothing of
  ours answers it), and a file S3 took is waited for, not "not found";
- the Documents page re-reads nothing on a timer while nothing is indexing (Playwright's clock), and
  shows a document added in another tab at once, one added elsewhere within a minute;
- a conversation link opened by another member of its workspace says it is theirs and private; a
  non-member reads the plain not-found;
- a PDF citation's page image carries a box over the cited sentence, and at 1280 px the conversation
  stays readable beside it (a sheet over it when narrower).

Screenshots at 1280 and 390 px are written to ``RAGCHAT_UI_SCREENSHOTS`` when it names a folder.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import TOKEN, Server, run_server
from tests.e2e.test_pages_browser import WAIT_MS, _expect, browser
from tests.e2e.test_workspace_pages_browser import _signed_in_as

pytestmark = pytest.mark.e2e
__all__ = ["browser"]

SHOTS = os.environ.get("RAGCHAT_UI_SCREENSHOTS")
FEES = b"Harbour fees. Visiting crews pay a mooring fee of twelve crowns per night.\n"


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / name), full_page=False)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, str], str]]:
    from ragchat.serving.users import add_user

    data = tmp_path_factory.mktemp("leftovers")
    users_file = data / "users.json"
    tokens = {name: add_user(users_file, name) for name in ("ana", "vic", "zed")}
    with run_server(data, env={"RAGCHAT_USERS_FILE": str(users_file)}) as server:
        made = server.request("POST", "/workspaces", body={"name": "Harbour team"}, token=tokens["ana"])
        ws = made.json()["id"]
        put = server.request(
            "PUT", f"/workspaces/{ws}/members/vic", body={"role": "editor"}, token=tokens["ana"]
        )
        assert put.status == 200, put.body
        server.token = TOKEN
        yield server, tokens, ws


@contextmanager
def _context(browser: Any, server: Server, token: str, width: int = 1280) -> Iterator[Any]:
    context = browser.new_context(
        base_url=server.url, viewport={"width": width, "height": 860 if width > 500 else 844}
    )
    context.add_init_script(_signed_in_as(token))
    errors: list[str] = []
    context.on("weberror", lambda e: errors.append(str(e.error)))
    try:
        yield context
        assert not errors, errors
    finally:
        for page in context.pages:
            page.unroute_all(behavior="ignoreErrors")
        context.close()


def _wait_ready(server: Server, token: str, doc_id: str) -> None:
    server.token = token
    try:
        assert server.wait_document(doc_id)["status"] == "READY"
    finally:
        server.token = TOKEN


# ----------------------------------------------------------------------------- uploads
def test_an_upload_asks_no_openapi_and_a_copy_sent_to_s3_says_already_there(browser: Any, team: Any) -> None:
    expect = _expect()
    server, tokens, _ = team
    with _context(browser, server, tokens["ana"]) as context:
        page = context.new_page()
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url))
        page.goto("/write")
        page.locator("#file").set_input_files(
            files=[{"name": "fees.txt", "mimeType": "text/plain", "buffer": FEES}]
        )
        page.locator("#upload").click()
        line = page.locator("#uploads li").filter(has_text="fees.txt")
        expect(line.locator(".file-status")).to_have_text("“fees.txt”: READY", timeout=WAIT_MS)
        assert [u for u in asked if "/uploads" in u], asked  # the presigned door
        assert not [u for u in asked if "openapi.json" in u], asked  # never the 67 KB document

        # As on S3: the form POST is answered by S3 (204, nothing of ours) and the bytes go nowhere
        # here; the copy must be named by the grant, before anything is sent.
        sent: list[str] = []

        def s3(route: Any) -> None:
            sent.append(route.request.url)
            route.fulfill(status=204, body="")

        page.route(re.compile(r"/uploads/local/"), s3)
        copy = {"name": "copy of fees.txt", "mimeType": "text/plain", "buffer": FEES}
        page.locator("#file").set_input_files(files=[copy])
        page.locator("#upload").click()
        line = page.locator("#uploads li").filter(has_text="copy of fees.txt")
        expect(line.locator(".file-status")).to_contain_text(
            re.compile(r"^Already there: “fees.txt” \(\w+\) has exactly this content"), timeout=WAIT_MS
        )
        assert sent == []  # nothing was sent
        _shot(page, "upload-already-there-1280.png")
        page.set_viewport_size({"width": 390, "height": 844})
        _shot(page, "upload-already-there-390.png")
        page.set_viewport_size({"width": 1280, "height": 860})

        # A new file S3 took: 404 until the bucket's trigger has read it; waited for, not "not found".
        page.locator("#file").set_input_files(
            files=[{"name": "tides.txt", "mimeType": "text/plain", "buffer": b"High tide is at noon today."}]
        )
        page.locator("#upload").click()
        line = page.locator("#uploads li").filter(has_text="tides.txt")
        expect(line.locator(".file-status")).to_have_text(
            "Uploaded; waiting for it to be taken in…", timeout=WAIT_MS
        )
        assert len(sent) == 1
        # the trigger's part (the document the file's name is), done here through the API
        taken = server.request(
            "POST", "/documents?filename=tides.txt", data=b"High tide is at noon today.",
            headers={"Content-Type": "text/plain"}, token=tokens["ana"],
        )  # fmt: skip
        assert taken.status == 202, taken.body
        expect(line.locator(".file-status")).to_have_text("“tides.txt”: READY", timeout=WAIT_MS)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_copy_found_by_the_trigger_is_said_at_once_not_after_the_grant_expires(
    browser: Any, team: Any, width: int
) -> None:
    """A file sent unhashed (over 256 MB) or two copies racing: the grant cannot know, S3 answers 204
    and the trigger finds the bytes already there (played here by the local receiver behind a route
    that answers as S3 does). The page reads what the upload became and names the document at once,
    instead of "waiting…" for a document that never comes and "no document came of it"."""
    expect = _expect()
    server, tokens, _ = team
    lights = f"Harbour lights ({width}). The green light marks the starboard side of the channel.\n".encode()
    with _context(browser, server, tokens["ana"], width) as context:
        page = context.new_page()
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url))
        page.goto("/write")
        page.locator("#file").set_input_files(
            files=[{"name": f"lights-{width}.txt", "mimeType": "text/plain", "buffer": lights}]
        )
        page.locator("#upload").click()
        first = page.locator("#uploads li").filter(has_text=f"lights-{width}.txt")
        expect(first.locator(".file-status")).to_have_text(f"“lights-{width}.txt”: READY", timeout=WAIT_MS)

        def unhashed(route: Any) -> None:  # as for a file over 256 MB: the grant is asked without it
            if route.request.method != "POST":
                return route.continue_()
            ask = json.loads(route.request.post_data or "{}")
            ask.pop("sha256", None)
            return route.continue_(post_data=json.dumps(ask))

        def s3(route: Any) -> None:  # the bytes land and the trigger runs; the page hears S3's 204
            taken = route.fetch()
            assert taken.status in (200, 201), taken.text()
            route.fulfill(status=204, body="")

        page.route(re.compile(r"/uploads$"), unhashed)
        page.route(re.compile(r"/uploads/local/"), s3)
        copy = {"name": f"copy of lights-{width}.txt", "mimeType": "text/plain", "buffer": lights}
        page.locator("#file").set_input_files(files=[copy])
        page.locator("#upload").click()
        line = page.locator("#uploads li").filter(has_text=f"copy of lights-{width}.txt")
        expect(line.locator(".file-status")).to_contain_text(
            re.compile(rf"^Already there: “lights-{width}.txt” \(\w+\) has exactly this content"),
            timeout=WAIT_MS,
        )
        assert [u for u in asked if re.search(r"/uploads/\w{26}(\?|$)", u)], asked  # the upload's status
        _shot(page, f"upload-copy-found-by-trigger-{width}.png")


@pytest.mark.parametrize("width", [1280, 390])
def test_a_file_the_trigger_refuses_is_said_at_once_with_its_reason(
    browser: Any, team: Any, width: int
) -> None:
    """A file S3 takes (204) but the trigger refuses (here a .docx that is no Word document; the
    trigger is played by the local receiver behind a route answering as S3 does): the page reads the
    upload's status and says why, in POST /documents' words, instead of "waiting…" until the grant
    expires and then "no document came of it"."""
    expect = _expect()
    server, tokens, _ = team
    with _context(browser, server, tokens["vic"], width) as context:
        page = context.new_page()
        refused: list[int] = []

        def s3(route: Any) -> None:  # the bytes land and the trigger refuses them; the page hears 204
            taken = route.fetch()
            refused.append(taken.status)
            route.fulfill(status=204, body="")

        page.route(re.compile(r"/uploads/local/"), s3)
        page.goto("/write")
        name = f"minutes-{width}.docx"
        page.locator("#file").set_input_files(
            files=[{"name": name, "mimeType": "application/octet-stream", "buffer": b"not a zip at all"}]
        )
        page.locator("#upload").click()
        status = page.locator("#uploads li").filter(has_text=name).locator(".file-status")
        expect(status).to_have_text(
            re.compile(r"^Could not read the Word document: it is not a valid zip archive"), timeout=WAIT_MS
        )
        expect(status).to_have_class(re.compile(r"\berror\b"))
        assert refused == [400]
        _shot(page, f"upload-refused-by-trigger-{width}.png")


# ----------------------------------------------------------------------------- the Documents page
def test_the_documents_page_reads_the_list_again_only_when_something_may_have_changed(
    browser: Any, team: Any
) -> None:
    expect = _expect()
    server, tokens, _ = team
    with _context(browser, server, tokens["ana"]) as context:
        context.clock.install()
        docs = context.new_page()
        lists: list[str] = []
        docs.on("request", lambda r: lists.append(r.url) if "/documents?limit=" in r.url else None)
        docs.goto("/documents/ui")
        expect(docs.locator("#refresh")).to_be_visible()
        docs.wait_for_load_state("networkidle")
        first = len(lists)
        assert first == 1, lists
        docs.clock.run_for(50_000)  # nothing indexing: nothing is read again
        assert len(lists) == first, lists

        # Added on the Add page in another tab: shown at once (no clock moved), then followed to READY.
        write = context.new_page()
        write.goto("/write")
        write.fill("#title", "Pier lights")
        write.fill("#text", "The pier lights are switched on at dusk by the harbour master.")
        write.get_by_role("button", name="Add note").click()
        row = docs.locator("#rows tr").filter(has_text="Pier lights")
        expect(row).to_have_count(1, timeout=WAIT_MS)
        for _ in range(60):
            if row.locator(".badge").inner_text() == "READY":
                break
            docs.clock.run_for(1000)  # the indexing document, read again every second
            docs.wait_for_timeout(250)  # the reply's real time (the server is not on the page's clock)
        expect(row.locator(".badge")).to_have_text("READY")
        _shot(docs, "documents-new-from-another-tab-1280.png")
        docs.set_viewport_size({"width": 390, "height": 844})
        _shot(docs, "documents-new-from-another-tab-390.png")
        settled = len(lists)
        docs.clock.run_for(30_000)
        assert len(lists) == settled  # settled: the list is not read on a timer

        # Added elsewhere (`ragchat ingest`, another member): within a minute, the slow look.
        buoys = {"title": "Buoy colours", "text": "Red buoys mark the port side."}
        res = server.request("POST", "/notes", body=buoys, token=tokens["ana"])
        assert res.status == 202, res.body
        docs.clock.run_for(61_000)
        expect(docs.locator("#rows tr").filter(has_text="Buoy colours")).to_have_count(1, timeout=WAIT_MS)
        assert len(lists) == settled + 1


# ----------------------------------------------------------------------------- a conversation's link
OTHER_MEMBERS = (
    "That conversation belongs to another member of “Harbour team”: conversations are private to the "
    "person who started them."
)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_conversation_link_says_whose_it_is_to_a_member_and_nothing_to_a_stranger(
    browser: Any, team: Any, width: int
) -> None:
    expect = _expect()
    server, tokens, ws = team
    made = server.request("POST", "/chat/conversations", body={"workspace": ws}, token=tokens["ana"])
    assert made.status == 201, made.body
    conv = made.json()["id"]
    # over HTTP: a member gets 403 in words, a stranger the plain 404 (as for an id never used)
    vic = server.request("GET", f"/chat/conversations/{conv}", token=tokens["vic"])
    assert (vic.status, vic.json()) == (403, {"error": OTHER_MEMBERS})
    zed = server.request("GET", f"/chat/conversations/{conv}", token=tokens["zed"])
    nope = server.request("GET", "/chat/conversations/01NOPE0000000000000000000", token=tokens["zed"])
    assert (zed.status, zed.body) == (nope.status, nope.body) == (404, b'{"error": "Conversation not found"}')

    with _context(browser, server, tokens["vic"], width) as context:
        page = context.new_page()
        page.goto(f"/ui/c/{conv}")
        expect(page.locator("#chat-error")).to_have_text(OTHER_MEMBERS, timeout=WAIT_MS)
        expect(page).to_have_url(re.compile(r"/ui$"))
        _shot(page, f"conversation-of-another-member-{width}.png")
    with _context(browser, server, tokens["zed"], width) as context:
        page = context.new_page()
        page.goto(f"/ui/c/{conv}")
        expect(page.locator("#chat-error")).to_have_text(
            "That conversation was not found: it may have been deleted.", timeout=WAIT_MS
        )


# ------------------------------------------------------------------- the cited span, on the image
GUIDE_PAGES = [
    "The Quillon observatory guide.\nVisitors enter through the west gate.",
    "The great telescope of the Quillon observatory\nwas ground by the optician Mara Venn in 1911.\n"
    "The dome turns on twelve bronze wheels.",
]
BOX_ON_IMAGE = """([img, box]) => { const i = img.getBoundingClientRect(), b = box.getBoundingClientRect();
  return {x: (b.left - i.left) / i.width, y: (b.top - i.top) / i.height,
          w: b.width / i.width, h: b.height / i.height}; }"""


def baseline(line: int) -> float:
    """Line ``line``'s baseline as a fraction of a make_pdf page from its top (14 pt apart from 720)."""
    return (792 - (720 - 14 * (line - 1))) / 792


# ------------------------------------------------------------ a cited PDF page, open in the panel
@contextmanager
def _cited_pdf_page(browser: Any, team: Any, width: int) -> Iterator[tuple[Any, Any, Any]]:
    """ana's two-page Quillon guide, asked about in the chat at ``width`` px, its page 2 opened from
    the answer's citation: yields the page, the citation panel and the page's (loaded) image."""
    from tests.pdfs import make_pdf

    expect = _expect()
    server, tokens, _ = team
    posted = server.request(
        "POST", "/documents?filename=quillon.pdf&title=Quillon%20guide", data=make_pdf(GUIDE_PAGES),
        headers={"Content-Type": "application/pdf"}, token=tokens["ana"],
    )  # fmt: skip
    assert posted.status in (200, 202), posted.body  # 200: another run added it
    _wait_ready(server, tokens["ana"], posted.json()["documentId"])
    with _context(browser, server, tokens["ana"], width) as context:
        page = context.new_page()
        page.goto("/ui")
        message = page.get_by_label("Message", exact=True)
        message.fill("Who ground the great telescope of the Quillon observatory?")
        message.press("Enter")
        answer = page.locator(".msg.assistant").last
        expect(answer.locator(".content")).to_contain_text("Mara Venn", timeout=WAIT_MS)
        answer.locator(".sources .chip").filter(has_text="Quillon guide · p. 2").click()
        panel = page.get_by_role("dialog")
        panel.get_by_role("button", name="Open document").click()
        expect(panel.locator(".page-no")).to_have_text("Page 2 of 2", timeout=WAIT_MS)
        image = panel.get_by_role("img", name="Page 2 of Quillon guide")
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
        yield page, panel, image


@pytest.mark.parametrize("width", [1280, 390])
def test_a_pdf_citation_boxes_the_cited_sentence_on_the_page_image(
    browser: Any, team: Any, width: int
) -> None:
    expect = _expect()
    with _cited_pdf_page(browser, team, width) as (page, panel, image):
        marks = panel.locator(".pdf-page .page-mark")
        expect(marks.first).to_be_visible()
        expect(panel.locator(".doc-text mark").first).to_contain_text("Mara Venn")
        boxes = [
            page.evaluate(BOX_ON_IMAGE, [image.element_handle(), m.element_handle()]) for m in marks.all()
        ]
        # the cited sentence's line (line 2 of page 2) is boxed, from the page's margin; line 3 is not
        assert any(b["y"] < baseline(2) < b["y"] + b["h"] and abs(b["x"] - 72 / 612) < 0.01 for b in boxes), (
            boxes
        )
        assert all(b["y"] + b["h"] < baseline(3) - 0.004 for b in boxes), boxes
        _shot(page, f"pdf-citation-box-{width}.png")
        image.click()  # zoomed: the box stays on its words
        zoomed = page.evaluate(BOX_ON_IMAGE, [image.element_handle(), marks.last.element_handle()])
        assert abs(zoomed["y"] - boxes[-1]["y"]) < 0.002 and abs(zoomed["x"] - boxes[-1]["x"]) < 0.002


# ------------------------------------------------------------ the chat beside the cited page
def _box(page: Any, selector: str) -> dict[str, float]:
    box = page.locator(selector).last.bounding_box()
    assert box is not None, selector
    return dict(box)


@pytest.mark.parametrize("width", [1280, 390])
def test_the_conversation_stays_readable_beside_a_cited_pdf_page(browser: Any, team: Any, width: int) -> None:
    """At 1280 px the chat column keeps at least 480 px beside the PDF page's panel, which takes the
    rest (its image within it), and the last answer stays in view; narrower, the panel is a sheet over
    the chat (which keeps its width underneath) and closing it shows the answer where it was."""
    expect = _expect()
    with _cited_pdf_page(browser, team, width) as (page, panel, image):
        answer = page.locator(".msg.assistant").last
        chat, side = _box(page, ".chat-main"), _box(page, "#panel")
        shown = _box(page, ".msg.assistant .content")
        img = image.bounding_box()
        assert img is not None
        if width == 1280:
            # side by side: the chat column readable, the panel the rest of the width, no overlap
            assert chat["width"] >= 480, (chat, side)
            assert side["x"] >= chat["x"] + chat["width"] - 1, (chat, side)
            assert side["x"] + side["width"] == pytest.approx(1280, abs=1) and side["width"] >= 500, side
            assert img["width"] >= 0.85 * (side["width"] - 40) and img["x"] >= side["x"], (img, side)
            expect(answer.locator(".content")).to_be_in_viewport()
            assert shown["width"] >= 400 and shown["x"] + shown["width"] <= side["x"], (shown, side)
            picker = _box(page, ".chat-head .workspace-bar select")  # its name readable, not "A"
            export = _box(page, "#export")
            assert picker["width"] >= 112 and picker["x"] + picker["width"] <= export["x"], (picker, export)
            assert export["x"] + export["width"] <= side["x"], (export, side)
            _shot(page, "pdf-citation-beside-chat-1280.png")
            page.set_viewport_size({"width": 1024, "height": 860})  # no room for both: a sheet over it
            chat, side = _box(page, ".chat-main"), _box(page, "#panel")
            assert chat["x"] + chat["width"] == pytest.approx(1024, abs=1), chat
            assert side["x"] + side["width"] == pytest.approx(1024, abs=1) and side["x"] >= 0, side
            _shot(page, "pdf-citation-sheet-1024.png")
        else:
            # a sheet over the whole width; the chat keeps its width underneath
            assert abs(side["x"]) <= 1 and side["width"] == pytest.approx(width, abs=1), side
            assert chat["width"] == pytest.approx(width, abs=1), chat
            assert img["x"] >= 0 and img["x"] + img["width"] <= width + 1, img
            _shot(page, f"pdf-citation-sheet-{width}.png")
            panel.get_by_role("button", name="Close").click()
            expect(panel).to_be_hidden()
            expect(answer.locator(".content")).to_be_in_viewport()
            shown = _box(page, ".msg.assistant .content")
            assert shown["width"] >= width - 80, shown
