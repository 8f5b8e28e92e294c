"""Crafted cursors on every list route (issue 43 item 7): a cursor is base64 of JSON the server made,
but a client can send any. One holding a lone surrogate (``"\\ud800"``, which no store can bind) or
JSON nested 5,000 deep (Python's parser gives up with a RecursionError) answered 500 on the SQLite
stack, and by reading DynamoDB's decoder did the same. Now both are a 400 naming the cursor, on the
in-memory, SQLite and DynamoDB stacks."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.test_workspace_isolation import STACKS
from tests.unit.api_support import Api


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


CRAFTED = {
    # the shapes each store makes, with a lone surrogate where a text goes
    "surrogate-list": b64(b'["\\ud800", "\\udfff"]'),
    "surrogate-key": b64(b'{"pk": {"S": "\\ud800"}, "sk": {"S": "x"}}'),
    "deep-list": b64(b"[" * 5000 + b"]" * 5000),
    "deep-object": b64(b'{"a":' * 5000 + b"1" + b"}" * 5000),
}


@pytest.fixture(params=sorted(STACKS))
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    with STACKS[request.param](tmp_path) as stack:
        yield stack


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_a_crafted_cursor_is_a_400_on_every_list_route(api: Api, name: str) -> None:
    conv = json.loads(api.call("POST", "/chat/conversations", body={"title": "c"}, principal="alice")["body"])
    routes = ["/documents", "/notes", "/notes.json", "/chat/conversations"]
    routes.append(f"/chat/conversations/{conv['id']}")  # its messages
    for path in routes:
        res = api.call("GET", path, principal="alice", query={"cursor": CRAFTED[name]})
        assert res["statusCode"] == 400, (path, res)
        assert "cursor" in json.loads(res["body"])["error"].lower(), (path, res["body"])
