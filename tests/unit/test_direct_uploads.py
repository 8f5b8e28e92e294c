"""Direct uploads (issue 11): ``POST /uploads`` and the local receiving route, over the in-memory
fakes and the local file blob store; the S3 presigned POST on moto."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from ragchat.adapters.local.files import FileBlobStore
from ragchat.domain.errors import Forbidden, ValidationError
from ragchat.domain.ids import named_document_id
from ragchat.domain.uploads import (
    UploadGrant,
    decode_metadata_value,
    encode_metadata_value,
    safe_filename,
    sign_grant,
    upload_key,
    verify_grant,
)

from tests.unit.api_support import Api, make_api


def body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])


def multipart(fields: dict[str, str], filename: str, data: bytes) -> tuple[str, bytes]:
    """A browser's form POST: the fields, then the file last."""
    boundary = uuid.uuid4().hex
    out = b""
    for name, value in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        out += value.encode() + b"\r\n"
    out += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    out += data + f"\r\n--{boundary}--\r\n".encode()
    return f"multipart/form-data; boundary={boundary}", out


def presign(api: Api, payload: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return api.call("POST", "/uploads", body=payload, headers={"Host": "localhost:8000"}, **kwargs)


def post_file(api: Api, ticket: dict[str, Any], data: bytes, **field_changes: str) -> dict[str, Any]:
    path = ticket["url"].split("localhost:8000", 1)[1]
    ctype, raw = multipart({**ticket["fields"], **field_changes}, "x", data)
    return api.call("POST", path, raw_body=raw, headers={"Content-Type": ctype}, principal=None)


@pytest.fixture
def local_api(tmp_path: Path) -> Api:
    blobs = FileBlobStore(tmp_path / "blobs")
    api = make_api(blobs=blobs)
    blobs.clock = api.clock  # grants expire on the test's clock
    return api


# ------------------------------------------------------------------------------------ POST /uploads
def test_presign_names_the_key_the_document_id_and_pins_type_and_labels() -> None:
    api = make_api()
    response = presign(api, {"filename": "Q3 report.md", "title": "Q3", "collection": "finance"})
    assert response["statusCode"] == 201, response
    ticket = body(response)
    assert ticket["key"].startswith("uploads/alice/") and ticket["key"].endswith("/Q3_report.md")
    # the file of that name in that collection: uploading it again is the same document
    assert ticket["documentId"] == named_document_id("alice", "finance", "Q3_report.md")
    assert ticket["contentType"] == "text/markdown"
    assert ticket["fields"]["Content-Type"] == "text/markdown"
    assert ticket["fields"]["x-amz-meta-title"] == "Q3"
    assert ticket["fields"]["x-amz-meta-collection"] == "finance"
    assert ticket["url"].startswith("http://localhost:8000/uploads/local/")
    assert ticket["expiresAt"].endswith("Z") and ticket["maxBytes"] > 1024 * 1024


def test_each_presign_is_a_new_key_for_the_document_its_name_says() -> None:
    api = make_api()
    first, second = (body(presign(api, {"filename": "a.txt"})) for _ in range(2))
    assert first["key"] != second["key"]
    assert first["documentId"] == second["documentId"]
    assert body(presign(api, {"filename": "b.txt"}))["documentId"] != first["documentId"]
    assert body(presign(api, {"filename": "a.txt", "collection": "kb"}))["documentId"] != first["documentId"]


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({}, "filename"),
        ({"filename": "  "}, "filename"),
        ({"filename": "setup.exe"}, "This file type is not supported (setup.exe): add .txt"),
        ({"filename": "README"}, "extension"),
        ({"filename": "a.gif", "contentType": "image/gif"}, "picture format is not read"),
        ({"filename": "a.key", "contentType": "x/y"}, "This file type is not supported (a.key)"),
        ({"filename": "a.txt", "collection": "no spaces"}, "collection"),
        ({"filename": "a.txt", "title": "x" * 1001}, "title"),
        ({"filename": "a.txt", "owner": "bob"}, "owner"),
    ],
)
def test_bad_upload_requests_are_400(payload: dict[str, Any], words: str) -> None:
    response = presign(make_api(), payload)
    assert response["statusCode"] == 400, response
    assert words.lower() in body(response)["error"].lower()


