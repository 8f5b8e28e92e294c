"""The chat routes through the real resolver (create_app) over in-memory fakes: status codes, headers,
error bodies, SSE framing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragchat.domain.models import VectorRecord
from ragchat.domain.prompts import GUARD_REPLY

from tests.fakes import FakeChatModel
from tests.unit.api_support import Api, make_api


def _index(api: Api, note_id: str, text: str, owner: str = "alice") -> None:
    emb = api.container.embedder
    api.index.upsert(
        [
            VectorRecord(
                id=note_id,
                vector=emb.vector_for(text),
                text=text,
                owner=owner,
                document_id="d1",
                chunk_index=0,
            )
        ]
    )


def _body(res: dict[str, Any]) -> Any:
    return json.loads(res["body"])


def _headers(res: dict[str, Any]) -> dict[str, str]:
    out = {k.lower(): v for k, v in (res.get("headers") or {}).items()}
    for k, v in (res.get("multiValueHeaders") or {}).items():
        out[k.lower()] = v[0]
    return out


def _api(env: dict[str, str] | None = None) -> Api:
    api = make_api(env)
    _index(api, "n-sky", "The sky appears blue because of Rayleigh scattering of sunlight.")
    return api


def test_conversation_lifecycle_and_message_headers() -> None:
    api = _api()
    res = api.call("POST", "/chat/conversations", body={"collection": None})
    assert res["statusCode"] == 201
    conv_id = _body(res)["id"]
    api.clock.advance(5)
    res = api.call(
        "POST", f"/chat/conversations/{conv_id}/messages", body={"content": "Why is the sky blue?"}
    )
    assert res["statusCode"] == 200
    body = _body(res)
    assert body["role"] == "assistant" and body["id"] and "[source: n-sky]" in body["content"]
    assert body["sources"][0]["id"] == "n-sky" and len(body["sources"][0]["text"]) <= 160
    h = _headers(res)
    assert h["x-model-used"] == "extractive" and h["x-source-count"] == "1"

    listed = _body(api.call("GET", "/chat/conversations"))
    assert listed["items"][0]["id"] == conv_id
    assert listed["items"][0]["title"] == "Why is the sky blue?" and listed["items"][0]["messageCount"] == 2

    got = _body(api.call("GET", f"/chat/conversations/{conv_id}"))
    assert [m["role"] for m in got["messages"]] == ["user", "assistant"]
    assert got["messages"][1]["sources"][0]["id"] == "n-sky"

    exported = api.call("GET", f"/chat/conversations/{conv_id}/export", query={"format": "markdown"})
    assert exported["statusCode"] == 200 and _headers(exported)["content-type"].startswith("text/markdown")
    assert (
        api.call("GET", f"/chat/conversations/{conv_id}/export", query={"format": "pdf"})["statusCode"] == 400
    )

    assert api.call("DELETE", f"/chat/conversations/{conv_id}")["statusCode"] == 204
    assert api.call("GET", f"/chat/conversations/{conv_id}")["statusCode"] == 404


def test_error_statuses() -> None:
    api = _api()
    conv_id = _body(api.call("POST", "/chat/conversations", body={}))["id"]
    res = api.call("POST", "/chat/conversations/nope/messages", body={"content": "hi"})
    assert res["statusCode"] == 404 and _body(res) == {"error": "Conversation not found"}
    res = api.call("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "   \n\t "})
    assert res["statusCode"] == 400 and "error" in _body(res)
    res = api.call("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "x" * 4001})
    assert res["statusCode"] == 413
    res = api.call("POST", f"/chat/conversations/{conv_id}/messages", body={})
    assert res["statusCode"] == 400
    res = api.call("POST", "/chat/conversations", body={"persona": "pirate"})
    assert res["statusCode"] == 400 and "pirate" in _body(res)["error"]
    # another principal cannot see the conversation
    res = api.call("GET", f"/chat/conversations/{conv_id}", principal="mallory")
    assert res["statusCode"] == 404
    assert api.call("GET", "/chat/conversations", principal=None)["statusCode"] == 401


def test_rate_limit_429_with_retry_after_header() -> None:
    api = _api({"ENABLE_RATE_LIMITING": "true", "RATE_LIMIT_REQUESTS": "2"})
    conv_id = _body(api.call("POST", "/chat/conversations", body={}))["id"]
    for _ in range(2):
        api.clock.advance(30)
        assert (
            api.call("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "sky?"})[
                "statusCode"
            ]
            == 200
        )
    api.clock.advance(30)
    res = api.call("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "sky?"})
    assert res["statusCode"] == 429
    body = _body(res)
    assert body["retryAfter"] >= 1 and _headers(res)["retry-after"] == str(body["retryAfter"])


def test_idempotent_message_id_over_http() -> None:
    api = _api()
    conv_id = _body(api.call("POST", "/chat/conversations", body={}))["id"]
    send = {"content": "Why is the sky blue?", "messageId": "client-1"}
    first = _body(api.call("POST", f"/chat/conversations/{conv_id}/messages", body=send))
    second = _body(api.call("POST", f"/chat/conversations/{conv_id}/messages", body=send))
    assert first["id"] == second["id"] and second.get("replayed") is True
    got = _body(api.call("GET", f"/chat/conversations/{conv_id}"))
    assert len(got["messages"]) == 2


def test_edit_route() -> None:
    api = _api()
    conv_id = _body(api.call("POST", "/chat/conversations", body={}))["id"]
    first = _body(
        api.call("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "Why is the sky blue?"})
    )
    res = api.call(
        "PUT",
        f"/chat/conversations/{conv_id}/messages/{first['userMessageId']}",
        body={"content": "Is the sky blue?"},
    )
    assert res["statusCode"] == 200
    got = _body(api.call("GET", f"/chat/conversations/{conv_id}"))
    assert [m["content"] for m in got["messages"] if m["role"] == "user"] == ["Is the sky blue?"]


def test_sse_buffered_behind_api_gateway() -> None:
    api = _api()
    conv_id = _body(api.call("POST", "/chat/conversations", body={}))["id"]
    res = api.call(
        "POST",
        f"/chat/conversations/{conv_id}/messages",
        body={"content": "Why is the sky blue?"},
        headers={"Accept": "text/event-stream"},
    )
    assert res["statusCode"] == 200
    assert _headers(res)["content-type"].startswith("text/event-stream")
    frames = [f for f in res["body"].split("\n\n") if f.strip()]
    names = [f.split("\n")[0].removeprefix("event: ") for f in frames]
    assert names[0] == "answer_start" and names[-2:] == ["sources", "answer_end"]
    data = [json.loads(f.split("\n")[1].removeprefix("data: ")) for f in frames]
    assert data[0]["conversationId"] == conv_id

    res = api.call(
        "POST",
        f"/chat/conversations/{conv_id}/messages",
        body={"content": "quantum chromodynamics lattice"},
        headers={"Accept": "text/event-stream"},
    )
    frames = [f for f in res["body"].split("\n\n") if f.strip()]
    assert frames[0].startswith("event: answer_start")  # sent before retrieval decides to refuse
    assert frames[1].startswith("event: refusal")
    assert json.loads(frames[1].split("\n")[1].removeprefix("data: "))["message"] == GUARD_REPLY


def test_stop_route_reports_whether_an_answer_was_in_flight_and_hides_other_owners() -> None:
    api = _api()
    conv_id = _body(api.call("POST", "/chat/conversations", body={}))["id"]
    res = api.call("POST", f"/chat/conversations/{conv_id}/stop")
    assert res["statusCode"] == 202
    assert _body(res) == {"conversationId": conv_id, "inFlight": False}
    # a stream accepted but not finished is in flight (its marker lives in the shared counters)
    _model, events = api.container.chat.turns.stream("alice", conv_id, "Why is the sky blue?")
    assert next(events)[0] == "answer_start"
    res = api.call("POST", f"/chat/conversations/{conv_id}/stop")
    assert _body(res)["inFlight"] is True
    names = [n for n, _ in events]
    assert names[-1] == "answer_end"
    assert api.call("POST", f"/chat/conversations/{conv_id}/stop", principal="mallory")["statusCode"] == 404
    assert api.call("POST", "/chat/conversations/nope/stop")["statusCode"] == 404
    spec = _body(api.call("GET", "/openapi.json"))
    assert "post" in spec["paths"]["/chat/conversations/{conversation_id}/stop"]


def test_rename_route_retitles_the_conversation_and_refuses_bad_titles() -> None:
    api = _api()
    conv_id = _body(api.call("POST", "/chat/conversations", body={"title": "Old"}))["id"]
    res = api.call("PATCH", f"/chat/conversations/{conv_id}", body={"title": "  Sky\nnotes\x00 "})
    assert res["statusCode"] == 200
    assert _body(res)["id"] == conv_id and _body(res)["title"] == "Sky notes"
    assert _body(api.call("GET", "/chat/conversations"))["items"][0]["title"] == "Sky notes"
    assert _body(api.call("GET", f"/chat/conversations/{conv_id}"))["title"] == "Sky notes"
    for bad in ({"title": "   "}, {"title": "x" * 1001}, {"title": 7}, {}, {"title": "a", "owner": "bob"}):
        res = api.call("PATCH", f"/chat/conversations/{conv_id}", body=bad)
        assert res["statusCode"] == 400 and "error" in _body(res), bad
    res = api.call("PATCH", f"/chat/conversations/{conv_id}", body={"title": "pwned"}, principal="mallory")
    assert res["statusCode"] == 404 and _body(res) == {"error": "Conversation not found"}
    res = api.call("PATCH", "/chat/conversations/nope", body={"title": "x"})
    assert res["statusCode"] == 404
    assert _body(api.call("GET", f"/chat/conversations/{conv_id}"))["title"] == "Sky notes"
    spec = _body(api.call("GET", "/openapi.json"))
    assert "patch" in spec["paths"]["/chat/conversations/{conversation_id}"]


def test_keep_alive_is_written_as_a_comment_line() -> None:
    from ragchat.api.chat import sse
    from ragchat.services.chat.streaming import KEEPALIVE

    frames = list(sse(iter([("answer_start", {"messageId": "m"}), KEEPALIVE])))
    assert frames[1] == ": keep-alive\n\n"


def test_feedback_route_stores_the_rating_with_the_answer() -> None:
    api = _api()
    conv_id = _body(api.call("POST", "/chat/conversations", body={}))["id"]
    answer = _body(
        api.call("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "Why is the sky blue?"})
    )
    path = f"/chat/conversations/{conv_id}/messages/{answer['id']}/feedback"

    def stored() -> list[Any]:
        got = _body(api.call("GET", f"/chat/conversations/{conv_id}"))
        return [m.get("feedback") for m in got["messages"]]

    assert stored() == [None, None]
    res = api.call("POST", path, body={"rating": "up"})
    assert res["statusCode"] == 200
    assert _body(res)["id"] == answer["id"] and _body(res)["feedback"] == "up"
    assert stored() == [None, "up"]
    assert _body(api.call("POST", path, body={"rating": "down"}))["feedback"] == "down"
    assert stored() == [None, "down"]
    exported = _body(api.call("GET", f"/chat/conversations/{conv_id}/export", query={"format": "json"}))
    assert exported["messages"][1]["feedback"] == "down"
    res = api.call("POST", path, body={"rating": None})
    assert res["statusCode"] == 200 and "feedback" not in _body(res)
    assert stored() == [None, None]

    # bad input: a clear 400, and the stored rating is untouched
    api.call("POST", path, body={"rating": "up"})
    for bad in ({"rating": "meh"}, {"rating": 1}, {}, {"rating": "up", "extra": 1}):
        res = api.call("POST", path, body=bad)
        assert res["statusCode"] == 400 and "error" in _body(res), bad
    user_id = _body(api.call("GET", f"/chat/conversations/{conv_id}"))["messages"][0]["id"]
    user_path = f"/chat/conversations/{conv_id}/messages/{user_id}/feedback"
    res = api.call("POST", user_path, body={"rating": "up"})
    assert res["statusCode"] == 400 and _body(res) == {"error": "Only answers can be rated"}
    # not yours, not there: 404
    res = api.call("POST", path, body={"rating": "down"}, principal="mallory")
    assert res["statusCode"] == 404
    res = api.call("POST", f"/chat/conversations/{conv_id}/messages/nope/feedback", body={"rating": "down"})
    assert res["statusCode"] == 404 and _body(res) == {"error": "Message not found"}
    assert stored() == [None, "up"]
    spec = _body(api.call("GET", "/openapi.json"))
    assert "post" in spec["paths"]["/chat/conversations/{conversation_id}/messages/{message_id}/feedback"]


def test_conversations_are_searched_by_title_over_http() -> None:
    api = _api()
    for title in ["Quarterly budget", "Team offsite", "Budget follow-up"]:
        assert api.call("POST", "/chat/conversations", body={"title": title})["statusCode"] == 201
        api.clock.advance(1)
    res = api.call("GET", "/chat/conversations", query={"q": "budget"})
    assert res["statusCode"] == 200
    assert [c["title"] for c in _body(res)["items"]] == ["Budget follow-up", "Quarterly budget"]
    too_long = api.call("GET", "/chat/conversations", query={"q": "x" * 201})
    assert too_long["statusCode"] == 400


def test_a_persona_that_cannot_take_effect_is_said_so_when_the_conversation_starts(tmp_path: Path) -> None:
    """The extractive answerer quotes the documents: a persona's role paragraph cannot change that, so
    the reply says so instead of accepting it in silence (issue 33 item 9); with a language model
    writing the answers there is nothing to say."""
    personas = tmp_path / "personas.json"
    personas.write_text(json.dumps({"teacher": "You are a patient teacher."}))
    env = {"RAGCHAT_PERSONAS_FILE": str(personas)}
    extractive = _api(env)
    said = _body(extractive.call("POST", "/chat/conversations", body={"persona": "teacher"}))
    assert said["persona"] == "teacher"
    assert "teacher" in said["notice"] and "language model" in said["notice"]
    assert _body(extractive.call("POST", "/chat/conversations", body={}))["notice"] is None
    listed = _body(extractive.call("GET", "/chat/conversations"))["items"]
    assert all(c["notice"] is None for c in listed)  # said once, when made
    with_model = make_api(env, chat_model=FakeChatModel())
    made = _body(with_model.call("POST", "/chat/conversations", body={"persona": "teacher"}))
    assert made["persona"] == "teacher" and made["notice"] is None


def test_a_source_shows_the_sentence_its_answer_quotes_in_plain_text() -> None:
    """Issue 33 item 1: a source's text was the chunk's first 160 characters, Markdown and all, cut
    mid-word ("# Harbour guide ## Harbour rules … The fuel doc")."""
    api = make_api()
    _index(
        api,
        "n-harbour",
        "# Harbour guide\n\n## Harbour rules\nThe harbour master is on duty from 6:00 to 22:00. Boats must "
        "register at the office on arrival.\n\n## Fuel\n**Tools.** The fuel dock sells diesel and petrol. "
        "Payment is by card only.\n\n- Kayaks launch from the slipway.\n- Swimming in the harbour is "
        "forbidden for everyone.",
    )
    conv_id = _body(api.call("POST", "/chat/conversations", body={}))["id"]
    res = api.call(
        "POST",
        f"/chat/conversations/{conv_id}/messages",
        body={"content": "Is swimming in the harbour forbidden for everyone?"},
    )
    reply = _body(res)
    assert "Swimming in the harbour is forbidden" in reply["content"]
    (source,) = reply["sources"]
    assert source["text"] == "…Swimming in the harbour is forbidden for everyone."
