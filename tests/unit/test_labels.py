"""One rule for ``title`` and ``collection`` (``ragchat.domain.labels``), the same for notes, uploads,
document filters and conversations."""

from __future__ import annotations

import pytest
from ragchat.domain.errors import ValidationError
from ragchat.domain.labels import MAX_TITLE_CHARS, optional_title, validate_collection, validate_title

from tests.events import json_body
from tests.unit.api_support import make_api

BAD_COLLECTIONS = ["two words", "x" * 65, "-leading-dash", "sl/ash"]


@pytest.mark.parametrize("name", ["travel", "work:2024", "a.b_c-d", "x" * 64, "  padded  "])
def test_good_collections_are_kept_stripped(name: str) -> None:
    assert validate_collection(name) == name.strip()


@pytest.mark.parametrize("name", BAD_COLLECTIONS)
def test_bad_collections_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(ValidationError, match="1-64 characters"):
        validate_collection(name)


def test_no_collection_and_blank_titles() -> None:
    assert validate_collection(None) is None and validate_collection("  ") is None
    assert optional_title(None) is None and optional_title("  ") is None
    with pytest.raises(ValidationError, match="blank"):
        validate_title("   ")
    with pytest.raises(ValidationError, match=str(MAX_TITLE_CHARS)):
        validate_title("t" * (MAX_TITLE_CHARS + 1))


@pytest.mark.parametrize("name", BAD_COLLECTIONS)
def test_every_route_that_takes_a_collection_applies_the_same_rule(name: str) -> None:
    api = make_api()
    responses = {
        "note": api.call("POST", "/notes", body={"text": "Cats purr.", "collection": name}),
        "upload": api.call(
            "POST",
            "/documents",
            query={"filename": "a.txt", "collection": name},
            raw_body=b"Cats purr.",
            headers={"Content-Type": "text/plain"},
        ),
        "filter": api.call("GET", "/documents", query={"collection": name}),
        "ask": api.call("GET", "/", query={"text": "Do cats purr?", "collection": name}),
        "conversation": api.call("POST", "/chat/conversations", body={"collection": name}),
    }
    for where, response in responses.items():
        assert response["statusCode"] == 400, where
        assert "collection must be 1-64 characters" in json_body(response)["error"], where
    assert json_body(api.call("GET", "/documents"))["items"] == []
    assert json_body(api.call("GET", "/chat/conversations"))["items"] == []


def test_a_conversation_keeps_a_valid_collection() -> None:
    api = make_api()
    created = api.call("POST", "/chat/conversations", body={"collection": " travel "})
    assert created["statusCode"] == 201
    assert json_body(created)["collection"] == "travel"
