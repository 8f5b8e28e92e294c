"""Issue 33, the pages a daily user keeps open, in headless Chromium (Debian's) against ``ragchat serve``
(real embedder, SQLite, extractive answerer) at 1280 and 375 px, light and dark where it matters:
citations open their passage in a side panel with the cited sentences marked and the document one
click away; the newest answer is never under the composer; conversations have addresses; the landing
page is one composer with questions from the user's own documents; the Documents page follows the
status live; the Add page names documents, takes several files, states its limit.

Same driver as ``test_pages_browser.py`` (skipped without Playwright or Chromium, failing on CI).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Server, run_server
from tests.e2e.test_pages_browser import SIGNED_IN, browser  # noqa: F401 (the fixture)
from tests.pdfs import make_pdf

pytestmark = pytest.mark.e2e

WAIT_MS = 60_000
SIZES = {1280: 800, 375: 740}
# Docs screenshots are written when RAGCHAT_UI_SCREENSHOTS names a folder (docs/screenshots).
SHOTS = os.environ.get("RAGCHAT_UI_SCREENSHOTS")

HARBOUR = """# Harbour rules

The harbour master is Ines Marlowe, who has kept the Gullwick harbour log since the winter of 1998.
Boats moor on the east quay from April to October, and every skipper signs the log on arrival.
Visiting crews pay the mooring fee of twelve crowns a night at the harbour office.

## Night sailing

The lighthouse keeper lowers the chain across the harbour mouth at midnight. After midnight no boat
may leave the harbour without the keeper's written permission, given only for rescues."""
ORCHARD = (
    "The Brindle orchard grows forty varieties of heritage apples. The harvest festival at the "
    "orchard takes place every October and ends with a cider pressing contest."
)
FERRY = """# Ferry timetable

## When does the first ferry leave Gullwick?

The first ferry leaves Gullwick at six in the morning, and the last one returns at ten at night."""
PDF_PAGES = [
    "The Quillon observatory guide.\nVisitors enter through the west gate.",
    "The great telescope of the Quillon observatory\nwas ground by the optician Mara Venn in 1911.",
]


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with run_server(tmp_path_factory.mktemp("ragchat-daily")) as srv:
        yield srv


def _note(server: Server, title: str, text: str, content_type: str = "text/markdown") -> str:
    body = {"title": title, "text": text, "contentType": content_type}
    res = server.request("POST", "/notes", body=body)
    assert res.status == 202, res.body
    doc_id = str(res.json()["documentId"])
    assert server.wait_document(doc_id)["status"] == "READY"
    return doc_id


@pytest.fixture(scope="module")
def docs(server: Server) -> dict[str, str]:
    pdf = server.request(
        "POST",
        "/documents?filename=quillon.pdf&title=Quillon%20guide",
        data=make_pdf(PDF_PAGES),
        headers={"Content-Type": "application/pdf"},
    )
    assert pdf.status == 202, pdf.body
    pdf_id = str(pdf.json()["documentId"])
    assert server.wait_document(pdf_id)["status"] == "READY"
    return {
        "harbour": _note(server, "Harbour rules", HARBOUR),
        "orchard": _note(server, "Brindle orchard", ORCHARD, "text/plain"),
        "ferry": _note(server, "Ferry timetable", FERRY),
        "pdf": pdf_id,
    }


@contextmanager
def _page(browser: Any, server: Server, width: int = 1280, scheme: str = "light") -> Iterator[Any]:  # noqa: F811
    context = browser.new_context(
        base_url=server.url, viewport={"width": width, "height": SIZES[width]}, color_scheme=scheme
    )
    context.add_init_script(SIGNED_IN)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield page
        assert not errors, f"JavaScript errors on the page: {errors}"
    finally:
        # the pages re-read lists by themselves: a route handler mid-read as the context closes must
        # not fail (its error would surface in the next test)
        page.unroute_all(behavior="ignoreErrors")
        context.close()


def _in_view(page: Any, locator: Any) -> bool:
    """The element's whole box is inside the window (not under anything fixed is checked separately)."""
    box = locator.bounding_box()
    size = page.viewport_size
    return bool(
        box
        and box["y"] >= 0
        and box["y"] + box["height"] <= size["height"]
        and box["x"] >= 0
        and box["x"] + box["width"] <= size["width"]
    )


