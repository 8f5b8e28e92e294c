"""Direct uploads on moto (issue 11): ``POST /uploads`` through the notes function → the file POSTed
to S3 with the presigned fields → the S3 trigger → the real state machine → the document READY, its
body moved from the one-time staging key to the document's place, deleted with the document. A
replayed presigned POST (issue 20) is refused by the trigger and changes nothing."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import requests
from ragchat.domain.file_errors import too_large

from tests.integration.moto_stack import BUCKET, Stack, load_event

SUB = load_event("notes_post.json")["requestContext"]["authorizer"]["claims"]["sub"]
MiB = 1024 * 1024


def api_event(method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    event = copy.deepcopy(load_event("notes_post.json"))
    event.update(resource=path, path=path, httpMethod=method, body=json.dumps(payload) if payload else None)
    event["requestContext"].update(resourcePath=path, httpMethod=method, path=f"/dev{path}")
    return event


def s3_event(key: str) -> dict[str, Any]:
    event = load_event("s3_upload_put.json")
    record = event["Records"][0]["s3"]
    record["bucket"]["name"] = BUCKET
    record["object"]["key"] = key
    return event


def test_a_presigned_upload_is_ingested_and_moved_to_the_documents_place(stack: Stack) -> None:
    notes = stack.handler("notes_api")
    request = {"filename": "eiffel-tower.md", "title": "Tour Eiffel é", "collection": "travel"}
    response = notes(api_event("POST", "/uploads", request), None)
    assert response["statusCode"] == 201, response
    ticket = json.loads(response["body"])
    key = ticket["key"]
    assert key.startswith(f"uploads/{SUB}/")
    # SigV4 for the bucket's regional URL (no redirect a browser's cross-origin POST would not follow)
    assert ticket["url"] == f"https://{BUCKET}.s3.us-east-1.amazonaws.com/"
    assert ticket["fields"]["x-amz-algorithm"] == "AWS4-HMAC-SHA256"

    policy = json.loads(base64.b64decode(ticket["fields"]["policy"]))
    conditions = policy["conditions"]
    assert ["content-length-range", 1, 500 * MiB] in conditions
    assert {"Content-Type": "text/markdown"} in conditions and {"key": key} in conditions
    assert {"x-amz-meta-collection": "travel"} in conditions
    assert {"x-amz-meta-title": ticket["fields"]["x-amz-meta-title"]} in conditions
    assert policy["expiration"].startswith("20")

    text = b"# Eiffel Tower\n\nThe tower is 330 metres tall.\n"
    posted = requests.post(
        ticket["url"], data=ticket["fields"], files={"file": ("eiffel-tower.md", text)}, timeout=30
    )
    assert posted.status_code in (200, 201, 204), posted.text

    # Before the trigger has run the document does not exist yet: the client keeps polling.
    before = notes(api_event("GET", f"/documents/{ticket['documentId']}"), None)
    assert before["statusCode"] == 404

    result = stack.handler("s3_ingest")(s3_event(key), None)
    assert result["accepted"][0]["documentId"] == ticket["documentId"]
    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution

    doc = json.loads(notes(api_event("GET", f"/documents/{ticket['documentId']}"), None)["body"])
    assert (doc["status"], doc["title"], doc["collection"]) == ("READY", "Tour Eiffel é", "travel")
    assert doc["chunkCount"] >= 1
    body_key = f"documents/{SUB}/{ticket['documentId']}/body.md"
    assert bucket_keys(stack) == [body_key]  # stored once: the staging key is gone
    assert stack.s3.get_object(Bucket=BUCKET, Key=body_key)["Body"].read() == text

    deleted = notes(api_event("DELETE", f"/documents/{ticket['documentId']}"), None)
    assert deleted["statusCode"] == 204
    assert stack.s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


def bucket_keys(stack: Stack) -> list[str]:
    return [o["Key"] for o in stack.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]


def test_a_replayed_presigned_post_is_refused_and_the_original_stays(stack: Stack) -> None:
    notes, trigger = stack.handler("notes_api"), stack.handler("s3_ingest")
    ticket = json.loads(notes(api_event("POST", "/uploads", {"filename": "plan.md"}), None)["body"])
    original, forged = b"# Plan\n\nThe original plan.\n", b"# Plan\n\nSomething else entirely.\n"

    def post(data: bytes) -> int:
        files = {"file": ("plan.md", data)}
        return requests.post(ticket["url"], data=ticket["fields"], files=files, timeout=30).status_code

    assert post(original) in (200, 201, 204)
    assert trigger(s3_event(ticket["key"]), None)["accepted"][0]["documentId"] == ticket["documentId"]
    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution
    body_key = f"documents/{SUB}/{ticket['documentId']}/body.md"

    # The same form again within its expiry: S3 stores it (a form POST cannot be conditional), but
    # only on the staging key; the trigger refuses it (logged) and removes it.
    assert post(forged) in (200, 201, 204)
    assert bucket_keys(stack) == [body_key, ticket["key"]]
    result = trigger(s3_event(ticket["key"]), None)
    assert result["accepted"] == [] and "used already" in result["rejected"][0]["error"]

    assert bucket_keys(stack) == [body_key]
    assert stack.s3.get_object(Bucket=BUCKET, Key=body_key)["Body"].read() == original
    assert len(stack.wait_for_all(1)) == 1  # nothing ingested twice
    read = api_event("GET", f"/documents/{ticket['documentId']}")
    read["queryStringParameters"] = {"include": "body"}
    doc = json.loads(notes(read, None)["body"])
    # on S3 the text comes as ``bodyUrl``, a presigned GET of the stored body
    text = requests.get(doc["bodyUrl"], timeout=30).text
    assert doc["status"] == "READY" and "The original plan." in text


def test_a_bad_upload_request_is_400_and_signs_nothing(stack: Stack) -> None:
    response = stack.handler("notes_api")(api_event("POST", "/uploads", {"filename": "setup.exe"}), None)
    assert response["statusCode"] == 400
    assert "This file type is not supported" in json.loads(response["body"])["error"]


def test_a_pdf_page_is_rendered_from_its_original_in_s3(stack: Stack) -> None:
    """The document viewer's page image (issue 33) on the cloud path: the notes function reads the
    original PDF from S3 under the template's role (the harness evaluates its IAM) and renders it."""
    from tests.pdfs import make_pdf

    notes = stack.handler("notes_api")
    ticket = json.loads(notes(api_event("POST", "/uploads", {"filename": "guide.pdf"}), None)["body"])
    pdf = make_pdf(["The fuel dock opens at 7.", "Swimming in the harbour is forbidden."])
    posted = requests.post(
        ticket["url"], data=ticket["fields"], files={"file": ("guide.pdf", pdf)}, timeout=30
    )
    assert posted.status_code in (200, 201, 204), posted.text
    assert stack.handler("s3_ingest")(s3_event(ticket["key"]), None)["accepted"]
    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution

    shown = notes(api_event("GET", f"/documents/{ticket['documentId']}/pages/2"), None)
    assert shown["statusCode"] == 200, shown
    page = json.loads(shown["body"])
    assert (page["page"], page["pages"]) == (2, 2)
    png = base64.b64decode(page["image"].split(",", 1)[1])
    assert png.startswith(b"\x89PNG") and page["width"] >= 890
    past = notes(api_event("GET", f"/documents/{ticket['documentId']}/pages/3"), None)
    assert past["statusCode"] == 404
    # the cited sentence boxed on the image (issue 45), in the function's own process: line 1 of page 2
    find = api_event("GET", f"/documents/{ticket['documentId']}/pages/2")
    find["queryStringParameters"] = {"find": "Swimming in the harbour is forbidden."}
    (mark,) = json.loads(notes(find, None)["body"])["marks"]
    assert mark["y"] < (792 - 720) / 792 < mark["y"] + mark["height"] and abs(mark["x"] - 72 / 612) < 0.005


