"""The deployed API answers ``Access-Control-Allow-Origin: *`` (docs/security.md, "The deployed API").
That is safe only while nothing authenticates a request by what a browser attaches on its own: no
cookie is ever read or set, so a page on another origin can send requests but cannot act as a user
without their token (which it cannot read). These tests fail the day a cookie creeps in."""

from __future__ import annotations

import re
from pathlib import Path

import ragchat

from tests.unit.api_support import make_api

PACKAGE = Path(ragchat.__file__).parent
COOKIE = re.compile(r"cookie", re.IGNORECASE)


# The one deliberate cookie: the pages' session of the local ``ragchat serve`` (docs/security.md,
# "Staying signed in"): HttpOnly, SameSite=Strict, and it counts only with the X-Ragchat-Csrf header
# that the page keeps per origin. Only these modules of the local server implement it; no other
# code (the Lambda handlers, the API, the cloud pages) may read or set a cookie.
LOCAL_SESSION_MODULES = {"serving/sessions.py", "serving/local_token.py"}
# Shared with the cloud (``chat_stream`` uses serving/events.py; every page loads web/common.js):
# they may only *mention* the local session in comments and docstrings.
SHARED_MENTION_ONLY = {"serving/events.py", "web/common.js"}


def _a_comment(line: str) -> bool:
    return line.strip().startswith(("#", '"""', "//"))


def test_no_code_of_the_service_reads_or_sets_a_cookie() -> None:
    sources = [*PACKAGE.rglob("*.py"), *(p for p in PACKAGE.rglob("*.js") if "vendor" not in p.parts)]
    assert len(sources) > 50
    found = [
        f"{p.relative_to(PACKAGE).as_posix()}:{n}"
        for p in sources
        if p.relative_to(PACKAGE).as_posix() not in LOCAL_SESSION_MODULES
        for n, line in enumerate(p.read_text("utf-8").splitlines(), 1)
        if COOKIE.search(line)
        and not (p.relative_to(PACKAGE).as_posix() in SHARED_MENTION_ONLY and _a_comment(line))
    ]
    assert found == []
    for module in LOCAL_SESSION_MODULES:  # the allowance names modules that exist, of the local server
        assert (PACKAGE / module).is_file() and module.startswith("serving/"), module
    for p in PACKAGE.rglob("*.js"):  # the session cookie is HttpOnly: no page script touches it
        assert "document.cookie" not in p.read_text("utf-8"), p


def test_a_request_with_a_cookie_and_no_token_is_not_authenticated() -> None:
    api = make_api()
    cookie = {"Cookie": "session=alice; token=alice"}
    for method, path in (("GET", "/documents"), ("DELETE", "/documents/d1")):
        assert api.call(method, path, principal=None, headers=cookie)["statusCode"] == 401, (method, path)
    res = api.call("POST", "/notes", body={"text": "planted"}, principal=None, headers=cookie)
    assert res["statusCode"] == 401
    assert api.call("GET", "/documents")["statusCode"] == 200
    assert api.documents.list_documents("alice", limit=10).items == []  # nothing planted
