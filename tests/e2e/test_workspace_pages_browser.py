"""Workspaces run from the pages, and the page details of issue 45, as two people use them in headless
Chromium against ``ragchat serve`` with a users file: Ana owns "Harbour team", Vic is its viewer.

- a viewer's start page counts the team's documents (never "You have no documents yet"), the
  Documents page shows no Disable/Delete and says what the role allows, the Add page offers no team
  it cannot add to, and the switcher is reachable at 390 px without opening the menu;
- an owner creates a workspace, renames it and changes a member's role from the page; a file attached
  under "All my workspaces" says where it goes;
- the first visit fetches no /openapi.json and /favicon.ico is an icon; the conversation list shows
  dates and its search finds words said, not only titles; Export downloads readable Markdown.

Screenshots at 1280 and 390 px are written to ``RAGCHAT_UI_SCREENSHOTS`` when it names a folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import TOKEN, Server, run_server
from tests.e2e.test_pages_browser import WAIT_MS, _expect, browser

pytestmark = pytest.mark.e2e
__all__ = ["browser"]

SHOTS = os.environ.get("RAGCHAT_UI_SCREENSHOTS")
HARBOUR = (
    "Harbour rules. Visiting crews pay a mooring fee of twelve crowns per night. "
    "The harbour master's office opens at six in the morning."
)


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / name), full_page=False)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, str], str]]:
    from ragchat.serving.users import add_user

    data = tmp_path_factory.mktemp("ws-pages")
    users_file = data / "users.json"
    tokens = {name: add_user(users_file, name) for name in ("ana", "vic")}
    with run_server(data, env={"RAGCHAT_USERS_FILE": str(users_file)}) as server:
        ws = server.request("POST", "/workspaces", body={"name": "Harbour team"}, token=tokens["ana"]).json()[
            "id"
        ]
        put = server.request(
            "PUT", f"/workspaces/{ws}/members/vic", body={"role": "viewer"}, token=tokens["ana"]
        )
        assert put.status == 200, put.body
        note = {"title": "harbour-rules.txt", "text": HARBOUR, "workspace": ws}
        doc = server.request("POST", "/notes", body=note, token=tokens["ana"]).json()["documentId"]
        server.token = tokens["ana"]
        assert server.wait_document(doc)["status"] == "READY"
        server.token = TOKEN
        yield server, tokens, ws


def _signed_in_as(token: str) -> str:
    return f"""try {{ if (location.protocol.startsWith('http') && !localStorage.getItem('ragchat.session')) {{
  const x = new XMLHttpRequest(); x.open('POST', '/session', false);
  x.setRequestHeader('Authorization', 'Bearer {token}'); x.send();
  if (x.status === 200) localStorage.setItem('ragchat.session', JSON.parse(x.responseText).csrf); }}
}} catch (e) {{}}"""


@contextmanager
def _as(browser: Any, server: Server, token: str, width: int = 1280) -> Iterator[Any]:
    context = browser.new_context(
        base_url=server.url,
        viewport={"width": width, "height": 860 if width > 500 else 844},
        accept_downloads=True,
    )
    context.add_init_script(_signed_in_as(token))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield page
        assert not errors, errors
    finally:
        context.close()


def test_a_viewer_sees_the_teams_documents_and_only_what_the_role_allows(browser: Any, team: Any) -> None:
    expect = _expect()
    server, tokens, ws = team
    with _as(browser, server, tokens["vic"]) as page:
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url))
        page.goto("/ui")
        expect(page.locator("#workspace")).to_be_visible(timeout=WAIT_MS)
        expect(page.locator("#suggested")).to_contain_text("What do my documents say about harbour rules?")
        expect(page.get_by_text("You have no documents yet")).to_be_hidden()
        page.wait_for_load_state("networkidle")
        assert not [u for u in fetched if "openapi.json" in u], fetched  # the first visit stays light
        _shot(page, "ws-viewer-start-1280.png")

        page.evaluate(f"sessionStorage.setItem('ragchat.workspace', '{ws}')")
        page.goto("/documents/ui")
        row = page.locator("#rows tr").filter(has_text="harbour-rules.txt")
        expect(row).to_contain_text("READY", timeout=WAIT_MS)
        expect(row.get_by_role("button", name=re.compile("View"))).to_be_visible()
        expect(row.get_by_role("button", name="Disable")).to_have_count(0)
        expect(row.get_by_role("button", name="Delete")).to_have_count(0)
        expect(page.locator("#members .role-says")).to_contain_text("You are a viewer here", timeout=WAIT_MS)
        expect(page.locator("#rename-workspace")).to_have_count(0)
        expect(page.locator("#members select")).to_have_count(0)
        _shot(page, "ws-viewer-documents-1280.png")

        page.goto("/write")  # the team is shown, not offered, and not preselected
        expect(page.locator("#workspace")).to_have_value("", timeout=WAIT_MS)
        option = page.locator(f"#workspace option[value='{ws}']")
        expect(option).to_be_disabled()
        expect(option).to_have_text("Harbour team (viewer: cannot add here)")
    with _as(browser, server, tokens["vic"], width=390) as page:
        page.goto("/ui")  # the switcher is in the header, not only in the closed drawer
        expect(page.locator("#workspace")).to_be_visible(timeout=WAIT_MS)
        expect(page.locator("#sidebar")).not_to_be_in_viewport()
        _shot(page, "ws-viewer-start-390.png")
    assert server.request("GET", "/favicon.ico", token=False).status == 200


def test_an_owner_creates_renames_and_sets_roles_from_the_page(browser: Any, team: Any) -> None:
    expect = _expect()
    server, tokens, ws = team
    with _as(browser, server, tokens["ana"]) as page:
        page.goto("/documents/ui")
        page.locator("#workspace").select_option(ws)
        vic = page.get_by_label("Role of vic")
        expect(vic).to_have_value("viewer", timeout=WAIT_MS)
        with page.expect_response(lambda r: r.request.method == "PUT" and "/members/vic" in r.url):
            vic.select_option("editor")
        expect(page.get_by_label("Role of vic")).to_have_value("editor")
        roles = server.request("GET", f"/workspaces/{ws}/members", token=tokens["ana"]).json()["items"]
        assert ("vic", "editor") in {(m["userId"], m["role"]) for m in roles}
        _shot(page, "ws-owner-members-1280.png")

        page.click("#new-workspace")
        page.fill("#new-ws-name", "Lighthouse")
        page.locator("#new-ws-form button[type=submit]").click()
        expect(page.locator("#members h2")).to_have_text("Members of Lighthouse", timeout=WAIT_MS)
        page.click("#rename-workspace")
        page.fill("#workspace-name", "Lighthouse keepers")
        page.keyboard.press("Enter")
        expect(page.locator("#members h2")).to_have_text("Members of Lighthouse keepers", timeout=WAIT_MS)
        names = {w["name"] for w in server.request("GET", "/workspaces", token=tokens["ana"]).json()["items"]}
        assert {"Harbour team", "Lighthouse keepers"} <= names
        # put vic back for the other test's order independence
        server.request("PUT", f"/workspaces/{ws}/members/vic", body={"role": "viewer"}, token=tokens["ana"])

        page.goto("/ui")  # "All my workspaces": an attached file says where it goes
        page.locator("#workspace").select_option("")
        _shot(page, "ws-owner-start-1280.png")
        page.locator("#attach-file").set_input_files(
            files=[{"name": "lamp.txt", "mimeType": "text/plain", "buffer": b"The lamp burns paraffin oil."}]
        )
        expect(page.locator("#attached")).to_contain_text(
            "Adding to Personal (choose a workspace above", timeout=WAIT_MS
        )
        expect(page.locator("#attached")).to_contain_text("READY", timeout=WAIT_MS)


def test_export_search_by_what_was_said_and_dates_in_the_list(browser: Any, team: Any) -> None:
    expect = _expect()
    server, tokens, ws = team
    with _as(browser, server, tokens["ana"]) as page:
        page.goto("/ui")
        page.locator("#workspace").select_option(ws)
        page.fill("#message", "How much is the mooring fee for visiting crews?")
        page.click("#send")
        answer = page.locator(".msg.assistant")
        expect(answer.locator(".content")).to_contain_text("twelve crowns", timeout=WAIT_MS)
        expect(page.locator("#convs li").first).to_contain_text(re.compile(r"messages · \S"))  # a date
        with page.expect_download() as got:
            page.click("#export")
        text = Path(got.value.path()).read_text(encoding="utf-8")
        assert text.startswith("# ") and "## Sources" in text
        assert re.search(r"## User — \d{1,2} \w{3} \d{4}, \d{2}:\d{2} UTC", text), text
        assert not re.search(r"\d{2}:\d{2}:\d{2}\.\d{3}", text) and "(guard)" not in text
        page.click("#new-conv-button")
        page.fill("#message", "Something else entirely about lunch?")
        page.click("#send")
        expect(page.locator(".msg.assistant")).to_have_count(1, timeout=WAIT_MS)
        page.fill("#conv-search", "crowns")  # said in the answer, not in any title
        listed = page.locator("#convs li")
        expect(listed).to_have_count(1)
        expect(listed).to_contain_text("mooring fee")
        _shot(page, "chat-search-said-1280.png")