def test_bytes_already_there_are_named_when_the_upload_is_asked_for_not_after_s3(stack: Stack) -> None:
    """Issue 45: S3's reply to the form POST is S3's own, and a duplicate found by the trigger leaves
    the grant's ``documentId`` a 404 (the page read "not found"). With the file's SHA-256 the grant
    itself says the bytes are already there, with the existing document's title, and nothing is
    signed or sent."""
    import hashlib

    notes, trigger = stack.handler("notes_api"), stack.handler("s3_ingest")
    text = b"# Harbour\n\nThe mooring fee is twelve crowns a night.\n"
    first = {"filename": "harbour.md", "title": "Harbour fees"}
    ticket = json.loads(notes(api_event("POST", "/uploads", first), None)["body"])
    files = {"file": ("harbour.md", text)}
    assert requests.post(ticket["url"], data=ticket["fields"], files=files, timeout=30).status_code == 204
    assert trigger(s3_event(ticket["key"]), None)["accepted"]
    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution

    digest = hashlib.sha256(text).hexdigest()
    again = {"filename": "copy of harbour.md", "collection": "travel", "sha256": digest.upper()}
    reply = notes(api_event("POST", "/uploads", again), None)
    assert reply["statusCode"] == 200, reply
    said = json.loads(reply["body"])
    assert said["duplicate"] is True and said["otherDocument"] is True
    assert (said["documentId"], said["title"], said["status"]) == (
        ticket["documentId"],
        "Harbour fees",
        "READY",
    )
    assert said["message"].startswith("Already there: “Harbour fees”")
    assert "url" not in said and "fields" not in said  # nothing to send
    assert bucket_keys(stack) == [f"documents/{SUB}/{ticket['documentId']}/body.md"]

    other = {"filename": "other.md", "sha256": hashlib.sha256(b"other bytes").hexdigest()}
    granted = notes(api_event("POST", "/uploads", other), None)
    assert granted["statusCode"] == 201 and "url" in json.loads(granted["body"])
    bad = notes(api_event("POST", "/uploads", {"filename": "x.md", "sha256": "not-a-hash"}), None)
    assert bad["statusCode"] == 400 and "sha256" in json.loads(bad["body"])["error"]


