"""Attack 2 (the upload receiver parsed 200,000 multipart parts before checking the grant: 58 s per
unauthenticated request) and attack 4 (one grant used 20 times; presigned S3 POSTs likewise)."""

from __future__ import annotations

import http.client
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ragchat.adapters.local.files import FileBlobStore
from ragchat.domain.errors import TransientError
from ragchat.entrypoints.s3_ingest import ingest_s3_event
from ragchat.local_server import LocalServer

from tests.unit.api_support import Api, make_api
from tests.unit.test_direct_uploads import body, multipart, post_file, presign

PARTS = 200_000


def _many_parts(n: int) -> tuple[str, bytes]:
    boundary = uuid.uuid4().hex
    parts = b"".join(
        b'--%s\r\nContent-Disposition: form-data; name="f%d"\r\n\r\nx\r\n' % (boundary.encode(), i)
        for i in range(n)
    )
    return f"multipart/form-data; boundary={boundary}", parts + f"--{boundary}--\r\n".encode()


@pytest.fixture
def local_api(tmp_path: Path) -> Api:
    blobs = FileBlobStore(tmp_path / "blobs")
    api = make_api(blobs=blobs)
    blobs.clock = api.clock
    return api


@pytest.fixture
def server(local_api: Api) -> Iterator[tuple[Api, int]]:
    local = LocalServer(local_api.container, port=0)
    local.start()
    try:
        yield local_api, int(local.httpd.server_address[1])
    finally:
        local.stop()


def _post(port: int, path: str, ctype: str, data: bytes) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, body=data, headers={"Content-Type": ctype})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def test_a_forged_grant_is_refused_before_the_body_is_read(server: tuple[Api, int]) -> None:
    api, port = server
    ctype, data = _many_parts(PARTS)  # ~12 MB of tiny parts
    started, cpu = time.perf_counter(), time.process_time()
    status, answer = _post(port, "/uploads/local/forged.token", ctype, data)
    wall, used = time.perf_counter() - started, time.process_time() - cpu
    assert status == 403 and answer["error"] == "Invalid upload token"
    assert wall < 20 and used < 10, f"{wall:.1f} s wall, {used:.1f} s CPU (was 58 s / 43.6 s)"
    assert body(api.call("GET", "/documents"))["items"] == []


def test_a_valid_grant_with_200000_parts_is_refused_at_the_part_cap(server: tuple[Api, int]) -> None:
    api, port = server
    ticket = body(presign(api, {"filename": "a.txt"}))
    ctype, data = _many_parts(PARTS)
    started = time.process_time()
    status, answer = _post(port, "/uploads/local/" + ticket["url"].rsplit("/", 1)[1], ctype, data)
    assert status == 400 and "Too many parts" in answer["error"]
    assert time.process_time() - started < 10
    assert body(api.call("GET", "/documents"))["items"] == []
    # the refusal did not use the grant up: the real form still lands
    assert post_file(api, ticket, b"the real file")["statusCode"] == 201


def test_part_headers_are_capped(local_api: Api) -> None:
    ticket = body(presign(local_api, {"filename": "a.txt"}))
    ctype, raw = multipart(ticket["fields"], "a.txt", b"hello")
    boundary = ctype.split("boundary=")[1]
    huge = f'--{boundary}\r\nContent-Disposition: form-data; name="x"\r\nX-Pad: {"p" * 9000}\r\n\r\nv\r\n'
    path = ticket["url"].split("localhost:8000", 1)[1]
    res = local_api.call(
        "POST", path, raw_body=huge.encode() + raw, headers={"Content-Type": ctype}, principal=None
    )
    assert res["statusCode"] == 400 and "8192 bytes" in body(res)["error"]


def test_a_local_grant_replayed_20_times_ingests_once(local_api: Api) -> None:
    ticket = body(presign(local_api, {"filename": "once.txt"}))
    statuses = [post_file(local_api, ticket, f"version {i}".encode())["statusCode"] for i in range(20)]
    assert statuses == [201] + [409] * 19
    assert [d["id"] for d in body(local_api.call("GET", "/documents"))["items"]] == [ticket["documentId"]]


def test_the_server_refuses_a_used_grant_before_reading_the_body(server: tuple[Api, int]) -> None:
    api, port = server
    ticket = body(presign(api, {"filename": "a.txt"}))
    assert post_file(api, ticket, b"first")["statusCode"] == 201
    ctype, data = multipart(ticket["fields"], "a.txt", b"replayed")
    status, answer = _post(port, "/uploads/local/" + ticket["url"].rsplit("/", 1)[1], ctype, data)
    assert status == 409 and "used already" in answer["error"]


