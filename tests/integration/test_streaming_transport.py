"""SSE over a real socket: each event reaches the client when the model produces it, and a client that
hangs up stops the model (the partial answer is stored ``interrupted``). Both servers: ``ragchat
serve``'s and the chat_stream function's (adapter-style requests)."""

from __future__ import annotations

import json

import pytest
from ragchat.serving.asgi import Limits

from tests.integration.serving_support import GatedModel, read_event, serving

WORDS = [f"word{i} " for i in range(8)]
LONG = [f"word{i} " for i in range(60)]


def open_stream(served, conv: str):  # type: ignore[no-untyped-def]
    conn = served.connection()
    body = json.dumps({"content": "Why is the sky blue?"}).encode()
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **served.headers()}
    conn.request("POST", f"/chat/conversations/{conv}/messages", body=body, headers=headers)
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type", "").startswith("text/event-stream")
    return conn, resp


def new_conversation(served) -> str:  # type: ignore[no-untyped-def]
    status, _, body = served.call("POST", "/chat/conversations", {})
    assert status == 201, body
    return str(json.loads(body)["id"])


@pytest.mark.parametrize("kind", ["serve", "adapter"])
def test_each_delta_arrives_while_the_model_is_still_writing(kind: str) -> None:
    model = GatedModel(WORDS)
    with serving(kind, model=model) as served:
        conv = new_conversation(served)
        conn, resp = open_stream(served, conv)
        try:
            first = read_event(resp)
            assert first is not None and first[0] == "answer_start"  # before the model wrote anything
            assert model.produced == 0
            model.release()
            event = read_event(resp)
            while event is not None and event[0] != "answer_delta":
                event = read_event(resp)
            assert event is not None, "no answer_delta"
            # The first delta is on the client while the model has produced one word of eight.
            assert model.produced == 1
            assert event[1]["text"].startswith("word0")
            model.release(len(WORDS) - 1)
            names = [event[0]]
            while (event := read_event(resp)) is not None:
                names.append(event[0])
        finally:
            conn.close()
        assert names[-1] == "answer_end"
        assert model.produced == len(WORDS)


@pytest.mark.parametrize("kind", ["serve", "adapter"])
def test_hanging_up_stops_the_model_and_keeps_the_partial_answer(kind: str) -> None:
    model = GatedModel(LONG)
    with serving(kind, model=model) as served:
        conv = new_conversation(served)
        conn, resp = open_stream(served, conv)
        model.release()
        event = read_event(resp)
        while event is not None and event[0] != "answer_delta":
            event = read_event(resp)
        assert event is not None
        resp.close()  # the client hangs up mid-answer
        conn.close()
        # The generator sees the hang-up at its next yield: let the model go on, one word at a time,
        # until its stream is closed (a server that never noticed would let it write every word).
        for _ in LONG:
            model.release()
            if model.closed.wait(1):
                break
        assert model.closed.is_set(), "the model stream was not closed"
        assert model.produced < len(LONG)
        status, _, body = served.call("GET", f"/chat/conversations/{conv}")
        stored = json.loads(body)["messages"]
        assert status == 200 and stored[-1]["role"] == "assistant"
        assert stored[-1].get("interrupted") is True
        assert stored[-1]["content"].startswith("word0")


def test_a_slow_answer_gets_keep_alive_comments_while_the_model_is_silent() -> None:
    model = GatedModel(WORDS[:2])
    with serving("serve", model=model, limits=Limits(sse_keep_alive=0.05)) as served:
        conv = new_conversation(served)
        conn, resp = open_stream(served, conv)
        try:
            assert read_event(resp) is not None  # answer_start; the model has not written a word
            line = resp.readline()
            while line == b"\n":
                line = resp.readline()
            assert line == b": keep-alive\n"  # an SSE comment: clients ignore it, proxies see traffic
            assert model.produced == 0
            model.release(2)
            names = []
            while (event := read_event(resp)) is not None:
                names.append(event[0])
        finally:
            conn.close()
        assert names[-1] == "answer_end" and "answer_delta" in names