def test_a_copy_the_trigger_finds_is_said_by_the_uploads_status_not_left_a_404(stack: Stack) -> None:
    """Issue 45: two uploads of the same bytes granted before either landed (or a file the page did
    not hash, over 256 MB): S3 takes both, the trigger finds the second a copy of the first, and the
    second grant's ``documentId`` never comes. ``GET /uploads/{uploadId}`` says what it became: the
    first document, by its title, at once (the page said "no document came of it" 16 minutes on)."""
    notes, trigger = stack.handler("notes_api"), stack.handler("s3_ingest")
    text = b"# Lighthouse\n\nThe lamp is lit at sunset and put out at dawn.\n"
    first = json.loads(
        notes(api_event("POST", "/uploads", {"filename": "lamp.md", "title": "Lamp hours"}), None)["body"]
    )
    second = json.loads(notes(api_event("POST", "/uploads", {"filename": "lamp copy.md"}), None)["body"])
    assert first["uploadId"] and first["uploadId"] in first["key"] and second["uploadId"] in second["key"]
    for ticket, name in ((first, "lamp.md"), (second, "lamp copy.md")):
        posted = requests.post(ticket["url"], data=ticket["fields"], files={"file": (name, text)}, timeout=30)
        assert posted.status_code == 204, posted.text  # S3's own reply: it cannot say "already there"
    waiting = notes(api_event("GET", f"/uploads/{second['uploadId']}"), None)
    assert waiting["statusCode"] == 404  # not taken in yet: the page keeps waiting

    assert trigger(s3_event(first["key"]), None)["accepted"]
    assert trigger(s3_event(second["key"]), None)["accepted"][0]["documentId"] == first["documentId"]
    (execution,) = stack.wait_for_all(1)  # one document, one run
    assert execution["status"] == "SUCCEEDED", execution

    assert notes(api_event("GET", f"/documents/{second['documentId']}"), None)["statusCode"] == 404
    reply = notes(api_event("GET", f"/uploads/{second['uploadId']}"), None)
    assert reply["statusCode"] == 200, reply
    said = json.loads(reply["body"])
    assert (said["uploadId"], said["documentId"], said["title"], said["status"]) == (
        second["uploadId"],
        first["documentId"],
        "Lamp hours",
        "READY",
    )
    assert said["duplicate"] is True and said["otherDocument"] is True
    assert said["message"].startswith("Already there: “Lamp hours”")
    own = json.loads(notes(api_event("GET", f"/uploads/{first['uploadId']}"), None)["body"])
    assert (own["documentId"], own["duplicate"]) == (first["documentId"], False)
    assert bucket_keys(stack) == [f"documents/{SUB}/{first['documentId']}/body.md"]  # the copy is gone

    # only its uploader reads it; an id never granted is the same 404
    stranger = api_event("GET", f"/uploads/{second['uploadId']}")
    stranger["requestContext"]["authorizer"]["claims"]["sub"] = "someone-else"
    assert notes(stranger, None)["statusCode"] == 404
    assert notes(api_event("GET", "/uploads/01JNEVERGRANTED0000000000A"), None)["statusCode"] == 404


