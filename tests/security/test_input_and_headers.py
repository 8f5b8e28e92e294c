"""Also seen: a NUL byte in note text was accepted (202) and then FAILED in the worker; ``/swagger``
loaded without a Content-Security-Policy."""

from __future__ import annotations

import json
import re

import pytest
from ragchat.api.security_headers import script_hashes

from tests.unit.api_support import make_api


@pytest.mark.parametrize("route", ["/notes", "/documents"])
def test_a_nul_byte_in_a_note_is_a_400_that_says_why_and_nothing_is_stored(route: str) -> None:
    api = make_api()
    if route == "/notes":
        res = api.call("POST", "/notes", body={"title": "t", "text": "before\x00after"})
    else:
        res = api.call(
            "POST", "/documents", raw_body=b"before\x00after", headers={"Content-Type": "text/plain"},
            query={"filename": "a.txt"},
        )  # fmt: skip
    assert res["statusCode"] == 400
    assert (
        "NUL character" in json.loads(res["body"])["error"]
        and "position 6" in json.loads(res["body"])["error"]
    )
    assert json.loads(api.call("GET", "/documents")["body"])["items"] == []


def test_other_control_characters_are_stripped_and_the_note_is_ingested() -> None:
    api = make_api()
    res = api.call("POST", "/notes", body={"title": "t", "text": "bell\x07 and escape\x1b here"})
    assert res["statusCode"] == 202
    doc_id = json.loads(res["body"])["documentId"]
    doc = json.loads(api.call("GET", f"/documents/{doc_id}", query={"include": "body"})["body"])
    assert doc["status"] == "READY"


def test_swagger_has_a_csp_that_allows_only_its_own_inline_scripts() -> None:
    api = make_api()
    res = api.call("GET", "/swagger")
    assert res["statusCode"] == 200
    headers = {k.lower(): v for k, v in (res.get("headers") or {}).items()}
    for k, values in (res.get("multiValueHeaders") or {}).items():
        headers.setdefault(k.lower(), values[-1])
    policy = headers["content-security-policy"]
    script_src = re.search(r"script-src ([^;]+)", policy)
    assert script_src is not None
    allowed = script_src.group(1).split()
    assert "'unsafe-inline'" not in allowed and "*" not in allowed
    assert sorted(allowed) == sorted(script_hashes(res["body"])) and len(allowed) >= 2
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy
    assert headers["x-content-type-options"] == "nosniff"
