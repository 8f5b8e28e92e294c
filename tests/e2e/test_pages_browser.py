"""The HTML pages (``/ui``, ``/write``, ``/documents/ui``) driven in headless Chromium against
``ragchat serve`` (real embedder, SQLite, extractive answerer).

Driver: Playwright for Python with Debian's Chromium (``executable_path``; Playwright's own browser
download is not used). Without Playwright or Chromium the tests skip with the reason, except on CI
(``CI=true``), where they fail: there ``make test`` installs both.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import TOKEN, Server, run_server

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


# What the token sign-in form does (the sign-in itself: test_token_sign_in_...): the token traded for the
# session cookie (``POST /session``) and this origin's half of it kept in localStorage, once per tab.
SIGNED_IN = f"""try {{ if (location.protocol.startsWith('http')
    && !localStorage.getItem('ragchat.session')) {{
  const x = new XMLHttpRequest(); x.open('POST', '/session', false);
  x.setRequestHeader('Authorization', 'Bearer {TOKEN}'); x.send();
  if (x.status === 200) localStorage.setItem('ragchat.session', JSON.parse(x.responseText).csrf); }}
}} catch (e) {{}}"""


@contextmanager
def fresh_page(browser: Any, server: Server, *, init_script: str | None = None) -> Iterator[Any]:
    """A tab that fails on any JavaScript error; never signed in unless ``init_script`` does it (the
    ``page`` fixture presets the token that way)."""
    context = browser.new_context(base_url=server.url, viewport={"width": 1100, "height": 900})
    if init_script:
        context.add_init_script(init_script)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield pg
        assert not errors, f"JavaScript errors on the page: {errors}"
    finally:
        context.close()


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Any]:
    # The local server wants the bearer token on every API call: the tab starts signed in.
    with fresh_page(browser, server, init_script=SIGNED_IN) as pg:
        yield pg


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
    page.get_by_role("button", name="Add note").click()
    expect(page.locator("#status")).to_have_text("“Written in the browser”: READY", timeout=WAIT_MS)
    (doc,) = server.request("GET", "/documents?collection=browser-write").json()["items"]
    assert (doc["title"], doc["collection"], doc["status"]) == (
        "Written in the browser",
        "browser-write",
        "READY",
    )


def test_upload_a_file_on_write_with_progress_until_ready(page: Any, server: Server) -> None:
    expect = _expect()
    page.goto("/write")
    page.fill("#collection", "browser-upload")
    body = b"# Harbour\n\nThe Pelican ferry leaves the harbour at dawn.\n" * 300  # ~16 KB
    page.set_input_files("#file", files=[{"name": "harbour.md", "mimeType": "text/markdown", "buffer": body}])
    page.get_by_role("button", name="Upload").click()
    line = page.locator("#uploads li").filter(has_text="harbour.md")
    expect(line.locator(".file-status")).to_have_text("“harbour.md”: READY", timeout=WAIT_MS)
    (doc,) = server.request("GET", "/documents?collection=browser-upload").json()["items"]
    assert (doc["title"], doc["collection"], doc["status"]) == ("harbour.md", "browser-upload", "READY")


def test_the_start_page_composer_answers_and_cites(page: Any, notes: dict[str, str]) -> None:
    """One composer on the start page: the first message starts a conversation (at its address)."""
    expect = _expect()
    page.goto("/ui")
    page.fill("#message", "Who built the Zephyr lighthouse on Mallow Island?")
    page.click("#send")
    answer = page.locator(".msg.assistant")
    expect(answer).to_contain_text("Ada Quill", timeout=WAIT_MS)
    expect(page).to_have_url(re.compile(r"/ui/c/[^/]+$"))
    source = answer.locator(".sources li").filter(has_text="Zephyr lighthouse")
    expect(source).to_have_count(1)
    source.locator(".chip").click()  # the source opens in the side panel, then its document
    panel = page.get_by_role("dialog")
    expect(panel.locator(".passage mark").first).to_contain_text("Ada Quill")
    panel.get_by_role("button", name="Open document").click()
    expect(panel.locator(".doc-text")).to_contain_text("twenty-two nautical miles")


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
    page.reload()  # the conversation's own address: it is open again at once
    expect(page.locator("#messages .msg")).to_have_count(4)
    item = (
        page.locator("#convs li")
        .filter(has_text="Who built the Zephyr lighthouse")
        .filter(has_text="browser")
    )
    expect(item).to_have_count(1)
    expect(item).to_contain_text("4 messages")
    item.locator("button.open").click()
    expect(page.locator("#messages .msg")).to_have_count(4)
    expect(page.locator(".msg.assistant .sources li")).not_to_have_count(0)


def test_chat_shows_the_api_error_and_keeps_the_message(page: Any, server: Server) -> None:
    expect = _expect()
    page.goto("/ui")
    page.click("#new-conv-button")
    expect(page.locator("#chat-form")).to_be_visible()
    page.fill("#message", "   ")  # passes the form's `required`, is empty once sanitized → 400
    page.click("#send")
    expect(page).to_have_url(re.compile(r"/ui/c/[^/]+$"))  # the first message made the conversation
    conv_id = page.evaluate("current")
    res = server.request("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "   "})
    assert res.status == 400
    expect(page.locator("#chat-error")).to_have_text(res.json()["error"])  # the API's words, no prefix
    expect(page.locator("#message")).to_have_value("   ")
    expect(page.locator(".msg")).to_have_count(0)


def test_markup_in_documents_is_shown_as_text_never_run(page: Any, hostile: str) -> None:
    expect = _expect()

    def assert_inert(files: int) -> None:
        assert page.evaluate("window.__xss") is None
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        # the page's files + the JSON config (workspaces.js comes only for a user in a shared workspace,
        # which another test of this session may have made)
        scripts = "[...document.scripts].filter(s => !s.src.endsWith('/static/workspaces.js')).length"
        assert page.evaluate(scripts) == files + 1
        runnable = "[...document.scripts].filter(s => s.type !== 'application/json' && !s.src).length"
        assert page.evaluate(runnable) == 0  # every script loaded from a file (CSP script-src 'self')

    page.goto("/documents/ui")
    row = page.locator(f"tr[data-id='{hostile}']")
    expect(row).to_contain_text(f"Hostile {SCRIPT}{IMG}")
    expect(row).to_contain_text("READY")
    assert_inert(2)  # common.js, documents.js

    page.goto("/ui")
    page.fill("#collection", "browser-xss")
    page.click("#new-conv-button")
    page.fill("#message", "What is written in the quokka cipher memo?")
    page.click("#send")
    expect(page.locator(".msg.assistant .sources li").filter(has_text=IMG)).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator(".msg.assistant .sources li").filter(has_text=SCRIPT)).to_have_count(1)
    assert_inert(5)  # common.js, marked, DOMPurify, markdown.js, ask.js
    page.locator(".msg.assistant .chip").first.click()  # the passage and the document, as text
    expect(page.get_by_role("dialog").locator(".passage")).to_contain_text(IMG)
    page.get_by_role("dialog").get_by_role("button", name="Open document").click()
    expect(page.get_by_role("dialog").locator(".doc-text")).to_contain_text(SCRIPT)
    assert_inert(6)  # and viewer.js, fetched when the panel first opened


def test_documents_page_disables_enables_and_deletes(page: Any, server: Server) -> None:
    expect = _expect()
    doc_id = _add(server, "Disposable note", "The Pelican ferry leaves the harbour at dawn.", "browser-docs")
    page.goto("/documents/ui")
    row = page.locator(f"tr[data-id='{doc_id}']")
    expect(row).to_contain_text("READY")
    expect(page.locator("thead")).not_to_contain_text("Chunks")  # a word users don't need

    row.get_by_role("button", name="Disable").click()
    expect(row.locator("td").nth(3)).to_have_text("no")
    assert server.request("GET", f"/documents/{doc_id}").json()["enabled"] is False
    row.get_by_role("button", name="Enable").click()
    expect(row.locator("td").nth(3)).to_have_text("yes")
    assert server.request("GET", f"/documents/{doc_id}").json()["enabled"] is True

    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete").click()
    expect(row).to_have_count(0)
    assert server.request("GET", f"/documents/{doc_id}").status == 404


def test_documents_page_repeats_a_switch_answered_202_until_it_finishes(page: Any, server: Server) -> None:
    """A big document is disabled over several requests (issue 44): the server's first two answers are
    202 ``finished: false`` (the switch carries on); the page repeats the PATCH until the document
    comes back, and only then shows it out of answers."""
    expect = _expect()
    doc_id = _add(server, "Switched note", "The Heron lighthouse keeper logs the tides.", "browser-docs")
    patches: list[str] = []

    def answer(route: Any) -> None:
        if route.request.method != "PATCH":
            route.continue_()
            return
        patches.append(route.request.post_data or "")
        if len(patches) <= 2:  # as a big document's first requests answer
            body = {"id": doc_id, "enabled": False, "chunksSwitched": 1000 * len(patches), "finished": False,
                    "message": "Switched chunks so far: repeat the PATCH to switch the rest"}  # fmt: skip
            route.fulfill(status=202, content_type="application/json", body=json.dumps(body))
        else:
            route.continue_()

    page.route(f"**/documents/{doc_id}", answer)
    page.goto("/documents/ui")
    row = page.locator(f"tr[data-id='{doc_id}']")
    row.get_by_role("button", name="Disable").click()
    expect(row.locator("td").nth(3)).to_have_text("no")
    assert [json.loads(p) for p in patches] == [{"enabled": False}] * 3
    assert server.request("GET", f"/documents/{doc_id}").json()["enabled"] is False
    expect(row.get_by_role("button", name="Enable")).to_be_visible()


# ------------------------------------------------------------------------------------------ sign-in

PAGES = ("/ui", "/write", "/documents/ui")
AUTH_KEY = "ragchat.authorization"  # Cognito's ID token, in sessionStorage
SESSION_KEY = "ragchat.session"  # the local session's half in localStorage (serving/sessions.py)


def _signed_out(page: Any, note: str = "") -> None:
    expect = _expect()
    expect(page.locator("#signin-form")).to_be_visible()
    expect(page.locator("#app")).to_be_hidden()
    expect(page.locator("#sign-out")).to_be_hidden()
    expect(page.locator("#signin-note")).to_have_text(note)
    assert page.evaluate(f"sessionStorage.getItem('{AUTH_KEY}')") is None
    assert page.evaluate(f"localStorage.getItem('{SESSION_KEY}')") is None


def _signed_in(page: Any) -> None:
    expect = _expect()
    expect(page.locator("#app")).to_be_visible()
    expect(page.locator("#signin")).to_be_hidden()
    expect(page.locator("#sign-out")).to_be_visible()
    expect(page.locator("nav a", has_text="API")).to_have_count(0)  # Swagger needs a principal


def _chat_turn(page: Any, collection: str) -> None:
    expect = _expect()
    page.fill("#collection", collection)
    page.click("#new-conv-button")
    page.fill("#message", "Who built the Zephyr lighthouse on Mallow Island?")
    page.click("#send")
    answer = page.locator(".msg.assistant")
    expect(answer).to_have_count(1, timeout=WAIT_MS)
    expect(answer).to_contain_text("Ada Quill")
    expect(answer.locator(".sources li").filter(has_text="Zephyr lighthouse")).to_have_count(1)


def test_token_sign_in_on_ragchat_serve_with_an_api_token(
    browser: Any, server: Server, notes: dict[str, str]
) -> None:
    expect = _expect()
    with fresh_page(browser, server) as page:
        page.goto("/ui")  # the shell itself needs no token
        _signed_out(page)
        expect(page.locator("#signin-secret")).to_have_attribute("type", "password")

        page.fill("#signin-secret", "not-the-token")
        page.click("#signin-button")
        expect(page.locator("#signin-error")).to_contain_text("That token is not this server's")
        _signed_out(page)

        page.fill("#signin-secret", TOKEN)
        page.click("#signin-button")
        _signed_in(page)
        expect(page.locator("#signin-secret")).to_have_value("")  # not left in the form
        _chat_turn(page, "browser")

        page.reload()  # the session cookie keeps the tab signed in; the conversation list loads
        _signed_in(page)
        listed = page.locator("#convs li").filter(has_text="Who built the Zephyr lighthouse")
        expect(listed).not_to_have_count(0)
        page.goto("/documents/ui")  # and so does every page of the tab
        _signed_in(page)
        expect(page.locator(f"tr[data-id='{notes['lighthouse']}']")).to_contain_text("READY")

        page.click("#sign-out")
        _signed_out(page, "Signed out")
        page.reload()
        _signed_out(page)


def test_a_rejected_token_mid_session_signs_out(browser: Any, server: Server) -> None:
    expect = _expect()
    with fresh_page(browser, server) as page:
        page.goto("/ui")
        page.fill("#signin-secret", TOKEN)
        page.click("#signin-button")
        _signed_in(page)
        # the page's own first calls (conversation list, API description) finish with the good token;
        # under load they could otherwise land after the swap below and sign out before the click
        page.wait_for_load_state("networkidle")
        # what an expired ID token looks like to the page: the next call gets a 401
        page.evaluate(f"localStorage.setItem('{SESSION_KEY}', 'revoked')")
        page.click("#new-conv-button")
        _signed_out(page, "Signed out: please sign in again")
        page.fill("#signin-secret", TOKEN)
        page.click("#signin-button")
        _signed_in(page)
        page.click("#new-conv-button")
        expect(page.locator("#chat-form")).to_be_visible()


REGION = "eu-west-1"
COGNITO_URL = f"https://cognito-idp.{REGION}.amazonaws.com/"
CLIENT_ID = "7exampleclientid0123456789"
EMAIL, PASSWORD = "reader@example.com", "Correct-Horse-42"
NEW_USER = "new@example.com"
ID_TOKEN = "eyJraWQiOiJmYWtlIn0.eyJzdWIiOiJyZWFkZXIifQ.c2lnbmF0dXJl"  # opaque to the page


@pytest.fixture(scope="module")
def cognito_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``ragchat serve`` configured like the WebUiFunction (COGNITO_CLIENT_ID + AWS_REGION), without a
    token: the fake API Gateway authorizer in ``cognito_page`` stands where the Cognito authorizer
    would, in front of the real API."""
    env = {"COGNITO_CLIENT_ID": CLIENT_ID, "AWS_REGION": REGION}
    with run_server(tmp_path_factory.mktemp("ragchat-cognito"), token=None, env=env) as srv:
        _add(srv, "Zephyr lighthouse", LIGHTHOUSE, "cognito")
        yield srv


