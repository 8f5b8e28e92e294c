"""The chat page shows what was searched for a follow-up ("Searched: …", issue 36 item 3), from the
stream's ``sources`` and ``refusal`` events and from a stored conversation; nothing extra when the
search was the message itself. Same driver as ``test_pages_browser.py`` (Debian's Chromium)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_chat_page_browser import PacedModel, _close, _expect, _new_conversation, _page, _sse
from tests.e2e.test_pages_browser import browser  # noqa: F401 (the fixture)
from tests.integration.serving_support import serving

pytestmark = pytest.mark.e2e


def _answer(text: str, query: str) -> dict[str, Any]:
    body = _sse(
        ("answer_start", {"conversationId": "c", "messageId": "m1"}),
        ("answer_delta", {"text": text}),
        ("sources", {"sources": [], "query": query}),
        ("answer_end", {"messageId": "m1", "content": text}),
    )
    return {"status": 200, "content_type": "text/event-stream", "body": body}


def test_the_page_shows_the_searched_question_of_a_follow_up(browser: Any) -> None:  # noqa: F811
    expect = _expect()
    with serving("serve", model=PacedModel(["Hello."])) as served:
        page = _page(browser, served)
        replies: list[dict[str, Any]] = []
        page.route("**/chat/conversations/*/messages", lambda route: route.fulfill(**replies.pop(0)))
        try:
            _new_conversation(page)
            message = page.get_by_label("Message")
            replies.append(_answer("The Boulder store opens at nine.", "When does the Boulder store open?"))
            message.fill("When does the Boulder store open?")
            message.press("Enter")
            first = page.locator(".msg.assistant").nth(0)
            expect(first.locator(".content")).to_have_text("The Boulder store opens at nine.")
            expect(first.locator(".searched")).to_have_count(0)  # the message itself was searched

            replies.append(_answer("At ten on Sundays.", "When does the Boulder store open on Sundays?"))
            message.fill("And on Sundays?")
            message.press("Enter")
            second = page.locator(".msg.assistant").nth(1)
            expect(second.locator(".content")).to_have_text("At ten on Sundays.")
            expect(second.locator(".searched")).to_have_text(
                "Searched: When does the Boulder store open on Sundays?"
            )

            refusal = {"message": "Not in your notes.", "suggestions": [], "query": "Boulder store parking?"}
            replies.append(
                {"status": 200, "content_type": "text/event-stream", "body": _sse(("refusal", refusal))}
            )
            message.fill("Parking?")
            message.press("Enter")
            refused = page.locator(".msg.assistant.refusal")
            expect(refused.locator(".searched")).to_have_text("Searched: Boulder store parking?")
        finally:
            _close(page)
