"""Searching conversations on the chat page when there are more than the sidebar lists (200): an old
conversation is still found, by the server (``?q=``), in headless Chromium against ``ragchat serve``'s
server over in-memory fakes (its own server: this module fills it with conversations)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_chat_page_features_browser import _close, _expect, _page
from tests.e2e.test_pages_browser import browser  # noqa: F401 (the fixture)
from tests.fakes import FakeChatModel
from tests.integration.serving_support import Served, serving

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with serving("serve", model=FakeChatModel(lambda _request: "unused")) as srv:
        yield srv


def _create(served: Served, title: str) -> None:
    status, _, raw = served.call("POST", "/chat/conversations", {"title": title})
    assert status == 201, (status, raw)
    json.loads(raw)


def test_an_old_conversation_beyond_the_listed_200_is_found(browser: Any, served: Served) -> None:  # noqa: F811
    expect = _expect()
    _create(served, "Lighthouse maintenance log")  # the oldest: not among the 200 newest
    for i in range(205):
        _create(served, f"Daily standup {i}")
    page = _page(browser, served)
    try:
        page.goto("/ui")
        items = page.locator("#convs li")
        expect(items).to_have_count(200)
        expect(items.filter(has_text="Lighthouse")).to_have_count(0)
        search = page.get_by_label("Search conversations")
        search.fill("lighthouse LOG")
        expect(items).to_have_count(1)
        expect(items).to_contain_text("Lighthouse maintenance log")
        search.fill("standup 3")  # "3" anywhere in the title, among all 205 (3 itself is not listed)
        expect(items).to_have_count(sum("3" in str(i) for i in range(205)))
        expect(items.get_by_text("Daily standup 3", exact=True)).to_have_count(1)
        search.press("Escape")
        expect(items).to_have_count(200)
    finally:
        _close(page)