@dataclass
class FakeAws:
    """Cognito's InitiateAuth and API Gateway's Cognito authorizer, faked at the browser's network
    layer (``route``): what the page sends is recorded and checked exactly."""

    cognito_calls: list[tuple[dict[str, str], Any]] = field(default_factory=list)
    api_calls: list[tuple[str, str, str | None]] = field(default_factory=list)
    valid_tokens: set[str] = field(default_factory=lambda: {ID_TOKEN})

    def cognito(self, route: Any) -> None:
        request = route.request
        cors = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "*"}
        if request.method == "OPTIONS":
            route.fulfill(status=200, headers=cors)
            return
        body = json.loads(request.post_data or "null")
        self.cognito_calls.append((request.all_headers(), body))
        params = body.get("AuthParameters", {}) if isinstance(body, dict) else {}
        if params.get("USERNAME") == NEW_USER:
            reply: dict[str, Any] = {"ChallengeName": "NEW_PASSWORD_REQUIRED", "Session": "s"}
            status = 200
        elif params == {"USERNAME": EMAIL, "PASSWORD": PASSWORD}:
            reply = {"AuthenticationResult": {"IdToken": ID_TOKEN, "AccessToken": "a", "ExpiresIn": 3600}}
            status = 200
        else:
            reply = {"__type": "NotAuthorizedException", "message": "Incorrect username or password."}
            status = 400
        route.fulfill(
            status=status,
            headers={**cors, "Content-Type": "application/x-amz-json-1.1"},
            body=json.dumps(reply),
        )

    def gateway(self, route: Any) -> None:
        request = route.request
        path = urlsplit(request.url).path
        if request.method == "GET" and (path in PAGES or path.startswith("/static/")):  # Authorizer: NONE
            route.continue_()
            return
        token = request.all_headers().get("authorization")
        self.api_calls.append((request.method, path, token))
        if token not in self.valid_tokens:
            route.fulfill(status=401, json={"message": "Unauthorized"})  # API Gateway's own reply
            return
        route.continue_()


