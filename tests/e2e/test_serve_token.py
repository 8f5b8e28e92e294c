"""Attack: another account on the same machine reads everything (issue 30, finding 6). 127.0.0.1 is
reachable by every local user, and ``ragchat serve`` without ``RAGCHAT_API_TOKEN`` served the API to
all of them: the files were 0600, their contents and deletes were not.

Now ``ragchat serve`` requires the token it keeps in a 0600 file when none is set
(``ragchat.serving.local_token``): made the first time, kept across runs (issue 45: a sign-in that
lasts), printed once in the link that signs a browser in, replaced by ``ragchat token rotate``. The
pages trade it for an HttpOnly session cookie that counts only with this origin's half
(``ragchat.serving.sessions``). Replayed against a real ``ragchat serve`` started as ``make run``
starts it (no token setting).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import PER_RUN, Server, run_server
from tests.e2e.test_pages_browser import (
    SESSION_KEY,
    _expect,
    _signed_in,
    _signed_out,
    browser,
    fresh_page,
)

pytestmark = pytest.mark.e2e
__all__ = ["browser"]  # the module-scoped Chromium fixture of the page tests

LINK = re.compile(r"open:\s+(http://127\.0\.0\.1:\d+/ui#token=(\S+))")
# Answered without the token on purpose: the health check (no data), and the upload receiver, whose URL
# token is its grant (403 without one).
NOT_BEARER = ("/health", "/uploads/local/")


def _link(server: Server) -> tuple[str, str]:
    found = LINK.search(server.log.read_text())
    assert found, server.log.read_text()
    return found.group(1), found.group(2)


def _operations(server: Server) -> list[tuple[str, str]]:
    spec = server.request("GET", "/openapi.json").json()
    ops = []
    for path, item in spec["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "x1", path)
        ops += [
            (method.upper(), concrete)
            for method in item
            if method in ("get", "post", "put", "patch", "delete")
        ]
    return ops


def test_a_client_without_the_runs_token_gets_401_on_every_data_route(tmp_path: Path) -> None:
    with run_server(tmp_path, token=PER_RUN) as server:
        _, shown = _link(server)
        assert shown == server.token and len(shown) >= 40  # 256 random bits
        assert server.log.read_text().count(shown) == 1  # printed once, in the link only
        # the file its user's commands read: only that user can
        token_file = tmp_path / "serve.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o700
        ops = _operations(server)
        assert len(ops) >= 20, ops
        refused = {}
        for method, path in ops:
            if path.startswith(NOT_BEARER):
                continue
            body = {} if method in ("POST", "PUT", "PATCH") else None
            reply = server.request(method, path, body=body, token=False)
            refused[(method, path)] = reply.status
            assert reply.status == 401, (method, path, reply.status, reply.body[:200])
            wrong = server.request(method, path, body=body, token="not-" + server.token)
            assert wrong.status == 401, (method, path)
        for path in ("/openapi.json", "/swagger", "/"):
            assert server.request("GET", path, token=False).status == 401, path
        # what holds no data still opens: health, the page shells
        assert server.request("GET", "/health", token=False).status == 200
        assert server.request("GET", "/ui", token=False).status == 200
        # and with the token, the API answers
        assert server.request("GET", "/documents").status == 200
        # the same user's CLI finds the token by itself (no --token)
        env = {**os.environ, "RAGCHAT_DATA_DIR": str(tmp_path)}
        env.pop("RAGCHAT_TOKEN", None)
        cli = str(Path(sys.executable).with_name("ragchat"))
        asked = [cli, "ask", "--api", server.url, "--json", "What is the lighthouse?"]
        done = subprocess.run(asked, env=env, capture_output=True, text=True, timeout=120)
        # signed in: the empty knowledge base refuses (exit 3), where a missing token exits 1 with a 401
        assert done.returncode == 3, done.stderr
        assert json.loads(done.stdout)["guardUsed"] is True
        # another data dir (another account's view): no token, 401
        env["RAGCHAT_DATA_DIR"] = str(tmp_path / "elsewhere")
        done = subprocess.run(asked, env=env, capture_output=True, text=True, timeout=120)
        assert (
            done.returncode != 0
            and "Unauthorized (no token sent" in done.stderr
            and "serve.token" in done.stderr
        )
        assert len(refused) >= 20
    # kept when the server stops: the next run (the same user, the same data dir) takes the same one
    assert token_file.read_text().strip() == shown
    with run_server(tmp_path, token=PER_RUN) as again:
        assert again.token == shown and _link(again)[1] == shown
        assert again.request("GET", "/documents").status == 200


def test_the_printed_link_signs_the_browser_in_and_leaves_the_address_bar(
    browser: Any, tmp_path: Path
) -> None:
    expect = _expect()
    with run_server(tmp_path, token=PER_RUN) as server:
        link, token = _link(server)
        with fresh_page(browser, server) as page:
            page.goto(link)
            _signed_in(page)
            assert "token" not in page.url and page.url.endswith("/ui"), page.url
            # the token is kept nowhere in the page: an HttpOnly cookie and this origin's half of it
            stored = page.evaluate(
                "JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage)])"
            )
            assert token not in stored and page.evaluate(f"localStorage.getItem('{SESSION_KEY}')")
            assert token not in page.evaluate("document.cookie")  # HttpOnly: out of scripts' reach
            cookie = next(c for c in page.context.cookies() if c["name"].startswith("ragchat_session_"))
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and token not in cookie["value"]
            # the API answers the page: the documents page lists the samples' absence without a 401
            page.click("nav a[data-p='/documents/ui']")
            _signed_in(page)
            expect(page.locator("#signin")).to_be_hidden()
            page.reload()  # the tab keeps it
            _signed_in(page)
        with fresh_page(browser, server) as page:  # another browser (or account) without the link
            page.goto(server.url + "/ui")
            _signed_out(page)
        with fresh_page(browser, server) as page:  # the Jupyter spelling works too
            page.goto(f"{server.url}/write?token={token}")
            _signed_in(page)
            assert "token" not in page.url, page.url
        with fresh_page(browser, server) as page:  # a wrong token signs nobody in
            page.goto(f"{server.url}/ui#token=not-the-token")
            _signed_out(page, "Signed out: please sign in again")
