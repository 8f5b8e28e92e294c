"""The workspace switcher and the members panel (issue 32) in headless Chromium against ``ragchat
serve``: the Documents page lists the chosen workspace's documents and lets its owner add a member,
the Add page writes into the chosen workspace, and a new conversation on the chat page is pinned to
it. Same driver and skip rules as ``test_pages_browser.py``."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import Server
from tests.e2e.test_pages_browser import SIGNED_IN, _expect, browser, fresh_page  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e


def test_switching_workspace_on_the_pages(browser: Any, server: Server) -> None:  # noqa: F811
    expect = _expect()
    # with the personal workspace alone there is nothing to choose: no switcher, and its script and
    # styles are not fetched (page weight, issue 33)
    assert len(server.request("GET", "/workspaces").json()["items"]) == 1
    with fresh_page(browser, server, init_script=SIGNED_IN) as page:
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url))
        for path in ("/documents/ui", "/write", "/ui"):
            page.goto(path)
            page.wait_for_load_state("networkidle")
            expect(page.locator("#app")).to_be_visible()
            expect(page.locator("#workspace")).to_have_count(0)
        assert [u for u in fetched if "/static/workspaces." in u] == []
        assert any(u.endswith("/workspaces") for u in fetched)  # it did ask
    ws = server.request("POST", "/workspaces", body={"name": "Lighthouse team"}).json()["id"]
    note = {
        "title": "Keeper rota",
        "text": "The keeper of the Zephyr light changes every Sunday.",
        "workspace": ws,
    }
    doc_id = server.request("POST", "/notes", body=note).json()["documentId"]
    assert server.wait_document(doc_id)["status"] == "READY"
    with fresh_page(browser, server, init_script=SIGNED_IN) as page:
        page.goto("/documents/ui")
        select = page.locator("#workspace")
        expect(select.locator("option")).to_have_count(
            len(server.request("GET", "/workspaces").json()["items"])
        )
        expect(page.locator(f"tr[data-id='{doc_id}']")).to_have_count(0)  # the personal workspace first
        select.select_option(ws)
        expect(page.locator(f"tr[data-id='{doc_id}']")).to_contain_text("READY")
        expect(page.get_by_label("Role of local")).to_have_value("owner")  # an owner sees role pickers
        page.fill("#member-user", "bob")
        page.select_option("#member-role", "editor")
        page.locator("#members button[type=submit]").click()
        expect(page.get_by_label("Role of bob")).to_have_value("editor")
        roles = server.request("GET", f"/workspaces/{ws}/members").json()["items"]
        assert {(m["userId"], m["role"]) for m in roles} == {("local", "owner"), ("bob", "editor")}

        # a source's "Open in Documents" link to a document of another workspace switches to it
        page.evaluate("sessionStorage.setItem('ragchat.workspace', '')")
        page.goto("/write")  # (a new page load: the same URL with another #fragment would not reload)
        page.goto(f"/documents/ui#{doc_id}")
        expect(page.locator(f"tr[data-id='{doc_id}'].linked")).to_be_visible()
        expect(page.locator("#workspace")).to_have_value(ws)

        page.goto("/write")  # the choice is kept for this tab
        expect(page.locator("#workspace")).to_have_value(ws)
        page.fill("#title", "Lamp oil")
        page.fill("#text", "The lamp burns paraffin oil delivered by boat each month.")
        page.locator("#f button").click()
        expect(page.locator("#status")).to_contain_text("READY", timeout=60_000)
        titles = [d["title"] for d in server.request("GET", f"/documents?workspace={ws}").json()["items"]]
        assert "Lamp oil" in titles

        page.goto("/ui")
        expect(page.locator("#workspace")).to_have_value(ws)
        page.locator("#new-conv-button").click()  # the start page: the first message makes it
        page.fill("#message", "What does the lamp burn?")
        page.click("#send")
        expect(page).to_have_url(re.compile(r"/ui/c/[^/]+$"))
        convs = server.request("GET", "/chat/conversations").json()["items"]
        assert convs[0]["workspace"] == ws