def test_presign_needs_a_signed_in_caller() -> None:
    assert presign(make_api(), {"filename": "a.txt"}, principal=None)["statusCode"] == 401


def test_a_pdf_declared_as_octet_stream_is_a_pdf() -> None:
    ticket = body(presign(make_api(), {"filename": "paper.PDF", "contentType": "application/octet-stream"}))
    assert ticket["contentType"] == "application/pdf" and ticket["key"].endswith("/paper.pdf")


# ------------------------------------------------------------------------------- the local POST
def test_the_local_upload_is_stored_once_at_the_documents_place(local_api: Api, tmp_path: Path) -> None:
    ticket = body(
        presign(local_api, {"filename": "tower.md", "title": "Tour Eiffel é", "collection": "trips"})
    )
    text = b"# Eiffel Tower\n\nThe tower is 330 metres tall.\n"
    response = post_file(local_api, ticket, text)
    assert response["statusCode"] == 201, response
    assert body(response)["documentId"] == ticket["documentId"]

    doc = body(local_api.call("GET", f"/documents/{ticket['documentId']}", query={"include": "body"}))
    assert (doc["status"], doc["title"], doc["collection"]) == ("READY", "Tour Eiffel é", "trips")
    assert "330 metres" in doc["body"]
    stored = sorted(p.relative_to(tmp_path / "blobs").as_posix() for p in (tmp_path / "blobs").rglob("*.md"))
    # once, where every body lives: nothing at the form's (staging) key, which a replay could reach
    assert stored == [f"documents/alice/{ticket['documentId']}/body.md"]

    assert local_api.call("DELETE", f"/documents/{ticket['documentId']}")["statusCode"] == 204
    assert not list((tmp_path / "blobs").rglob("*.md"))


def test_a_grant_is_used_once_and_a_replay_ingests_nothing(local_api: Api) -> None:
    ticket = body(presign(local_api, {"filename": "v.txt"}))
    post_file(local_api, ticket, b"first version")
    replay = post_file(local_api, ticket, b"second version")
    assert replay["statusCode"] == 409 and "used already" in body(replay)["error"]
    (only,) = body(local_api.call("GET", "/documents"))["items"]
    assert only["id"] == ticket["documentId"]
    stored = body(local_api.call("GET", f"/documents/{only['id']}", query={"include": "body"}))["body"]
    assert "first" in stored and "second" not in stored


def test_an_expired_or_altered_grant_is_refused(local_api: Api) -> None:
    ticket = body(presign(local_api, {"filename": "a.txt"}))
    other = body(presign(local_api, {"filename": "b.txt"}))
    assert post_file(local_api, ticket, b"x", key=other["key"])["statusCode"] == 403
    assert post_file(local_api, ticket, b"x", **{"Content-Type": "text/html"})["statusCode"] == 403
    forged = dict(ticket, url=ticket["url"][:-3] + "AAA")
    assert post_file(local_api, forged, b"x")["statusCode"] == 403
    local_api.clock.advance(901)
    expired = post_file(local_api, ticket, b"hello")
    assert expired["statusCode"] == 403 and "expired" in body(expired)["error"]
    assert body(local_api.call("GET", "/documents"))["items"] == []


def test_the_size_range_and_the_file_content_are_checked(tmp_path: Path) -> None:
    api = make_api({"MAX_UPLOAD_BYTES": "10"}, blobs=FileBlobStore(tmp_path))
    ticket = body(presign(api, {"filename": "a.txt"}))
    assert ticket["maxBytes"] == 10
    assert post_file(api, ticket, b"x" * 11)["statusCode"] == 413
    assert post_file(api, ticket, b"")["statusCode"] == 400
    assert post_file(api, ticket, b"\x80\x81\x82 nope")["statusCode"] == 400  # not text
    assert not list(tmp_path.rglob("a.txt"))  # a refused file is not kept


def test_the_local_route_takes_only_a_form() -> None:
    api = make_api()
    ticket = body(presign(api, {"filename": "a.txt"}))
    path = ticket["url"].split("localhost:8000", 1)[1]
    response = api.call("POST", path, body={"text": "hi"}, principal=None)
    assert response["statusCode"] == 400 and "multipart" in body(response)["error"]


