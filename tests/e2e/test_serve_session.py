"""Staying signed in (issue 45, item 1): a browser signed in once to ``ragchat serve`` stays signed in
across tabs, reloads and server restarts, without weakening what ``test_serve_token.py`` defends.

The page trades the token for an HttpOnly, SameSite=Strict cookie that counts only together with
``X-Ragchat-Csrf`` (``ragchat.serving.sessions``); the token is stable per data dir until ``ragchat
token rotate``. Each attack below is replayed over HTTP against a real server: the cookie alone (what
a page on another port of 127.0.0.1 receives: cookies ignore ports), a cross-site state change, a
foreign ``Host`` (DNS rebinding), another account's data dir, and a rotated token.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import PER_RUN, Server, run_server
from tests.e2e.test_pages_browser import SESSION_KEY, _expect, _signed_in, _signed_out, browser

pytestmark = pytest.mark.e2e
__all__ = ["browser"]


def _session(server: Server) -> tuple[str, str]:
    """``POST /session`` with the token: the cookie (name=value) and the CSRF half."""
    reply = server.request("POST", "/session")
    assert reply.status == 200, reply.body
    set_cookie = reply.headers["set-cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie and "Path=/" in set_cookie
    assert server.token and server.token not in set_cookie
    return set_cookie.split(";", 1)[0], str(reply.json()["csrf"])


def _with(server: Server, method: str, path: str, cookie: str | None, csrf: str | None, **kw: Any) -> int:
    headers = dict(kw.pop("headers", {}))
    if cookie:
        headers["Cookie"] = cookie
    if csrf:
        headers["X-Ragchat-Csrf"] = csrf
    return server.request(method, path, headers=headers, token=False, **kw).status


def _rotate(data_dir: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGCHAT_DATA_DIR": str(data_dir)}
    cli = str(Path(sys.executable).with_name("ragchat"))
    return subprocess.run(
        [cli, "token", "rotate", "--url", url], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_session_cookie_counts_only_with_its_origins_half_and_only_here(tmp_path: Path) -> None:
    with run_server(tmp_path, token=PER_RUN) as server:
        cookie, csrf = _session(server)
        assert _with(server, "GET", "/documents", cookie, csrf) == 200
        # the cookie alone (a page on another port of 127.0.0.1 is sent it): 401 on every data route
        for method, path in (("GET", "/documents"), ("GET", "/chat/conversations"), ("GET", "/workspaces")):
            assert _with(server, method, path, cookie, None) == 401, path
        assert _with(server, "GET", "/documents", cookie, "x" + csrf[1:]) == 401  # a forged half
        assert _with(server, "GET", "/documents", None, csrf) == 401  # the half without the cookie
        forged = cookie.rsplit(".", 1)[0] + ".AAAA"
        assert _with(server, "GET", "/documents", forged, csrf) == 401
        # a cross-site state change with the pair: refused before anything else (the pages' origin only)
        note = {"text": "planted"}
        evil = {"Origin": "http://evil.example", "Content-Type": "application/json"}
        assert _with(server, "POST", "/notes", cookie, csrf, body=note, headers=evil) == 403
        assert _with(server, "POST", "/session", None, None, headers={"Origin": "http://evil.example"}) == 403
        # DNS rebinding: a foreign Host is not served, cookie or not
        assert _with(server, "GET", "/documents", cookie, csrf, headers={"Host": "attacker.example"}) == 421
        # the same origin's page: its own POST goes through
        own = {"Origin": server.url, "Content-Type": "application/json"}
        assert _with(server, "POST", "/notes", cookie, csrf, body=note, headers=own) == 202
        # a wrong token gets no cookie
        wrong = server.request("POST", "/session", token="not-the-token")
        assert wrong.status == 401 and "set-cookie" not in wrong.headers
        # who the session is; signing out clears the cookie
        assert server.request(
            "GET", "/session", headers={"Cookie": cookie, "X-Ragchat-Csrf": csrf}, token=False
        ).json() == {"user": "local"}
        out = server.request("DELETE", "/session", headers={"Cookie": cookie}, token=False)
        assert out.status == 200 and "Max-Age=0" in out.headers["set-cookie"]
        # another account (another data dir) has neither the token nor the key
        assert stat.S_IMODE((tmp_path / "session.key").stat().st_mode) == 0o600
        # ragchat token rotate: the running server takes the new token at once; the old one, and
        # every cookie made from it, get 401
        done = _rotate(tmp_path, server.url)
        assert done.returncode == 0, done.stderr
        new = (tmp_path / "serve.token").read_text().strip()
        assert new != server.token and f"#token={new}" in done.stdout
        assert _with(server, "GET", "/documents", cookie, csrf) == 401
        assert server.request("GET", "/documents").status == 401  # the old token
        assert server.request("GET", "/documents", token=new).status == 200


def test_a_browser_stays_signed_in_across_tabs_and_restarts_until_the_token_is_rotated(
    browser: Any, tmp_path: Path
) -> None:
    expect = _expect()
    with run_server(tmp_path, token=PER_RUN) as server:
        port = int(server.url.rsplit(":", 1)[1])
        context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 800})
        try:
            first = context.new_page()
            first.goto(f"/ui#token={server.token}")
            _signed_in(first)
            second = context.new_page()  # another tab, no link: signed in
            second.goto("/documents/ui")
            _signed_in(second)
            expect(second.locator("#doc-error")).to_have_text("")
        finally:
            state = context.storage_state()
            context.close()
    with run_server(tmp_path, token=PER_RUN, port=port) as server:  # tomorrow's run, the same browser
        context = browser.new_context(
            base_url=server.url, storage_state=state, viewport={"width": 390, "height": 800}
        )
        try:
            page = context.new_page()
            page.goto("/ui")  # a bookmark
            _signed_in(page)
            page.screenshot(path=str(tmp_path / "signed-in-390.png"))
            assert _rotate(tmp_path, server.url).returncode == 0
            page.reload()
            _signed_out(page, "Signed out: please sign in again")
            assert page.evaluate(f"localStorage.getItem('{SESSION_KEY}')") is None
        finally:
            context.close()