def _chat(page: Any) -> None:
    """The chat page with its composer on screen."""
    page.goto("/ui")
    message = page.get_by_label("Message", exact=True)
    if not message.is_visible():
        if page.get_by_role("button", name="Conversations").is_visible():
            page.get_by_role("button", name="Conversations").click()
        page.get_by_role("button", name="New conversation").click()
    _expect()(message).to_be_visible()


def _ask(page: Any, question: str) -> Any:
    """Sends ``question`` from the composer; returns the newest answer once it is complete."""
    expect = _expect()
    answers = page.locator(".msg.assistant")
    before = answers.count()
    message = page.get_by_label("Message", exact=True)
    message.fill(question)
    message.press("Enter")
    expect(answers).to_have_count(before + 1, timeout=WAIT_MS)
    answer = answers.nth(before)
    expect(answer.locator(".msg-actions")).to_be_visible(timeout=WAIT_MS)
    return answer


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / name))


# ----------------------------------------------------------------------------- 1. citations
@pytest.mark.parametrize(("width", "scheme"), [(1280, "light"), (375, "dark")])
def test_a_citation_opens_its_passage_with_the_cited_sentence_marked_and_the_document(
    browser: Any,  # noqa: F811
    server: Server,
    docs: dict[str, str],
    width: int,
    scheme: str,
) -> None:
    expect = _expect()
    with _page(browser, server, width, scheme) as page:
        _chat(page)
        answer = _ask(page, "How much is the mooring fee for visiting crews at Gullwick harbour?")
        expect(answer.locator(".content")).to_contain_text("twelve crowns")
        answer.get_by_role("button", name="Source 1").first.click()

        panel = page.get_by_role("dialog")
        expect(panel).to_be_visible()
        expect(panel.locator("#panel-title")).to_have_text("Harbour rules")
        mark = panel.locator("mark")
        expect(mark.first).to_contain_text("mooring fee of twelve crowns a night")
        assert _in_view(page, mark.first)
        # the whole passage, whole words: its last sentence ends where the note ends
        expect(panel.locator(".passage")).to_contain_text("given only for rescues.")
        expect(panel.locator(".passage")).not_to_contain_text("# Harbour")  # no Markdown marks
        assert _in_view(page, panel.get_by_role("button", name="Close"))
        _shot(page, f"citation-{'dark-' if scheme == 'dark' else ''}{width}.png")

        panel.get_by_role("button", name="Open document").click()
        expect(panel.locator(".doc-text")).to_contain_text("The lighthouse keeper lowers the chain")
        expect(panel.locator(".doc-text mark").first).to_contain_text("twelve crowns")
        download = panel.get_by_role("link", name="Download text")
        assert download.get_attribute("download") == "Harbour rules.txt"

        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
        # focus goes back to where the reader was
        assert page.evaluate("document.activeElement.getAttribute('aria-label') || ''").startswith("Source 1")


# the page image's natural size, its box against the panel's, and how many of its pixels are dark
PAGE_IMAGE = """img => { const r = img.getBoundingClientRect();
  const p = img.closest('.panel').getBoundingClientRect(), c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight; const g = c.getContext('2d');
  g.drawImage(img, 0, 0); const d = g.getImageData(0, 0, c.width, c.height).data;
  let dark = 0; for (let i = 0; i < d.length; i += 4) if (d[i] < 128) dark++;
  return {w: img.naturalWidth, h: img.naturalHeight, left: r.left, right: r.right,
    pl: p.left, pr: p.right, dark}; }"""


