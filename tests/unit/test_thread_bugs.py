"""Two review bugs of issue 19: a replayed refused stream starts like the first one (``answer_start``
before the ``refusal``), and a conversation title given on create loses its control characters."""

from __future__ import annotations

import json
from typing import Any

from ragchat.domain.models import VectorRecord
from ragchat.domain.prompts import GUARD_REPLY

from tests.unit.api_support import Api, make_api


def _api() -> Api:
    api = make_api(None)
    text = "The sky appears blue because of Rayleigh scattering of sunlight."
    api.index.upsert(
        [
            VectorRecord(
                id="n-sky",
                vector=api.container.embedder.vector_for(text),
                text=text,
                owner="alice",
                document_id="d1",
                chunk_index=0,
            )
        ]
    )
    return api


def _events(res: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    frames = [f for f in res["body"].split("\n\n") if f.strip() and not f.startswith(":")]
    out = []
    for frame in frames:
        name, data = frame.split("\n", 1)
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def test_a_replayed_refused_stream_sends_answer_start_then_the_same_refusal() -> None:
    api = _api()
    conv_id = json.loads(api.call("POST", "/chat/conversations", body={})["body"])["id"]
    send = {"content": "quantum chromodynamics lattice", "messageId": "m-1"}
    stream = {"Accept": "text/event-stream"}
    path = f"/chat/conversations/{conv_id}/messages"
    first = _events(api.call("POST", path, body=send, headers=stream))
    again = _events(api.call("POST", path, body=send, headers=stream))
    assert [n for n, _ in first] == ["answer_start", "refusal"]
    assert [n for n, _ in again] == ["answer_start", "refusal"]
    assert again[1][1]["message"] == first[1][1]["message"] == GUARD_REPLY
    assert again[0][1]["messageId"] == again[1][1]["messageId"]  # the stored refusal's id
    stored = json.loads(api.call("GET", f"/chat/conversations/{conv_id}")["body"])["messages"]
    assert len(stored) == 2  # the replay stored nothing new


def test_a_title_given_on_create_loses_control_characters() -> None:
    api = _api()
    res = api.call("POST", "/chat/conversations", body={"title": "Trip\x00 plans\x1b[31m\tand\nmore\x7f"})
    conv_id = json.loads(res["body"])["id"]
    got = json.loads(api.call("GET", f"/chat/conversations/{conv_id}")["body"])
    assert got["title"] == "Trip plans[31m and more"
    listed = json.loads(api.call("GET", "/chat/conversations")["body"])["items"]
    assert listed[0]["title"] == "Trip plans[31m and more"


def test_the_json_answer_and_the_stored_answer_say_what_was_searched() -> None:
    api = _api()
    conv_id = json.loads(api.call("POST", "/chat/conversations", body={})["body"])["id"]
    path = f"/chat/conversations/{conv_id}/messages"
    body = json.loads(api.call("POST", path, body={"content": "Why is the sky blue?"})["body"])
    assert body["query"] == "Why is the sky blue?"
    stored = json.loads(api.call("GET", f"/chat/conversations/{conv_id}")["body"])["messages"]
    assert [m.get("query") for m in stored] == [None, "Why is the sky blue?"]
