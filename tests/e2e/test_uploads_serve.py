"""Direct uploads end to end against ``ragchat serve`` (issue 11): ask for a presigned POST, POST the
file with the fields (no bearer token: the signed URL is the grant), poll the document until READY,
then find it in an answer."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.e2e.conftest import Server

pytestmark = pytest.mark.e2e

TEXT = (
    "The lighthouse of Alexandria stood on the island of Pharos. It was about one hundred metres tall "
    "and its fire could be seen from fifty kilometres out at sea, guiding ships into the harbour."
)


def form(fields: dict[str, str], filename: str, data: bytes) -> tuple[dict[str, str], bytes]:
    """A browser's form POST: every field, then the file last."""
    boundary = uuid.uuid4().hex
    out = b""
    for name, value in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
    out += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    return {
        "Content-Type": f"multipart/form-data; boundary={boundary}"
    }, out + data + f"\r\n--{boundary}--\r\n".encode()


def post_form(server: Server, ticket: dict[str, Any], data: bytes) -> Any:
    assert ticket["url"].startswith(server.url + "/uploads/local/"), ticket["url"]
    headers, body = form(ticket["fields"], "pharos.txt", data)
    return server.request("POST", ticket["url"][len(server.url) :], data=body, headers=headers, token=False)


def test_a_presigned_upload_becomes_a_ready_document_and_answers(server: Server) -> None:
    res = server.request(
        "POST", "/uploads", body={"filename": "pharos.txt", "title": "Pharos", "collection": "e2e-up"}
    )
    assert res.status == 201, res.body
    ticket = res.json()

    posted = post_form(server, ticket, TEXT.encode())
    assert posted.status == 201, posted.body
    doc = server.wait_document(ticket["documentId"])
    assert (doc["status"], doc["title"], doc["collection"]) == ("READY", "Pharos", "e2e-up")

    answer = server.request(
        "GET", "/?text=How+tall+was+the+lighthouse+of+Alexandria%3F&collection=e2e-up"
    ).json()
    assert any(s["id"].startswith(ticket["documentId"]) for s in answer["sources"]), answer
    assert "hundred metres" in answer["answer"]

    data_dir = server.log.parent
    copies = [  # the server is shared with other e2e tests: look at this document's blobs only
        p
        for p in (data_dir / "blobs").rglob("*")
        if p.is_file() and p.name.startswith("body") and ticket["documentId"] in p.parts
    ]
    # stored once, at the document's place; nothing at the form's one-time key
    assert [p.name for p in copies] == ["body.txt"]
    assert not (data_dir / "blobs" / ticket["key"]).exists()
    assert server.request("DELETE", f"/documents/{ticket['documentId']}").status == 204
    assert not copies[0].exists()


def test_the_grant_is_checked(server: Server) -> None:
    ticket = server.request("POST", "/uploads", body={"filename": "big.txt"}).json()
    too_big = post_form(server, ticket, b"x" * (ticket["maxBytes"] + 1))
    assert too_big.status == 413, too_big.body
    forged = dict(ticket, url=ticket["url"][:-4] + "AAAA")
    assert post_form(server, forged, b"hello").status == 403
    assert server.request("GET", f"/documents/{ticket['documentId']}").status == 404
    assert server.request("POST", "/uploads", body={"filename": "a.txt"}, token=False).status == 401