@pytest.mark.parametrize("width", [1280, 375])
def test_a_pdf_citation_opens_its_page_with_the_page_number(
    browser: Any,  # noqa: F811
    server: Server,
    docs: dict[str, str],
    width: int,
) -> None:
    """The cited PDF page opens as the reader sees it (the page's image, rendered by the server) with
    its text below, the cited sentence highlighted there."""
    expect = _expect()
    with _page(browser, server, width) as page:
        _chat(page)
        answer = _ask(page, "Who ground the great telescope of the Quillon observatory?")
        expect(answer.locator(".content")).to_contain_text("Mara Venn")
        chip = answer.locator(".sources .chip").filter(has_text="Quillon guide · p. 2")
        expect(chip).to_have_count(1)
        chip.click()
        panel = page.get_by_role("dialog")
        expect(panel.locator("#panel-title")).to_have_text("Quillon guide · p. 2")
        expect(panel.locator("mark").first).to_contain_text("Mara Venn")
        panel.get_by_role("button", name="Open document").click()
        expect(panel.locator(".page-no")).to_have_text("Page 2 of 2")
        image = panel.get_by_role("img", name="Page 2 of Quillon guide")
        expect(image).to_be_visible()
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
        shown = image.evaluate(PAGE_IMAGE)
        assert shown["w"] >= 890 and abs(shown["h"] / shown["w"] - 792 / 612) < 0.01  # the Letter page
        assert shown["dark"] > 100  # its text is drawn
        assert shown["pl"] - 1 <= shown["left"] and shown["right"] <= shown["pr"] + 1  # fits the panel
        text = panel.locator(".doc-text")
        expect(text).to_contain_text("ground by the optician Mara Venn in 1911.")
        expect(text).not_to_contain_text("west gate")
        expect(text.locator("mark").first).to_contain_text("Mara Venn")  # the cited sentence, findable
        panel.get_by_role("button", name="Cited text ↓").click()
        expect(text.locator("mark").first).to_be_in_viewport()
        panel.get_by_role("button", name="Previous page").click()
        expect(panel.locator(".page-no")).to_have_text("Page 1 of 2")
        expect(panel.get_by_role("img", name="Page 1 of Quillon guide")).to_be_visible()
        expect(panel.locator(".doc-text")).to_contain_text("Visitors enter through the west gate.")


# ----------------------------------------------------------------------------- 2. the newest answer in view
INSIDE_SCROLLER = """el => { const r = el.getBoundingClientRect(), s = scroller.getBoundingClientRect();
  return r.height > 0 && r.top >= s.top - 1 && r.bottom <= s.bottom + 1; }"""


