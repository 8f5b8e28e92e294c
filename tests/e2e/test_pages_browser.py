"""The HTML pages (``/ui``, ``/write``, ``/documents/ui``) driven in headless Chromium against
``ragchat serve`` (real embedder, SQLite, extractive answerer).

Driver: Playwright for Python with Debian's Chromium (``executable_path``; Playwright's own browser
download is not used). Without Playwright or Chromium the tests skip with the reason, except on CI
(``CI=true``), where they fail: there ``make test`` installs both.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import TOKEN, Server

pytestmark = pytest.mark.e2e

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
WAIT_MS = 60_000  # upper bound for ingestion / an answer; expect() returns as soon as the page matches

LIGHTHOUSE = (
    "The Zephyr lighthouse on Mallow Island was built in 1887 by the engineer Ada Quill. "
    "Its lamp can be seen from twenty-two nautical miles away on a clear night."
)
ORCHARD = (
    "The Brindle orchard grows forty varieties of heritage apples. The harvest festival at the "
    "orchard takes place every October and ends with a cider pressing contest."
)
IMG = '<img src=x onerror="window.__xss=1">'
SCRIPT = "<script>window.__xss=2</script>"
HOSTILE = f"Quokka cipher memo: {IMG} and {SCRIPT} are written in the quokka cipher memo as plain text."


def _on_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if _on_ci():
        pytest.fail(f"{reason}; the browser tests must run on CI (`make test` installs it)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the Python package playwright is not installed (pip install -e '.[dev]')")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        _unavailable("Chromium is not installed (as root: `make ensure-chromium`)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


# What the token sign-in form stores (the sign-in itself: test_token_sign_in_...).
SIGNED_IN = f"""try {{ sessionStorage.setItem('ragchat.authorization', 'Bearer {TOKEN}'); }} catch (e) {{}}"""


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Any]:
    # The local server wants the bearer token on every API call: the tab starts signed in.
    context = browser.new_context(base_url=server.url, viewport={"width": 1100, "height": 900})
    context.add_init_script(SIGNED_IN)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield pg
        assert not errors, f"JavaScript errors on the page: {errors}"
    finally:
        context.close()


def _add(server: Server, title: str, text: str, collection: str) -> str:
    res = server.request("POST", "/notes", body={"title": title, "text": text, "collection": collection})
    assert res.status == 202, res.body
    doc_id = str(res.json()["documentId"])
    assert server.wait_document(doc_id)["status"] == "READY"
    return doc_id


@pytest.fixture(scope="module")
def notes(server: Server) -> dict[str, str]:
    return {
        "lighthouse": _add(server, "Zephyr lighthouse", LIGHTHOUSE, "browser"),
        "orchard": _add(server, "Brindle orchard", ORCHARD, "browser"),
    }


@pytest.fixture(scope="module")
def hostile(server: Server) -> str:
    return _add(server, f"Hostile {SCRIPT}{IMG}", HOSTILE, "browser-xss")


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


def test_add_a_note_on_write_and_see_it_reach_ready(page: Any, server: Server) -> None:
    expect = _expect()
    page.goto("/write")
    page.fill("#title", "Written in the browser")
    page.fill("#text", "The Corvid library lends telescopes to members on weekends.")
    page.fill("#collection", "browser-write")
    page.click("text=Add note")
    expect(page.locator("#status")).to_contain_text("READY", timeout=WAIT_MS)
    doc_id = page.locator("#status").inner_text().split()[1].rstrip(":")
    doc = server.request("GET", f"/documents/{doc_id}").json()
    assert (doc["title"], doc["collection"], doc["status"]) == (
        "Written in the browser",
        "browser-write",
        "READY",
    )


def test_ask_once_shows_the_answer_and_the_cited_source(page: Any, notes: dict[str, str]) -> None:
    expect = _expect()
    page.goto("/ui")
    page.fill("#q", "Who built the Zephyr lighthouse on Mallow Island?")
    page.click("#f button")
    expect(page.locator("#answer")).to_contain_text("Ada Quill", timeout=WAIT_MS)
    source = page.locator("#sources li").filter(has_text="Zephyr lighthouse")
    expect(source).to_have_count(1)
    assert source.locator("code").inner_text().strip()  # the note id is shown with the snippet


def test_chat_two_turns_with_sources_and_reopen(page: Any, notes: dict[str, str]) -> None:
    expect = _expect()
    page.goto("/ui")
    page.fill("#collection", "browser")
    page.click("#new-conv-button")
    expect(page.locator("#chat-form")).to_be_visible()

    page.fill("#message", "Who built the Zephyr lighthouse on Mallow Island?")
    page.click("#send")
    answers = page.locator(".msg.assistant")
    expect(answers).to_have_count(1, timeout=WAIT_MS)
    expect(answers.nth(0)).to_contain_text("Ada Quill")
    expect(answers.nth(0).locator(".sources li").filter(has_text="Zephyr lighthouse")).to_have_count(1)

    page.fill("#message", "When is the harvest festival at the Brindle orchard?")
    page.click("#send")
    expect(answers).to_have_count(2, timeout=WAIT_MS)
    expect(answers.nth(1)).to_contain_text("October")
    expect(answers.nth(1).locator(".sources li").filter(has_text="Brindle orchard")).to_have_count(1)
    expect(page.locator(".msg.user")).to_have_count(2)
    title = "Who built the Zephyr lighthouse on Mallow Island? · browser"
    expect(page.locator("#conv-title")).to_have_text(title)  # titled from the first message
    if shot := os.environ.get("RAGCHAT_UI_SCREENSHOT"):
        page.screenshot(path=str(Path(shot)), full_page=True)

    # The conversation is listed (titled from the first message) and reopens with all four messages.
    page.reload()
    item = page.locator("#convs li").filter(has_text="Who built the Zephyr lighthouse")
    expect(item).to_have_count(1)
    expect(item).to_contain_text("4 messages")
    item.locator("button").click()
    expect(page.locator("#messages .msg")).to_have_count(4)
    expect(page.locator(".msg.assistant .sources li")).not_to_have_count(0)


def test_chat_shows_the_api_error_and_keeps_the_message(page: Any, server: Server) -> None:
    expect = _expect()
    page.goto("/ui")
    page.click("#new-conv-button")
    expect(page.locator("#chat-form")).to_be_visible()
    page.fill("#message", "   ")  # passes the form's `required`, is empty once sanitized → 400
    page.click("#send")
    conv_id = page.evaluate("current")
    res = server.request("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "   "})
    assert res.status == 400
    expect(page.locator("#chat-error")).to_have_text("Error: " + res.json()["error"])
    expect(page.locator("#message")).to_have_value("   ")
    expect(page.locator(".msg")).to_have_count(0)


def test_markup_in_documents_is_shown_as_text_never_run(page: Any, hostile: str) -> None:
    expect = _expect()

    def assert_inert() -> None:
        assert page.evaluate("window.__xss") is None
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        assert page.evaluate("document.scripts.length") == 2  # the page's script and its JSON config
        runnable = "document.querySelectorAll('script:not([type=\"application/json\"])').length"
        assert page.evaluate(runnable) == 1

    page.goto("/documents/ui")
    row = page.locator(f"tr[data-id='{hostile}']")
    expect(row).to_contain_text(f"Hostile {SCRIPT}{IMG}")
    expect(row).to_contain_text("READY")
    assert_inert()

    page.goto("/ui")
    page.fill("#q", "What is written in the quokka cipher memo?")
    page.click("#f button")
    expect(page.locator("#sources li").filter(has_text=IMG)).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator("#sources li").filter(has_text=SCRIPT)).to_have_count(1)
    assert_inert()

    page.fill("#collection", "browser-xss")
    page.click("#new-conv-button")
    page.fill("#message", "What is written in the quokka cipher memo?")
    page.click("#send")
    expect(page.locator(".msg.assistant .sources li").filter(has_text=IMG)).to_have_count(1, timeout=WAIT_MS)
    assert_inert()


def test_documents_page_disables_enables_and_deletes(page: Any, server: Server) -> None:
    expect = _expect()
    doc_id = _add(server, "Disposable note", "The Pelican ferry leaves the harbour at dawn.", "browser-docs")
    page.goto("/documents/ui")
    row = page.locator(f"tr[data-id='{doc_id}']")
    expect(row).to_contain_text("READY")
    expect(row.locator("td").nth(2)).to_have_text("1")  # chunk count

    row.locator("text=Disable").click()
    expect(row.locator("td").nth(4)).to_have_text("no")
    assert server.request("GET", f"/documents/{doc_id}").json()["enabled"] is False
    row.locator("text=Enable").click()
    expect(row.locator("td").nth(4)).to_have_text("yes")
    assert server.request("GET", f"/documents/{doc_id}").json()["enabled"] is True

    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("text=Delete").click()
    expect(row).to_have_count(0)
    assert server.request("GET", f"/documents/{doc_id}").status == 404