def test_the_local_route_is_not_there_when_uploads_go_to_s3() -> None:
    from ragchat.adapters.aws.s3 import S3BlobStore

    api = make_api(blobs=S3BlobStore("bucket", client=None))
    ctype, raw = multipart({"key": "uploads/alice/x/a.txt"}, "a.txt", b"hi")
    response = api.call("POST", "/uploads/local/abc.def", raw_body=raw, headers={"Content-Type": ctype})
    assert response["statusCode"] == 404


# ------------------------------------------------------------------------------------ domain rules
def test_file_names_become_safe_key_segments() -> None:
    assert safe_filename("C:\\docs\\my report (v2).MD") == "my_report_(v2).md"
    assert safe_filename("../../etc/passwd.txt") == "passwd.txt"
    assert safe_filename("...") == "upload"
    with pytest.raises(Forbidden):
        upload_key("a/b", "01", "x.txt")


@pytest.mark.parametrize("title", ["Plain title", "Tour Eiffel é", "東京タワー", "=?not encoded"])
def test_titles_survive_the_ascii_only_metadata(title: str) -> None:
    encoded = encode_metadata_value(title)
    assert encoded.isascii()
    assert decode_metadata_value(encoded) == title


def test_grants_are_signed_and_expire() -> None:
    grant = UploadGrant("uploads/a/1/x.txt", "text/plain", 1, 10, 100.0, {"title": "t"})
    token = sign_grant(grant, b"secret")
    assert verify_grant(token, b"secret", 99.0) == grant
    with pytest.raises(Forbidden):
        verify_grant(token, b"other", 99.0)
    with pytest.raises(Forbidden):
        verify_grant(token, b"secret", 100.0)
    payload, mac = token.split(".")
    changed = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    changed["max_bytes"] = 10**9
    forged = base64.urlsafe_b64encode(json.dumps(changed).encode()).decode().rstrip("=")
    with pytest.raises(Forbidden):
        verify_grant(f"{forged}.{mac}", b"secret", 0.0)


def test_the_local_secret_is_shared_by_stores_on_one_folder(tmp_path: Path) -> None:
    a, b = FileBlobStore(tmp_path), FileBlobStore(tmp_path)
    post = a.presign_post(
        "uploads/u/1/x.txt", content_type="text/plain", min_bytes=1, max_bytes=5, expires_in=60, metadata={}
    )
    assert b.upload_grant(post.url.rsplit("/", 1)[1]).key == "uploads/u/1/x.txt"
    with pytest.raises(ValueError):
        a.put(".upload-secret", b"mine")
    assert a.delete_prefix(".up") == 0


def test_a_title_too_long_for_object_metadata_is_400() -> None:
    response = presign(make_api(), {"filename": "a.txt", "title": "é" * 800})
    assert response["statusCode"] == 400 and "metadata" in body(response)["error"]
    with pytest.raises(ValidationError):
        from ragchat.domain.uploads import upload_metadata

        upload_metadata("é" * 800, None)


def test_a_machine_client_gets_an_upload_under_its_own_key(local_api: Api) -> None:
    ticket = body(presign(local_api, {"filename": "m.txt"}, principal=None, api_key_id="k1"))
    assert ticket["key"].startswith("uploads/apikey:k1/")
    assert post_file(local_api, ticket, b"from a machine")["statusCode"] == 201
    doc = local_api.call("GET", f"/documents/{ticket['documentId']}", principal=None, api_key_id="k1")
    assert body(doc)["status"] == "READY"


def test_ragchat_serve_lets_only_the_presigned_post_through_without_its_token() -> None:
    from ragchat.serving.events import bearer_refusal

    assert bearer_refusal("secret", "POST", "/uploads/local/abc.def", "") is None
    refused = bearer_refusal("secret", "POST", "/uploads", "")
    assert refused is not None and refused[0] == 401
    refused = bearer_refusal("secret", "GET", "/uploads/local/abc.def", "")
    assert refused is not None and refused[0] == 401