def _visible_above_composer(page: Any, locator: Any) -> bool:
    """Wholly on screen between the chat header and the composer (not behind either), within the
    next frames (the view follows what grows at the page's next layout)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(INSIDE_SCROLLER, arg=locator.element_handle(), timeout=5000)
    except PlaywrightTimeout:
        return False
    return True


@pytest.mark.parametrize("width", [1280, 375])
def test_the_newest_answer_is_never_behind_the_composer_and_jump_to_latest_returns(
    browser: Any,  # noqa: F811
    server: Server,
    docs: dict[str, str],
    width: int,
) -> None:
    expect = _expect()
    with _page(browser, server, width) as page:
        _chat(page)
        questions = (
            "How much is the mooring fee for visiting crews at Gullwick harbour?",
            "When is the harvest festival at the Brindle orchard?",
            "Who ground the great telescope of the Quillon observatory?",
            "zqx vbnm plork?",  # a refusal: its label, suggestions and buttons in view too
        )
        for question in questions:
            answer = _ask(page, question)
            last = answer.locator(".msg-actions")
            assert _visible_above_composer(page, last), (question, last.bounding_box())
            if answer.locator(".sources").count():
                assert _visible_above_composer(page, answer.locator(".sources"))
        expect(page.locator(".msg.assistant.refusal .suggestions")).to_be_visible()
        assert page.evaluate("scroller.scrollHeight > scroller.clientHeight")  # the test needs overflow
        expect(page.get_by_role("button", name="Jump to latest ↓")).to_be_hidden()

        page.evaluate("scroller.scrollTop = 0")
        jump = page.get_by_role("button", name="Jump to latest ↓")
        expect(jump).to_be_visible()
        assert _in_view(page, jump)
        jump.click()
        expect(jump).to_be_hidden()
        assert _visible_above_composer(page, page.locator(".msg.assistant").last.locator(".msg-actions"))
        _shot(page, f"chat-scroll-{width}.png")


# ----------------------------------------------------------------------------- 3. addresses
def test_a_conversation_has_an_address_that_reload_back_and_forward_restore(
    browser: Any,  # noqa: F811
    server: Server,
    docs: dict[str, str],
) -> None:
    expect = _expect()
    with _page(browser, server) as page:
        _chat(page)
        expect(page).to_have_url(re.compile(r"/ui$"))
        _ask(page, "When is the harvest festival at the Brindle orchard?")
        expect(page).to_have_url(re.compile(r"/ui/c/[^/]+$"))
        address = page.url

        page.reload()
        expect(page.locator(".msg.user .content")).to_have_text(
            ["When is the harvest festival at the Brindle orchard?"]
        )
        expect(page.locator(".msg.assistant")).to_contain_text("October")
        expect(page.locator("#conv-title")).to_have_text(
            "When is the harvest festival at the Brindle orchard?"
        )

        page.get_by_role("button", name="New conversation").click()
        expect(page).to_have_url(re.compile(r"/ui$"))
        expect(page.locator(".msg")).to_have_count(0)
        _ask(page, "How much is the mooring fee for visiting crews at Gullwick harbour?")
        second = page.url
        assert second != address

        page.go_back()  # the start page, then the first conversation
        expect(page).to_have_url(re.compile(r"/ui$"))
        expect(page.locator("#welcome")).to_be_visible()
        page.go_back()
        expect(page).to_have_url(address)
        expect(page.locator(".msg.assistant")).to_contain_text("October")
        page.go_forward()
        page.go_forward()
        expect(page).to_have_url(second)
        expect(page.locator(".msg.assistant")).to_contain_text("twelve crowns")

        page.goto("/ui/c/NOPE0000")  # gone (or never there): said, and the start page
        expect(page.locator("#chat-error")).to_have_text(
            "That conversation was not found: it may have been deleted."
        )
        expect(page).to_have_url(re.compile(r"/ui$"))


# ----------------------------------------------------------------------------- 4. the start page
@pytest.mark.parametrize(
    ("width", "scheme"), [(1280, "light"), (375, "light"), (1280, "dark"), (375, "dark")]
)
def test_the_start_page_is_one_composer_with_questions_from_your_documents(
    browser: Any,  # noqa: F811
    server: Server,
    docs: dict[str, str],
    width: int,
    scheme: str,
) -> None:
    expect = _expect()
    with _page(browser, server, width, scheme) as page:
        page.goto("/ui")
        message = page.get_by_label("Message", exact=True)
        expect(message).to_be_visible()
        assert _in_view(page, page.locator("#chat-form"))
        expect(page.get_by_text("Ask once")).to_have_count(0)
        lead = page.locator("#welcome .lead").inner_text()
        assert " ," not in lead and " ." not in lead, lead
        suggested = page.locator("#suggested")
        suggestion = suggested.get_by_role("button", name="When does the first ferry leave Gullwick?")
        expect(suggestion).to_be_visible()
        expect(  # titles as topics people ask about, never "What is office-hours.txt?" (issue 45)
            suggested.get_by_role("button", name=re.compile(r"^What do my documents say about .+\?$")).first
        ).to_be_visible()
        assert not [
            t for t in suggested.get_by_role("button").all_inner_texts() if re.search(r"\.(txt|md|pdf)\b", t)
        ]
        assert suggested.get_by_role("button").count() <= 4
        expect(page.get_by_text("You have no documents yet")).to_be_hidden()
        _shot(page, f"chat-start-{'dark-' if scheme == 'dark' else ''}{width}.png")
        suggestion.click()
        answer = page.locator(".msg.assistant")
        expect(answer.locator(".content")).to_contain_text("six in the morning", timeout=WAIT_MS)
        expect(page).to_have_url(re.compile(r"/ui/c/[^/]+$"))


def test_with_no_documents_the_start_page_and_the_reply_say_add_one(
    browser: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    expect = _expect()
    with run_server(tmp_path) as empty, _page(browser, empty, 375) as page:
        page.goto("/ui")
        note = page.locator("#no-docs")
        expect(note).to_have_text("You have no documents yet — add one.")
        assert note.get_by_role("link", name="add one").get_attribute("href") == "/write"
        expect(page.locator("#samples-note")).to_contain_text("ragchat serve --samples")
        expect(page.locator("#suggest-box")).to_be_hidden()
        answer = _ask(page, "What is the mooring fee?")
        expect(answer.locator(".content")).to_contain_text("You have no documents yet — add one.")
        expect(answer.get_by_role("link", name="Add a document")).to_have_attribute("href", "/write")


# ----------------------------------------------------------------------------- 5. the Documents page
def test_the_documents_page_follows_the_status_live_and_stops_when_settled(
    browser: Any,  # noqa: F811
    server: Server,
    docs: dict[str, str],
) -> None:
    """The list first says the harbour note is PROCESSING (the list reply is altered on its way in);
    the page reads it again by itself (the page's clock is Playwright's, moved by the test) until the
    server says READY, then reads nothing more."""
    expect = _expect()
    with _page(browser, server) as page:
        page.clock.install()
        altered = {"done": False}

        def processing_once(route: Any) -> None:
            reply = route.fetch()
            body = reply.json()
            if not altered["done"]:
                altered["done"] = True
                for d in body["items"]:
                    if d["id"] == docs["harbour"]:
                        d["status"] = "PROCESSING"
            route.fulfill(response=reply, json=body)

        page.route(re.compile(r"/documents\?limit="), processing_once)
        reads: list[str] = []
        page.on(
            "request", lambda r: reads.append(r.url) if f"/documents/{docs['harbour']}" in r.url else None
        )
        page.goto("/documents/ui")
        row = page.locator(f"tr[data-id='{docs['harbour']}']")
        expect(row.locator(".badge")).to_have_text("PROCESSING")
        expect(page.locator("#doc-live")).to_have_text(
            "1 document is being indexed: their status updates here."
        )
        page.clock.run_for(1500)  # one poll
        expect(row.locator(".badge")).to_have_text("READY")
        expect(page.locator("#doc-live")).to_have_text("")
        settled = len(reads)
        assert settled >= 1
        page.clock.run_for(30_000)  # thirty more seconds: no further read
        assert len(reads) == settled


@pytest.mark.parametrize("width", [1280, 375])
def test_the_documents_page_searches_filters_by_collection_and_views_a_document(
    browser: Any,  # noqa: F811
    server: Server,
    docs: dict[str, str],
    width: int,
) -> None:
    expect = _expect()
    server.request("PATCH", f"/documents/{docs['orchard']}", body={"title": "Brindle orchard"})
    pier = {
        "title": "Pier lamps",
        "text": "The pier lamps are lit at dusk.",
        "collection": "pier",
        "source": "t:pier",
    }
    tagged = server.request("POST", "/notes", body=pier)  # the second time: the same document
    server.wait_document(tagged.json()["documentId"])
    with _page(browser, server, width) as page:
        page.goto("/documents/ui")
        rows = page.locator("#rows tr")
        expect(rows.filter(has_text="Harbour rules")).to_be_visible()
        expect(page.locator("thead")).not_to_contain_text("Chunks")
        page.get_by_label("Search titles").fill("orchard")
        expect(rows.filter(visible=True)).to_have_count(1)
        expect(rows.filter(visible=True)).to_contain_text("Brindle orchard")
        page.get_by_label("Search titles").fill("nothing like it")
        expect(page.locator("#doc-none")).to_have_text("No document title matches “nothing like it”.")
        page.get_by_label("Search titles").fill("")
        page.get_by_label("Collection").select_option("pier")
        expect(rows).to_have_count(1)
        expect(rows).to_contain_text("Pier lamps")
        page.get_by_label("Collection").select_option("")
        expect(rows.filter(has_text="Harbour rules")).to_have_count(1)

        rows.filter(has_text="Harbour rules").get_by_role("button", name="View Harbour rules").click()
        viewer = page.get_by_role("dialog")
        expect(viewer.locator("#panel-title")).to_have_text("Harbour rules")
        expect(viewer.locator(".doc-text")).to_contain_text("The lighthouse keeper lowers the chain")
        expect(viewer.get_by_role("link", name="Download text")).to_be_visible()
        assert _in_view(page, viewer.get_by_role("button", name="Close"))
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # nothing sideways
        _shot(page, f"documents-view-{width}.png")


# ----------------------------------------------------------------------------- 6. the Add page
# Each width's files differ in their bytes: the same content again would be one document (a duplicate).
DROPPED = """width => { const dt = new DataTransfer();
  const text = 'The ferry to Skerry leaves at noon on Sundays (' + width + ').';
  dt.items.add(new File([text], 'skerry-ferry.txt', {type: 'text/plain'}));
  return dt; }"""


@pytest.mark.parametrize("width", [1280, 375])
def test_the_add_page_takes_several_files_each_with_its_status_by_title(
    browser: Any,  # noqa: F811
    server: Server,
    width: int,
) -> None:
    expect = _expect()
    with _page(browser, server, width) as page:
        page.goto("/write")
        expect(page.get_by_role("heading", level=1)).to_have_text("Add notes and files")
        limit = page.locator("#file-limit")
        expect(limit).to_have_text(
            "Files up to 1.7 MB each; choose or drop several at once."
        )  # before any upload
        upload_form, note_text = page.locator("#u").bounding_box(), page.locator("#text").bounding_box()
        assert upload_form and note_text and upload_form["y"] < note_text["y"]  # files first, also on a phone
        assert _in_view(page, page.get_by_role("button", name="Upload"))
        page.fill("#collection", f"add-{width}")
        big = b"x" * 2_300_000  # over this server's upload limit (its 2 MiB body limit, less the framing)
        page.set_input_files(
            "#file",
            files=[
                {
                    "name": f"tides-{width}.md",
                    "mimeType": "text/markdown",
                    "buffer": f"# Tides\n\nHigh tide at six ({width}).".encode(),
                },
                {"name": "huge.txt", "mimeType": "text/plain", "buffer": big},
                {
                    "name": f"gulls-{width}.txt",
                    "mimeType": "text/plain",
                    "buffer": f"Gulls nest on the old pier ({width}).".encode(),
                },
            ],
        )
        page.get_by_role("button", name="Upload").click()
        lines = page.locator("#uploads li")
        expect(lines).to_have_count(3)
        expect(lines.nth(0).locator(".file-status")).to_have_text(
            f"“tides-{width}.md”: READY", timeout=WAIT_MS
        )
        expect(lines.nth(1).locator(".file-status")).to_have_text(
            "The file is too large (2.3 MB): the limit is 1.7 MB."
        )
        expect(lines.nth(1).locator("progress")).to_be_hidden()  # no full bar left after a refusal
        expect(lines.nth(2).locator(".file-status")).to_have_text(
            f"“gulls-{width}.txt”: READY", timeout=WAIT_MS
        )
        assert "DSZ" not in page.locator("#uploads").inner_text()  # no ids
        _shot(page, f"write-files-{width}.png")

        page.dispatch_event("#drop", "drop", {"dataTransfer": page.evaluate_handle(DROPPED, width)})
        dropped = lines.filter(has_text="skerry-ferry.txt")
        expect(dropped.locator(".file-status")).to_have_text("“skerry-ferry.txt”: READY", timeout=WAIT_MS)
        titles = {
            d["title"] for d in server.request("GET", f"/documents?collection=add-{width}").json()["items"]
        }
        assert titles == {f"tides-{width}.md", f"gulls-{width}.txt", "skerry-ferry.txt"}


# ----------------------------------------------------------------------------- 12. still being indexed
def test_the_start_page_says_a_document_is_still_being_indexed(
    browser: Any,  # noqa: F811
    server: Server,
    docs: dict[str, str],
) -> None:
    """The document list is altered on its way in once (one document PROCESSING), then the page's
    own next read (Playwright's clock) finds all ready and the note goes; the refusal's own
    sentence is the API's (tests/unit/test_api_notes.py, test_a_refusal_while_documents_…)."""
    expect = _expect()
    with _page(browser, server, 375) as page:
        page.clock.install()
        altered = {"done": False}

        def processing_once(route: Any) -> None:
            reply = route.fetch()
            body = reply.json()
            if not altered["done"] and body["items"]:
                altered["done"] = True
                body["items"][0]["status"] = "PROCESSING"
            route.fulfill(response=reply, json=body)

        # the start page reads each workspace's list (``&workspace=``)
        page.route(re.compile(r"/documents\?limit=50(&workspace=[^&]*)?$"), processing_once)
        page.goto("/ui")
        note = page.locator("#indexing-note")
        expect(note).to_have_text(
            "1 document is still being indexed: questions about it are answered once it is ready."
        )
        page.clock.run_for(2500)  # the start page reads the list again by itself: now all are ready
        expect(note).to_have_text("")


# ----------------------------------------------------------------------------- attaching from the chat
@pytest.mark.parametrize("width", [1280, 375])
def test_a_file_attached_in_the_chat_is_indexed_and_answers(
    browser: Any,  # noqa: F811
    server: Server,
    docs: dict[str, str],
    width: int,
) -> None:
    expect = _expect()
    with _page(browser, server, width) as page:
        _chat(page)
        attach = page.get_by_role("button", name="Attach files")
        assert _in_view(page, attach) and _in_view(page, page.get_by_role("button", name="Send"))
        name = f"lantern-{width}.md"
        # a town of its own per width: the same bytes again would be a duplicate of the other run's file,
        # and the same words would let the answer cite that file instead
        town = {1280: "Wexham", 375: "Corrowby"}[width]
        text = f"# Lanterns\n\nThe {town} lantern parade starts at the old mill at seven in the evening."
        text_bytes = text.encode()
        page.set_input_files(
            "#attach-file", files=[{"name": name, "mimeType": "text/markdown", "buffer": text_bytes}]
        )
        line = page.locator("#attached li").filter(has_text=name)
        expect(line.locator(".file-status")).to_have_text(f"“{name}”: READY", timeout=WAIT_MS)
        answer = _ask(page, f"Where does the {town} lantern parade start?")
        expect(answer.locator(".content")).to_contain_text("old mill")
        expect(answer.locator(".sources .chip").filter(has_text=name)).to_have_count(1)