def test_a_file_the_trigger_refuses_says_why_in_the_uploads_status(stack: Stack) -> None:
    """Issue 45: a file the trigger refuses (too large for MAX_UPLOAD_BYTES, lowered since the grant;
    a file it cannot read) left nothing, and the page waited out the grant, then said "no document
    came of it". ``GET /uploads/{uploadId}`` now says why, as ``POST /documents`` words it; the
    too-large object is kept (refused before it is read), the unreadable one removed, as before."""
    notes, trigger = stack.handler("notes_api"), stack.handler("s3_ingest")
    big = json.loads(notes(api_event("POST", "/uploads", {"filename": "atlas.txt"}), None)["body"])
    bad = json.loads(notes(api_event("POST", "/uploads", {"filename": "minutes.docx"}), None)["body"])
    atlas = b"Charts of the coast. " * 4
    for ticket, name, data in ((big, "atlas.txt", atlas), (bad, "minutes.docx", b"not a zip at all")):
        posted = requests.post(ticket["url"], data=ticket["fields"], files={"file": (name, data)}, timeout=30)
        assert posted.status_code == 204, posted.text
    stack.container.settings.max_upload_bytes = 64  # lowered by the operator after the grant

    event = s3_event(big["key"])
    event["Records"][0]["s3"]["object"]["size"] = len(atlas)
    assert trigger(event, None)["rejected"][0]["key"] == big["key"]
    event = s3_event(bad["key"])
    event["Records"][0]["s3"]["object"]["size"] = len(b"not a zip at all")
    assert trigger(event, None)["rejected"][0]["key"] == bad["key"]

    said = json.loads(notes(api_event("GET", f"/uploads/{big['uploadId']}"), None)["body"])
    assert said == {
        "uploadId": big["uploadId"],
        "refused": {"status": 413, "message": too_large(len(atlas), 64)},  # as POST /documents says
    }
    said = json.loads(notes(api_event("GET", f"/uploads/{bad['uploadId']}"), None)["body"])
    direct = api_event("POST", "/documents")
    direct.update(body=base64.b64encode(b"not a zip at all").decode(), isBase64Encoded=True)
    direct["headers"] = {**(direct.get("headers") or {}), "X-Filename": "minutes.docx"}
    direct["headers"]["Content-Type"] = "application/octet-stream"
    answered = notes(direct, None)
    assert said["refused"] == {
        "status": answered["statusCode"],
        "message": json.loads(answered["body"])["error"],
    }
    assert said["refused"]["status"] == 400
    assert stack.executions() == []
    assert bucket_keys(stack) == [big["key"]]  # the too-large object as before; the unreadable one removed

    stranger = api_event("GET", f"/uploads/{big['uploadId']}")
    stranger["requestContext"]["authorizer"]["claims"]["sub"] = "someone-else"
    assert notes(stranger, None)["statusCode"] == 404