def test_the_receiver_has_a_per_ip_limit(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    api = make_api(
        {
            "ENABLE_RATE_LIMITING": "true",
            "RATE_LIMIT_RECEIVER_REQUESTS": "2",
            "RATE_LIMIT_UPLOADS_REQUESTS": "50",
        },
        blobs=blobs,
    )
    blobs.clock = api.clock
    tickets = [body(presign(api, {"filename": f"{i}.txt"})) for i in range(3)]
    # distinct bytes: the same bytes twice would be one document (200, duplicate), not a second 201
    results = [post_file(api, t, f"data {i}".encode()) for i, t in enumerate(tickets)]
    assert [r["statusCode"] for r in results] == [201, 201, 429]
    assert "Retry-After" in (results[2].get("headers") or {}) or results[2].get("multiValueHeaders")


def _s3_event(bucket: str, key: str, size: int) -> dict[str, Any]:
    return {"Records": [{"s3": {"bucket": {"name": bucket}, "object": {"key": key, "size": size}}}]}


def test_a_presigned_s3_post_replayed_is_ingested_once_and_overwrites_nothing() -> None:
    api = make_api({"DOCUMENTS_BUCKET": "docs"})
    ticket = body(presign(api, {"filename": "s3.txt"}))
    key, meta = (
        ticket["key"],
        {k[len("x-amz-meta-") :]: v for k, v in ticket["fields"].items() if "meta" in k},
    )
    blobs = api.container.blobs
    results = []
    for i in range(3):  # S3 accepts each replayed POST within the expiry; the trigger fires each time
        blobs.put(key, f"upload {i}".encode(), content_type="text/plain")
        blobs.metadata[key] = meta  # type: ignore[attr-defined]
        results.append(ingest_s3_event(api.container, _s3_event("docs", key, 8)))
    assert [len(r["accepted"]) for r in results] == [1, 0, 0]
    assert "used already" in results[1]["rejected"][0]["error"]
    assert [d["id"] for d in body(api.call("GET", "/documents"))["items"]] == [ticket["documentId"]]
    # the document's bytes are the first upload's, out of the POST's reach; the replays are gone
    doc = body(api.call("GET", f"/documents/{ticket['documentId']}", query={"include": "body"}))
    assert doc["body"] == "upload 0"
    assert blobs.keys("uploads/") == []  # type: ignore[attr-defined]


def test_a_storage_failure_gives_the_grant_back_so_the_retried_event_ingests_the_file() -> None:
    api = make_api({"DOCUMENTS_BUCKET": "docs"})
    ticket = body(presign(api, {"filename": "retry.txt"}))
    key = ticket["key"]
    meta = {k[len("x-amz-meta-") :]: v for k, v in ticket["fields"].items() if "meta" in k}
    blobs = api.container.blobs
    blobs.put(key, b"the file", content_type="text/plain")
    blobs.metadata[key] = meta  # type: ignore[attr-defined]
    real_put, failures = blobs.put, [TransientError("S3 is slow down")]

    def flaky_put(k: str, data: bytes, **kw: Any) -> None:
        if k.startswith("documents/") and failures:
            raise failures.pop()
        real_put(k, data, **kw)

    blobs.put = flaky_put  # type: ignore[method-assign,assignment]
    with pytest.raises(TransientError):  # Lambda retries the event
        ingest_s3_event(api.container, _s3_event("docs", key, 8))
    assert blobs.keys("uploads/") == [key]  # type: ignore[attr-defined]  # kept for the retry
    assert len(ingest_s3_event(api.container, _s3_event("docs", key, 8))["accepted"]) == 1
    doc = body(api.call("GET", f"/documents/{ticket['documentId']}", query={"include": "body"}))
    assert doc["body"] == "the file" and blobs.keys("uploads/") == []  # type: ignore[attr-defined]


def test_an_object_dropped_into_the_bucket_still_replaces_its_document() -> None:
    api = make_api({"DOCUMENTS_BUCKET": "docs"})
    key = "uploads/local/report.txt"  # no grant: an operator's drop, re-uploads replace (docs/ingestion.md)
    for i in range(2):
        api.container.blobs.put(key, f"version {i}".encode(), content_type="text/plain")
        assert len(ingest_s3_event(api.container, _s3_event("docs", key, 9))["accepted"]) == 1
