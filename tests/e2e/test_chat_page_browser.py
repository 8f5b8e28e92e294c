"""The chat page (``/ui``) in headless Chromium against ``ragchat serve``'s server with a chat model that
writes one word each time the test lets it: the answer grows on screen while the model is still
writing, Stop halts it, edit-and-resend, Copy, citation chips; and what the page does with sources,
refusals and rate limits it is sent (answers faked at the browser's network layer), markup included.

Same driver as ``test_pages_browser.py`` (Playwright with Debian's Chromium; skipped without them,
failing on CI).
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_pages_browser import IMG, SCRIPT, browser  # noqa: F401 (the fixture)
from tests.fakes import FakeChatModel
from tests.integration.serving_support import SKY, WAIT, Served, serving

pytestmark = pytest.mark.e2e

WAIT_MS = 20_000  # upper bound for the page to show what the server sent; expect() returns at once
QUESTION = "Why is the sky blue?"
FIRST = [
    "The sky ",
    "looks blue ",
    "because sunlight ",
    "is scattered ",
    "by the air ",
    "[source: n-sky]",
    ".",
]
SECOND = ["The sea ", "mirrors ", "the sky ", f"{IMG} ", "[source: n-sky]", "."]


class PacedModel(FakeChatModel):
    """Streams the next of ``answers`` (a list of deltas per request), one delta per ``release()``; a
    JSON turn (an edit) gets the next answer whole."""

    def __init__(self, *answers: list[str]) -> None:
        super().__init__(lambda _request: "".join(self._answer(len(self.requests) - 1)))
        self.answers = list(answers)
        self.gate: queue.Queue[None] = queue.Queue()
        self.produced = 0
        self.closed = threading.Event()

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self.gate.put(None)

    def _answer(self, n: int) -> list[str]:
        return self.answers[min(n, len(self.answers) - 1)]

    def stream(self, request: Any) -> Iterator[str]:
        words = self._answer(len(self.requests))
        self.requests.append(request)
        self.closed.clear()
        try:
            for word in words:
                self.gate.get(timeout=WAIT)
                self.produced += 1
                yield word
        finally:
            self.closed.set()


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


def _page(browser: Any, served: Served, **context: Any) -> Any:  # noqa: F811
    ctx = browser.new_context(
        base_url=f"http://127.0.0.1:{served.port}", viewport={"width": 1100, "height": 900}, **context
    )
    page = ctx.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    return page


def _close(page: Any) -> None:
    errors = page.errors
    page.context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def _new_conversation(page: Any) -> None:
    expect = _expect()
    page.goto("/ui")
    page.get_by_role("button", name="New conversation").click()
    expect(page.get_by_label("Message")).to_be_visible()


def _messages(served: Served, page: Any) -> list[dict[str, Any]]:
    conv = page.evaluate("current")
    status, _, body = served.call("GET", f"/chat/conversations/{conv}")
    assert status == 200, body
    return list(json.loads(body)["messages"])


def test_the_answer_grows_on_screen_and_stop_halts_it(browser: Any) -> None:  # noqa: F811
    expect = _expect()
    model = PacedModel(FIRST)
    with serving("serve", model=model) as served:
        page = _page(browser, served)
        try:
            _new_conversation(page)
            page.get_by_label("Message").fill(QUESTION)
            page.get_by_label("Message").press("Enter")  # Enter sends
            stop = page.get_by_role("button", name="Stop")
            expect(stop).to_be_visible()
            expect(page.get_by_role("button", name="Send")).to_be_hidden()
            answer = page.locator(".msg.assistant .content")

            model.release()
            expect(answer).to_have_text("The sky")
            model.release()
            expect(answer).to_have_text("The sky looks blue")  # grown, the model still writing
            assert model.produced == 2 and not model.closed.is_set()

            stops: list[str] = []
            page.on("request", lambda r: stops.append(r.method) if r.url.endswith("/stop") else None)
            stop.click()
            expect(stop).to_be_hidden()
            expect(page.get_by_role("button", name="Send")).to_be_visible()
            expect(page.locator(".msg.assistant .note")).to_contain_text("Stopped")
            # The server noticed: the model stream is closed before it wrote every word.
            for _ in FIRST:
                if model.closed.wait(0.5):
                    break
                model.release()
            assert model.closed.wait(WAIT) and model.produced < len(FIRST)
            expect(answer).to_have_text("The sky looks blue")  # nothing more reached the page
            assert stops == ["POST"]  # the stop route, from another request
            stored = _messages(served, page)
            assert [m["role"] for m in stored] == ["user", "assistant"]
            assert stored[1].get("interrupted") is True
            assert stored[1]["content"].startswith("The sky looks blue")
        finally:
            _close(page)


def test_escape_stops_the_answer(browser: Any) -> None:  # noqa: F811
    expect = _expect()
    model = PacedModel(FIRST)
    with serving("serve", model=model) as served:
        page = _page(browser, served)
        try:
            _new_conversation(page)
            page.get_by_label("Message").fill(QUESTION)
            page.get_by_role("button", name="Send").click()
            model.release()
            expect(page.locator(".msg.assistant .content")).to_have_text("The sky")
            page.keyboard.press("Escape")
            expect(page.get_by_role("button", name="Stop")).to_be_hidden()
            expect(page.locator(".msg.assistant .note")).to_contain_text("Stopped")
        finally:
            model.release(len(FIRST))
            _close(page)


def test_citations_copy_and_edit_and_resend(browser: Any) -> None:  # noqa: F811
    expect = _expect()
    model = PacedModel(FIRST, SECOND)
    with serving("serve", model=model) as served:
        page = _page(browser, served, permissions=["clipboard-read", "clipboard-write"])
        try:
            _new_conversation(page)
            message = page.get_by_label("Message")
            message.fill(QUESTION)
            message.press("Shift+Enter")  # a new line, not a send
            expect(message).to_have_value(QUESTION + "\n")
            expect(page.locator(".msg")).to_have_count(0)
            message.press("Enter")
            model.release(len(FIRST))
            answer = page.locator(".msg.assistant")
            expect(answer.get_by_role("button", name="Copy")).to_be_visible(timeout=WAIT_MS)
            expect(answer.locator(".content")).to_have_text(
                "The sky looks blue because sunlight is scattered by the air[1]."
            )
            assert "[source:" not in answer.inner_text() and "Sources:" not in answer.inner_text()

            chip = answer.locator(".sources .chip")
            expect(chip).to_have_count(1)
            chip.click()  # the side panel: the cited passage whole, one click from its document
            panel = page.get_by_role("dialog")
            expect(panel).to_be_visible()
            expect(panel.locator(".passage")).to_contain_text(SKY)
            expect(panel.get_by_role("button", name="Open document")).to_be_visible()
            assert "n-sky" not in answer.inner_text()  # never the raw note id
            panel.get_by_role("button", name="Close").click()
            expect(panel).to_be_hidden()
            answer.get_by_role("button", name="Source 1").click()  # the inline marker opens it too
            expect(panel.locator(".passage")).to_contain_text(SKY)
            page.keyboard.press("Escape")
            expect(panel).to_be_hidden()

            answer.get_by_role("button", name="Copy").click()
            expect(answer.get_by_role("status")).to_have_text("Copied")
            copied = page.evaluate("navigator.clipboard.readText()")
            assert copied == "The sky looks blue because sunlight is scattered by the air."

            user = page.locator(".msg.user")
            user.hover()
            user.get_by_role("button", name="Edit").click()
            page.get_by_label("Edited text").fill("Why is the sea blue?")
            page.get_by_role("button", name="Save and send").click()
            model.release(len(SECOND))
            expect(page.locator(".msg")).to_have_count(2)
            expect(user.locator(".content")).to_have_text("Why is the sea blue?")
            expect(answer.get_by_role("button", name="Copy")).to_be_visible(timeout=WAIT_MS)
            expect(answer.locator(".content")).to_contain_text(f"mirrors the sky {IMG}")  # markup as text
            assert page.evaluate("window.__xss") is None
            assert page.evaluate("document.querySelectorAll('img').length") == 0
            stored = _messages(served, page)
            assert [(m["role"], m["content"][:20]) for m in stored] == [
                ("user", "Why is the sea blue?"),
                ("assistant", "The sea mirrors the "),
            ]
        finally:
            _close(page)


def _sse(*events: tuple[str, dict[str, Any]]) -> str:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


HOSTILE_SOURCES = [
    {"id": "a1", "documentId": "d1", "title": f"Guide {SCRIPT}", "page": 3, "text": f"Snippet {IMG} one"},
    *(
        {"id": f"a{i}", "documentId": f"d{i}", "title": f"Note {i}", "text": f"Snippet {i}"}
        for i in range(2, 6)
    ),
]
# A stored snippet is the note's first 160 characters, spaces collapsed: Markdown marks, a word cut
# (shown as the passage when its note is gone).
RAW_SNIPPET = (
    "## Opening hours The **reading room** opens at nine on weekdays and at ten on Saturdays; "
    "the archive opens by appointment only, booked one week in advance at the front desk."
)[:160]
HOSTILE_SOURCES[1]["text"] = RAW_SNIPPET
HOSTILE_ANSWER = (
    f"Read the guide {SCRIPT} [source: a1] and the rest [source: a4].[click](javascript:window.__xss=3)"
    "\n\nSources: a1, a4"
)


def test_sources_refusals_and_rate_limits_as_sent(browser: Any) -> None:  # noqa: F811
    expect = _expect()
    with serving("serve", model=PacedModel(FIRST)) as served:
        page = _page(browser, served)
        replies: list[dict[str, Any]] = []
        page.route("**/chat/conversations/*/messages", lambda route: route.fulfill(**replies.pop(0)))
        try:
            _new_conversation(page)
            message = page.get_by_label("Message")
            replies.append(
                {
                    "status": 200,
                    "content_type": "text/event-stream",
                    "body": _sse(
                        ("answer_start", {"conversationId": "c", "messageId": "m1"}),
                        ("answer_delta", {"text": HOSTILE_ANSWER}),
                        ("sources", {"sources": HOSTILE_SOURCES}),
                        ("answer_end", {"messageId": "m1", "content": HOSTILE_ANSWER}),
                    ),
                }
            )
            message.fill("What does the guide say?")
            message.press("Enter")
            answer = page.locator(".msg.assistant")
            shown = f"Read the guide {SCRIPT}[1] and the rest[4].click"
            expect(answer.locator(".content")).to_have_text(shown)
            expect(answer.locator(".content a")).to_have_count(0)  # [click](javascript:…) is no link
            expect(answer.locator(".content")).not_to_contain_text("Sources:")
            chips = answer.locator(".chip")
            expect(chips.filter(visible=True)).to_have_count(3)  # three, then "Show more sources"
            expect(chips.nth(0)).to_have_text(f"1Guide {SCRIPT} · p. 3")
            page.get_by_role("button", name="Show more sources (2)").click()
            expect(chips.filter(visible=True)).to_have_count(5)
            chips.nth(0).click()  # a source whose note is gone: the stored text, said so, as text
            panel = page.get_by_role("dialog")
            expect(panel.locator("#panel-title")).to_have_text(f"Guide {SCRIPT} · p. 3")
            expect(panel.locator(".passage")).to_contain_text(f"Snippet {IMG} one")
            expect(panel.locator(".passage")).to_contain_text("no longer in your documents")
            chips.nth(1).click()
            expect(panel.locator(".passage")).to_contain_text("The reading room opens at nine")
            expect(panel.locator(".passage")).not_to_contain_text("**")
            expect(panel.locator(".passage")).to_contain_text("one week in advance at…")  # not "at th"
            expect(panel.locator(".passage")).not_to_contain_text("at th")
            answer.get_by_role("button", name="Source 4").click()
            expect(panel.locator(".passage")).to_contain_text("Snippet 4")
            page.keyboard.press("Escape")
            assert page.evaluate("window.__xss") is None
            assert page.evaluate("document.querySelectorAll('img').length") == 0

            refusal = {
                "message": "I could not find this in your notes.",
                "suggestions": ["Add a note about it"],
            }
            replies.append(
                {"status": 200, "content_type": "text/event-stream", "body": _sse(("refusal", refusal))}
            )
            message.fill("What is the capital of Mars?")
            message.press("Enter")
            refused = page.locator(".msg.assistant.refusal")
            expect(refused.locator(".refusal-label")).to_have_text("Not answered from your notes")
            expect(refused.locator(".content")).to_have_text("I could not find this in your notes.")
            expect(refused.locator(".suggestions li")).to_have_text(["Add a note about it"])

            limited = {"error": "Too many requests", "retryAfter": 12}
            replies.append({"status": 429, "json": limited, "headers": {"Retry-After": "12"}})
            message.fill("One more question")
            message.press("Enter")
            expect(page.locator("#chat-error")).to_have_text(
                "Too many requests. Please wait 12 s and try again."
            )
            expect(message).to_have_value("One more question")  # the typed text survives
            expect(page.locator(".msg")).to_have_count(4)  # the refused send left nothing behind

            replies.append({"status": 500, "json": {"error": "Internal error"}})
            message.press("Enter")
            expect(page.locator("#chat-error")).to_have_text(
                "Something went wrong on the server (Internal error). Please try again."
            )
            expect(message).to_have_value("One more question")
        finally:
            _close(page)


def test_conversations_listed_newest_first_and_deleted(browser: Any) -> None:  # noqa: F811
    expect = _expect()
    with serving("serve", model=PacedModel(FIRST)) as served:
        for collection in ("older", "newer"):
            status, _, body = served.call("POST", "/chat/conversations", {"collection": collection})
            assert status == 201, body
            served.api.clock.advance(5)
        page = _page(browser, served)
        try:
            page.goto("/ui")
            items = page.locator("#convs li")
            expect(items).to_have_count(2)
            expect(items.nth(0)).to_contain_text("newer")
            expect(items.nth(1)).to_contain_text("older")
            expect(items.get_by_role("button", name="Rename")).to_have_count(2)  # PATCH is in /openapi.json
            page.once("dialog", lambda dialog: dialog.accept())
            items.nth(0).get_by_role("button", name="Delete New conversation").click()
            expect(items).to_have_count(1)
            expect(items.nth(0)).to_contain_text("older")
            status, _, body = served.call("GET", "/chat/conversations")
            assert [c["collection"] for c in json.loads(body)["items"]] == ["older"]
        finally:
            _close(page)


def test_a_conversation_is_renamed_from_the_list(browser: Any) -> None:  # noqa: F811
    expect = _expect()
    with serving("serve", model=PacedModel(FIRST)) as served:
        status, _, body = served.call("POST", "/chat/conversations", {"title": "Old title"})
        assert status == 201, body
        conv_id = json.loads(body)["id"]
        page = _page(browser, served)
        try:
            page.goto("/ui")
            items = page.locator("#convs li")
            expect(items).to_have_count(1)
            items.nth(0).get_by_role("button", name="Rename Old title").click()
            field = page.get_by_label("New title")
            expect(field).to_be_focused()
            field.fill("<b>Sky</b> notes")
            field.press("Enter")
            expect(items.nth(0)).to_contain_text("<b>Sky</b> notes")  # shown as text, not markup
            expect(items.nth(0).locator("b")).to_have_count(0)
            status, _, body = served.call("GET", f"/chat/conversations/{conv_id}")
            assert status == 200 and json.loads(body)["title"] == "<b>Sky</b> notes"
            # a blank title is refused in plain words and the old one stays
            items.nth(0).get_by_role("button", name="Rename").click()
            page.get_by_label("New title").fill("   ")
            page.get_by_label("New title").press("Enter")
            expect(page.locator("#chat-error")).to_contain_text("blank")
            status, _, body = served.call("GET", f"/chat/conversations/{conv_id}")
            assert json.loads(body)["title"] == "<b>Sky</b> notes"
        finally:
            _close(page)
