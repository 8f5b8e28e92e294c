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


def test_no_code_of_the_service_reads_or_sets_a_cookie() -> None:
    sources = [*PACKAGE.rglob("*.py"), *(p for p in PACKAGE.rglob("*.js") if "vendor" not in p.parts)]
    assert len(sources) > 50
    found = [
        f"{p.relative_to(PACKAGE)}:{n}"
        for p in sources
        for n, line in enumerate(p.read_text("utf-8").splitlines(), 1)
        if COOKIE.search(line)
    ]
    assert found == []


def test_a_request_with_a_cookie_and_no_token_is_not_authenticated() -> None:
    api = make_api()
    cookie = {"Cookie": "session=alice; token=alice"}
    for method, path in (("GET", "/documents"), ("DELETE", "/documents/d1")):
        assert api.call(method, path, principal=None, headers=cookie)["statusCode"] == 401, (method, path)
    res = api.call("POST", "/notes", body={"text": "planted"}, principal=None, headers=cookie)
    assert res["statusCode"] == 401
    assert api.call("GET", "/documents")["statusCode"] == 200
    assert api.documents.list_documents("alice", limit=10).items == []  # nothing planted