# ------------------------------------------------------------------ refused uploads say why (issue 45)
def _said(api: Api, ticket: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """``GET /uploads/{uploadId}`` as the uploader (200: its JSON; else the whole reply)."""
    reply = api.call("GET", f"/uploads/{ticket['uploadId']}", **kwargs)
    return body(reply) if reply["statusCode"] == 200 else reply


def _documents_says(api: Api, name: str, data: bytes) -> dict[str, Any]:
    """What ``POST /documents`` answers for the same file (its status and error)."""
    reply = api.call(
        "POST", "/documents", raw_body=data, headers={"X-Filename": name, "Content-Type": "text/plain"}
    )
    return {"status": reply["statusCode"], "message": body(reply).get("error")}


def test_a_file_the_receiver_refuses_says_why_in_the_uploads_status(tmp_path: Path) -> None:
    """Refused by the receiver (over the grant's size, unreadable, over the workspace's storage
    ceiling): the reply says it, and so does ``GET /uploads/{uploadId}`` (the page's poll), in the
    words ``POST /documents`` uses for the same file; only the uploader reads it."""
    api = make_api({"MAX_UPLOAD_BYTES": "60", "MAX_WORKSPACE_BYTES": "50"}, blobs=FileBlobStore(tmp_path))
    cases = [
        ("big.txt", b"x" * 61, 413),  # over MAX_UPLOAD_BYTES: refused before the grant is claimed
        ("bad.txt", b"\x80\x81\x82 nope", 400),  # not text: refused by the ingestion (claimed)
        ("full.txt", b"The tide tables for the harbour, week 48.\n" + b"." * 10, 413),  # over the ceiling
    ]
    for name, data, status in cases:
        ticket = body(presign(api, {"filename": name}))
        landed = post_file(api, ticket, data)
        assert landed["statusCode"] == status, landed
        said = _said(api, ticket)
        assert said == {
            "uploadId": ticket["uploadId"],
            "refused": {"status": status, "message": body(landed)["error"]},
        }
        if name != "big.txt":  # POST /documents has its own, smaller, body limit
            assert said["refused"] == _documents_says(api, name, data)
        assert _said(api, ticket, principal="mallory")["statusCode"] == 404  # the uploader's only
    assert body(api.call("GET", "/documents"))["items"] == []
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix == ".txt"]  # nothing kept


def test_a_replay_refused_leaves_what_the_upload_became(local_api: Api) -> None:
    ticket = body(presign(local_api, {"filename": "tides.txt"}))
    assert post_file(local_api, ticket, b"High water at six.\n")["statusCode"] == 201
    assert post_file(local_api, ticket, b"Rewritten.\n")["statusCode"] == 409  # the grant is used
    said = _said(local_api, ticket)
    assert "refused" not in said and said["documentId"] == ticket["documentId"]


def test_an_upload_over_the_daily_ceiling_says_so_in_the_uploads_status() -> None:
    api = make_api(
        {"ENABLE_RATE_LIMITING": "true", "RATE_LIMIT_REQUESTS": "100", "INGEST_DOCUMENTS_PER_DAY": "1"}
    )
    first = body(presign(api, {"filename": "one.txt"}))
    assert post_file(api, first, b"The first file of the day.\n")["statusCode"] == 201
    second = body(presign(api, {"filename": "two.txt"}))
    landed = post_file(api, second, b"The second file of the day.\n")
    assert landed["statusCode"] == 429, landed
    said = _said(api, second)["refused"]
    assert said == {"status": 429, "message": body(landed)["error"]}
    assert said["message"].startswith("Daily document limit reached")


def test_a_body_declared_too_large_before_it_is_read_says_so_in_the_uploads_status(local_api: Api) -> None:
    """``ragchat serve`` checks the grant against the declared Content-Length before reading the body
    (413): that refusal is the upload's outcome too."""
    from ragchat.domain.errors import PayloadTooLarge

    ticket = body(presign(local_api, {"filename": "huge.txt"}))
    token = ticket["url"].rsplit("/", 1)[-1]
    with pytest.raises(PayloadTooLarge) as refused:
        local_api.container.uploads.check_grant(token, 10**10)
    said = _said(local_api, ticket)["refused"]
    assert said == {"status": 413, "message": refused.value.message}
    assert said["message"].startswith("The file is too large (10000.0 MB)")
