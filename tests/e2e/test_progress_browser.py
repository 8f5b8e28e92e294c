"""Issue 45 items 3 and 5 in headless Chromium against ``ragchat serve``: the Documents tab, open
before anything is added, shows a new document without a reload and follows its indexing (chunks
done / total, then READY); the Add page clears the note once it is added and says so when the same
note is added again."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import Server
from tests.e2e.test_pages_browser import WAIT_MS, _expect, browser, page

pytestmark = pytest.mark.e2e
__all__ = ["browser", "page"]  # the fixtures this module borrows


def big_text(paragraphs: int = 140) -> str:
    """Distinct paragraphs of about 450 characters each: three batches of chunks, indexed over a few
    seconds (a chunk per paragraph)."""
    words = ["harbour", "lantern", "gull", "ferry", "tide", "rope", "pier", "anchor", "sail", "buoy"]
    return "\n\n".join(
        f"Logbook entry {n}: the {words[n % 10]} by berth {n * 7 % 113} was checked at {n % 24}:00 "
        f"and the {words[(n * 3) % 10]} crew of vessel {n} reported calm water, {n % 17} knots of wind, "
        f"a {words[(n * 7) % 10]} to repair and visibility of {n % 9 + 1} nautical miles from the "
        f"lighthouse on the northern breakwater, as noted in the harbour master's ledger page {n * 13}. "
        "Weather observations continued through the watch until the morning bell."
        for n in range(paragraphs)
    )


def test_the_add_page_clears_the_note_and_flags_the_same_note_again(page: Any, server: Server) -> None:
    expect = _expect()
    page.goto("/write")
    note = "The Quillon ferry to Mallow Island leaves pier four at 7:15 on weekdays."
    page.fill("#title", "Ferry times")
    page.fill("#text", note)
    page.get_by_role("button", name="Add note").click()
    # first in this module: the big document of the next test keeps the server's reader busy
    expect(page.locator("#status")).to_have_text("“Ferry times”: READY", timeout=3 * WAIT_MS)
    expect(page.locator("#text")).to_have_value("")  # cleared: a second click adds nothing
    expect(page.locator("#title")).to_have_value("")
    page.fill("#text", note)
    page.get_by_role("button", name="Add note").click()
    expect(page.locator("#status")).to_contain_text(
        re.compile(r"Already there: “Ferry times” \(\w+\) has exactly this content"), timeout=WAIT_MS
    )
    titles = [d["title"] for d in server.request("GET", "/documents?limit=100").json()["items"]]
    assert titles.count("Ferry times") == 1


def test_the_documents_tab_shows_a_new_document_and_its_progress_without_reload(
    page: Any, server: Server
) -> None:
    expect = _expect()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/documents/ui")
    expect(page.locator("#refresh")).to_be_visible()
    loads = []
    page.on("framenavigated", lambda frame: loads.append(frame.url))

    res = server.request("POST", "/notes", body={"title": "Harbour logbook", "text": big_text()})
    assert res.status == 202, res.body
    # added elsewhere (as `ragchat ingest` would): shown when the tab is shown again (or within a
    # minute; the page no longer re-reads the list every 3 s: test_page_leftovers_browser.py)
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    row = page.locator("#rows tr").filter(has_text="Harbour logbook")
    expect(row).to_have_count(1, timeout=WAIT_MS)  # appeared: nobody reloaded the page
    progress = row.locator(".doc-progress")
    expect(progress).to_contain_text(re.compile(r"\d+ / \d+ chunks \(\d+%\)"), timeout=WAIT_MS)
    expect(page.locator("#doc-live")).to_contain_text("being indexed")
    page.screenshot(path=str(server.log.parent / "documents-progress-1280.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(server.log.parent / "documents-progress-390.png"))
    expect(row.locator(".badge")).to_have_text("READY", timeout=5 * WAIT_MS)
    expect(row.locator(".doc-progress")).to_have_count(0)
    assert loads == []  # no navigation at all: the list moved on by itself