@pytest.fixture
def cognito_page(browser: Any, cognito_server: Server) -> Iterator[tuple[Any, FakeAws]]:
    fake = FakeAws()
    with fresh_page(browser, cognito_server) as page:
        page.route(COGNITO_URL, fake.cognito)
        page.route(f"{cognito_server.url}/**", fake.gateway)
        yield page, fake


def test_cognito_sign_in_sends_the_id_token_on_every_api_call(cognito_page: tuple[Any, FakeAws]) -> None:
    expect = _expect()
    page, fake = cognito_page
    page.goto("/ui")
    _signed_out(page)
    assert fake.api_calls == []  # nothing is asked of the API before signing in

    page.fill("#signin-user", EMAIL)
    page.fill("#signin-secret", "wrong-password")
    page.click("#signin-button")
    error = page.locator("#signin-error")
    expect(error).to_have_text("Incorrect username or password. (NotAuthorizedException)")
    _signed_out(page)

    page.fill("#signin-secret", PASSWORD)
    page.click("#signin-button")
    _signed_in(page)
    for headers, body in fake.cognito_calls:  # the exact InitiateAuth request (CSP let it through)
        assert headers["x-amz-target"] == "AWSCognitoIdentityProviderService.InitiateAuth"
        assert headers["content-type"] == "application/x-amz-json-1.1"
        assert set(body) == {"AuthFlow", "ClientId", "AuthParameters"}
        assert (body["AuthFlow"], body["ClientId"]) == ("USER_PASSWORD_AUTH", CLIENT_ID)
    assert [b["AuthParameters"] for _, b in fake.cognito_calls] == [
        {"USERNAME": EMAIL, "PASSWORD": "wrong-password"},
        {"USERNAME": EMAIL, "PASSWORD": PASSWORD},
    ]

    _chat_turn(page, "cognito")  # through the fake authorizer to the real API
    page.goto("/write")
    page.fill("#text", "The Corvid library lends telescopes to members on weekends.")
    page.get_by_role("button", name="Add note").click()
    expect(page.locator("#status")).to_contain_text("READY", timeout=WAIT_MS)
    assert len(fake.api_calls) >= 6
    assert {token for _, _, token in fake.api_calls} == {ID_TOKEN}  # raw, no "Bearer "
    assert ("POST", "/notes") in {(m, p) for m, p, _ in fake.api_calls}

    fake.valid_tokens.clear()  # the hour is up: API Gateway now answers 401
    page.goto("/documents/ui")
    _signed_out(page, "Signed out: please sign in again")


def test_cognito_challenge_and_unreachable_cognito_are_explained(cognito_page: tuple[Any, FakeAws]) -> None:
    expect = _expect()
    page, fake = cognito_page
    page.goto("/write")
    page.fill("#signin-user", NEW_USER)
    page.fill("#signin-secret", "Temporary-Pass-1")
    page.click("#signin-button")
    expect(page.locator("#signin-error")).to_contain_text("needs its password set")
    expect(page.locator("#signin-error")).to_contain_text("admin-set-user-password --permanent")
    _signed_out(page)
    assert fake.api_calls == []

    page.unroute(COGNITO_URL)
    page.route(COGNITO_URL, lambda route: route.abort("internetdisconnected"))
    page.fill("#signin-user", EMAIL)
    page.fill("#signin-secret", PASSWORD)
    page.click("#signin-button")
    expect(page.locator("#signin-error")).to_contain_text("Could not reach Cognito")
    _signed_out(page)
