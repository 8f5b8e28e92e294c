"""docs/api.md: malformed JSON bodies are a 400 naming the problem, on every JSON route, and nothing is
stored (the checks run in the API layer, so they hold in Lambda as under ``ragchat serve``)."""

from __future__ import annotations

import json

import pytest
from ragchat.api.body import MAX_DEPTH, strict_json

from tests.events import json_body
from tests.unit.api_support import Api, make_api

NOTE = '{"title": "t", "text": %s}'
BAD = {
    "not UTF-8": (b'{"title": "caf\xe9", "text": "x"}', "not UTF-8"),
    "nesting 1000 deep": (NOTE % ("[" * 1000 + "]" * 1000), "nested too deeply"),
    "nesting just past the limit": (NOTE % ("[" * MAX_DEPTH + "]" * MAX_DEPTH), "nested too deeply"),
    "5,000-digit integer": (
        '{"title": "t", "text": "x", "metadata": {"n": %s}}' % ("9" * 5000),
        "number too long",
    ),
    "lone surrogate": (NOTE % '"\\ud800"', "lone surrogate"),
    "lone surrogate in a key": ('{"title": "t", "text": "x", "metadata": {"\\udfff": 1}}', "lone surrogate"),
    "NaN": ('{"title": "t", "text": "x", "metadata": {"n": NaN}}', "NaN"),
    "Infinity": ('{"title": "t", "text": "x", "metadata": {"n": -Infinity}}', "-Infinity"),
    "float overflow": ('{"title": "t", "text": "x", "metadata": {"n": 1e999}}', "out of range"),
    "a key twice": ('{"title": "first", "text": "x", "title": "second"}', 'the key "title" appears twice'),
    "a key twice, nested": (
        '{"title": "t", "text": "x", "metadata": {"a": 1, "a": 2}}',
        'the key "a" appears twice',
    ),
}


@pytest.fixture
def api() -> Api:
    return make_api()


@pytest.mark.parametrize("name", sorted(BAD))
def test_malformed_note_body_is_400_naming_the_problem_and_nothing_is_stored(api: Api, name: str) -> None:
    raw, problem = BAD[name]
    res = api.call("POST", "/notes", raw_body=raw)
    assert res["statusCode"] == 400, res
    assert problem in json_body(res)["error"]
    assert api.call("GET", "/notes")["statusCode"] == 200
    assert json_body(api.call("GET", "/notes"))["items"] == []


@pytest.mark.parametrize("name", ["not UTF-8", "nesting 1000 deep", "lone surrogate", "NaN", "a key twice"])
def test_chat_routes_refuse_the_same_bodies(api: Api, name: str) -> None:
    raw, problem = BAD[name]
    res = api.call("POST", "/chat/conversations", raw_body=raw)
    assert res["statusCode"] == 400 and problem in json_body(res)["error"]
    listed = json_body(api.call("GET", "/chat/conversations"))
    assert listed["items"] == []


def test_well_formed_bodies_still_parse() -> None:
    text = json.dumps({"a": [1, 2.5, -3e10, "\U0001f600", "\ud83d\ude00"], "b": {"c": None, "d": True}})
    assert strict_json(text) == json.loads(text)
    assert strict_json('"[[[ not brackets ]]]"') == "[[[ not brackets ]]]"
    assert strict_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_an_upload_of_binary_bytes_is_not_taken_for_json(api: Api) -> None:
    res = api.call(
        "POST",
        "/documents",
        raw_body=b"\xff\xfe binary",
        headers={"Content-Type": "application/octet-stream"},
    )
    assert "not UTF-8" not in json_body(res).get("error", "")


def test_a_json_route_sent_another_content_type_answers_415(api: Api) -> None:
    res = api.call("POST", "/notes", raw_body='{"text": "x"}', headers={"Content-Type": "text/plain"})
    assert res["statusCode"] == 415 and "text/plain" in json_body(res)["error"]
    assert json_body(api.call("GET", "/notes"))["items"] == []


def test_multipart_without_a_boundary_is_400(api: Api) -> None:
    for path in ("/notes", "/documents"):
        res = api.call("POST", path, raw_body="x", headers={"Content-Type": "multipart/form-data"})
        assert res["statusCode"] == 400 and "boundary" in json_body(res)["error"], path
