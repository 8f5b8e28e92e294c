"""The /write page says when a file was already there: the same file uploaded twice in headless
Chromium against ``ragchat serve`` is one document, and the second upload says "Already uploaded";
changed bytes under the same name say "New version" and stay one document."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Server
from tests.e2e.test_pages_browser import WAIT_MS, _expect, browser, page

pytestmark = pytest.mark.e2e
__all__ = ["browser", "page"]  # the fixtures this module borrows


def test_the_same_file_twice_on_write_is_one_document(page: Any, server: Server) -> None:
    expect = _expect()
    body = b"# Bakery\n\nThe Juniper bakery sells rye loaves until noon on Sundays.\n"
    page.goto("/write")
    page.fill("#collection", "browser-dupes")
    upload = {"name": "bakery.md", "mimeType": "text/markdown", "buffer": body}
    page.set_input_files("#file", files=[upload])
    page.get_by_role("button", name="Upload").click()
    lines = page.locator("#uploads li .file-status")
    expect(lines.nth(0)).to_contain_text("READY", timeout=WAIT_MS)
    page.set_input_files("#file", files=[upload])
    page.get_by_role("button", name="Upload").click()
    expect(lines.nth(1)).to_contain_text("Already uploaded, unchanged: “bakery.md”", timeout=WAIT_MS)
    listed = server.request("GET", "/documents?collection=browser-dupes").json()["items"]
    assert [(d["title"], d["status"]) for d in listed] == [("bakery.md", "READY")]
    edited = {**upload, "buffer": body.replace(b"noon", b"two o'clock")}
    page.set_input_files("#file", files=[edited])
    page.get_by_role("button", name="Upload").click()
    expect(lines.nth(2)).to_contain_text("New version of bakery.md", timeout=WAIT_MS)
    expect(lines.nth(2)).to_contain_text("READY", timeout=WAIT_MS)
    listed = server.request("GET", "/documents?collection=browser-dupes").json()["items"]
    assert [(d["title"], d["status"]) for d in listed] == [("bakery.md", "READY")]
