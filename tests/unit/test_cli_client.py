"""The CLI's API client against the real routes (in-process: its transport hands each request to the
API resolver wired with fakes), plus its error handling over urllib."""

from __future__ import annotations

import base64
import io
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from ragchat.cli.client import ApiClient, ApiError, Transcript, urllib_transport

from tests.events import api_event, json_body
from tests.unit.api_support import Api, make_api

BEES = "Honey bees tell each other where flowers are with a waggle dance."
BEES_V2 = "Honey bees also share nectar sources by scent, not only with a waggle dance."


class InProcess:
    """A transport that answers through the API resolver (stage ``Prod``, as API Gateway strips it from
    the path), as ``principal``; records the requests."""

    def __init__(self, api: Api, principal: str = "alice") -> None:
        self.api = api
        self.principal = principal
        self.requests: list[urllib.request.Request] = []

    def __call__(self, req: urllib.request.Request, timeout: float) -> tuple[int, bytes]:
        self.requests.append(req)
        url = urlsplit(req.full_url)
        headers = {"-".join(p.capitalize() for p in k.split("-")): v for k, v in req.header_items()}
        data = req.data if isinstance(req.data, bytes) else None
        event = api_event(
            req.get_method(),
            url.path.removeprefix("/Prod") or "/",
            query=dict(parse_qsl(url.query)) or None,
            raw_body=data,
            headers=headers,
            principal=self.principal,
        )
        res: dict[str, Any] = self.api.app.resolve(event, None)
        body = res.get("body") or ""
        raw = base64.b64decode(body) if res.get("isBase64Encoded") else body.encode()
        return int(res["statusCode"]), raw


def client_for(api: Api, principal: str = "alice", token: str | None = None) -> ApiClient:
    return ApiClient("http://api.test/Prod/", token, transport=InProcess(api, principal))


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def documents(api: Api) -> list[dict[str, Any]]:
    return list(json_body(api.call("GET", "/documents"))["items"])


def test_uploading_the_same_source_twice_replaces_the_document(tmp_path: Path) -> None:
    api = make_api()
    client = client_for(api)
    path = write(tmp_path, "bees.md", BEES)
    first = client.upload(path, collection="insects", source=f"file:{path}")
    path.write_text(BEES_V2)
    second = client.upload(path, collection="insects", source=f"file:{path}")

    assert second.document_id == first.document_id
    [doc] = documents(api)
    assert doc["source"] == f"file:{path}" and doc["collection"] == "insects"
    state = client.document(second.document_id)
    assert state.status == "READY" and state.chunk_count == 1 and state.error == ""
    body = json_body(api.call("GET", f"/documents/{doc['id']}", query={"include": "body"}))["body"]
    assert "by scent" in body


def test_without_a_source_the_file_name_says_which_document_it_is(tmp_path: Path) -> None:
    api = make_api()
    client = client_for(api)
    path = write(tmp_path, "bees.txt", BEES)
    first, again = client.upload(path), client.upload(path)
    assert (first.duplicate, again.duplicate) == (False, True)
    assert again.document_id == first.document_id
    write(tmp_path, "bees.txt", BEES + " They dance to show where the flowers are.")
    changed = client.upload(path)
    assert (changed.document_id, changed.duplicate) == (first.document_id, False)  # a new version
    elsewhere = client.upload(path, collection="garden")  # the same content: that document (issue 45)
    assert (elsewhere.document_id, elsewhere.duplicate, elsewhere.elsewhere) == (
        first.document_id,
        True,
        True,
    )
    write(tmp_path, "bees.txt", BEES + " They sleep in the hive at night.")
    other = client.upload(path, collection="garden")
    assert other.document_id != first.document_id  # the same name in another collection
    assert sorted(d["collection"] or "" for d in documents(api)) == ["", "garden"]


def test_the_same_source_from_two_callers_is_two_documents(tmp_path: Path) -> None:
    api = make_api()
    path = write(tmp_path, "bees.txt", BEES)
    alice = client_for(api, "alice").upload(path, source=f"file:{path}")
    bob = client_for(api, "bob").upload(path, source=f"file:{path}")
    assert alice.document_id != bob.document_id
    assert client_for(api, "bob").document(bob.document_id).status == "READY"
    with pytest.raises(ApiError) as err:
        client_for(api, "bob").document(alice.document_id)
    assert err.value.status == 404


def test_a_source_that_is_not_a_file_is_rejected(tmp_path: Path) -> None:
    api = make_api()
    path = write(tmp_path, "bees.txt", BEES)
    with pytest.raises(ApiError) as err:
        client_for(api).upload(path, source="s3://bucket/uploads/bees.txt")
    assert err.value.status == 400
    assert documents(api) == []


def test_ask_returns_the_answer_with_its_sources(tmp_path: Path) -> None:
    api = make_api()
    client = client_for(api)
    client.upload(write(tmp_path, "bees.txt", BEES))
    answer = client.ask("How do honey bees tell each other where flowers are?")
    assert "waggle dance" in answer.answer
    assert answer.guard_used is False
    assert answer.sources and "waggle dance" in answer.sources[0].text
    assert answer.raw["answer"] == answer.answer


def test_a_conversation_round_trip_and_its_markdown_export(tmp_path: Path) -> None:
    api = make_api()
    client = client_for(api)
    client.upload(write(tmp_path, "bees.txt", BEES))
    conv = client.create_conversation(collection=None, persona=None)["id"]
    reply = client.send_message(conv, "How do honey bees tell each other where flowers are?")
    assert "waggle dance" in reply.content and reply.sources
    transcript = client.export(conv)
    assert [role for role, _ in transcript.messages] == ["user", "assistant"]
    markdown = transcript.markdown()
    assert markdown.startswith("# ") and "## assistant" in markdown and "waggle dance" in markdown


def test_api_errors_carry_the_api_message() -> None:
    api = make_api()
    with pytest.raises(ApiError) as err:
        client_for(api).document("nope")
    assert err.value.status == 404 and "not found" in err.value.message.lower()
    with pytest.raises(ApiError) as err:
        client_for(api).ask("   ")
    assert err.value.status == 400


def test_the_token_is_sent_as_a_bearer_header_and_blank_options_are_left_out() -> None:
    api = make_api()
    transport = InProcess(api)
    ApiClient("http://api.test", "s3cret", transport=transport).ask("bees?", collection=None)
    [req] = transport.requests
    assert req.get_header("Authorization") == "Bearer s3cret"
    assert req.full_url == "http://api.test/?text=bees%3F"


def test_transcript_without_title() -> None:
    assert Transcript("", [("user", "hi")]).markdown() == "# Conversation\n\n## user\n\nhi"


def test_urllib_transport_reports_an_unreachable_api(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(req: Any, timeout: float) -> Any:
        raise urllib.error.URLError("Connection refused")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    with pytest.raises(ApiError) as err:
        ApiClient("http://127.0.0.1:9").ask("bees?")
    assert err.value.status == 0
    assert err.value.message == "cannot reach http://127.0.0.1:9/?text=bees%3F: Connection refused"


def test_urllib_transport_turns_an_http_error_into_its_status_and_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def too_many(req: Any, timeout: float) -> Any:
        body = io.BytesIO(b'{"error": "Too many requests", "retryAfter": 3}')
        raise urllib.error.HTTPError(req.full_url, 429, "Too Many Requests", Message(), body)

    monkeypatch.setattr(urllib.request, "urlopen", too_many)
    with pytest.raises(ApiError) as err:
        ApiClient("http://api.test").document("D1")
    assert (err.value.status, err.value.message) == (429, "Too many requests")
    status, raw = urllib_transport(urllib.request.Request("http://api.test/x"), 1.0)
    assert status == 429 and b"retryAfter" in raw


def test_a_non_json_error_body_is_the_message() -> None:
    client = ApiClient("http://api.test", transport=lambda req, timeout: (502, b"Bad Gateway"))
    with pytest.raises(ApiError) as err:
        client.document("D1")
    assert (err.value.status, err.value.message) == (502, "Bad Gateway")
