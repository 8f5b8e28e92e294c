"""Same content, same document (issue 21): the same bytes under the same file name (or ``source``), for
the same owner and collection, answer 200 ``"duplicate": true`` with the existing document and start
nothing; changed bytes under that name are a new version of it; anything else is another document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ragchat.adapters.local.files import FileBlobStore

from tests.events import json_body
from tests.fakes.services import run_to_end
from tests.unit.api_support import Api, make_api
from tests.unit.test_direct_uploads import body, post_file, presign

HOURS = b"The office is open from 8:30 to 17:00, Monday to Friday."
HOURS_V2 = b"The office is open from 9:00 to 17:30, Monday to Friday."


def upload(api: Api, data: bytes, name: str = "hours.txt", principal: str = "alice", **query: str) -> Any:
    res = api.call(
        "POST",
        "/documents",
        query={"filename": name, **query},
        raw_body=data,
        headers={"Content-Type": "text/plain"},
        principal=principal,
    )
    return res["statusCode"], json_body(res)


def listed(api: Api, principal: str = "alice") -> list[dict[str, Any]]:
    return list(json_body(api.call("GET", "/documents", principal=principal))["items"])


def the_body(api: Api, doc_id: str) -> str:
    return str(json_body(api.call("GET", f"/documents/{doc_id}", query={"include": "body"}))["body"])


def test_the_same_file_again_is_the_same_document_and_nothing_is_reingested() -> None:
    api = make_api()
    status, first = upload(api, HOURS)
    assert (status, first["duplicate"]) == (202, False)
    status, again = upload(api, HOURS)
    assert status == 200
    assert again == {
        "documentId": first["documentId"],
        "status": "READY",
        "duplicate": True,
        "title": "hours.txt",
        "message": f"Already there: “hours.txt” ({first['documentId']}) has exactly this content; "
        "nothing new was added.",
        "otherDocument": False,
    }
    assert [d["id"] for d in listed(api)] == [first["documentId"]]
    assert len(api.launcher.started) == 1  # one ingestion, not two


def test_a_changed_file_under_the_same_name_is_a_new_version_of_it() -> None:
    api = make_api()
    _, first = upload(api, HOURS)
    assert "newVersion" not in first  # the first upload is no new version of anything
    status, second = upload(api, HOURS_V2)
    assert (status, second["documentId"], second["duplicate"]) == (202, first["documentId"], False)
    assert second["newVersion"] is True  # the client is told it replaces the earlier bytes
    assert [d["id"] for d in listed(api)] == [first["documentId"]]
    assert "9:00" in the_body(api, first["documentId"])
    status, back = upload(api, HOURS)  # the first bytes again: a version of their own, not the old one
    assert (status, back["duplicate"]) == (202, False)
    assert "8:30" in the_body(api, first["documentId"])


@pytest.mark.parametrize(
    ("name", "query"),
    [("hours.txt", {"collection": "hr"}), ("opening.txt", {})],
    ids=["another collection", "another name"],
)
def test_the_same_bytes_under_another_name_are_the_same_document(name: str, query: dict[str, str]) -> None:
    """Issue 45 item 3: one document per content in a workspace, whatever it is called."""
    api = make_api()
    _, first = upload(api, HOURS)
    status, other = upload(api, HOURS, name=name, **query)
    assert (status, other["duplicate"], other["otherDocument"]) == (200, True, True)
    assert other["documentId"] == first["documentId"] and other["title"] == "hours.txt"
    assert [d["id"] for d in listed(api)] == [first["documentId"]]
    assert len(api.launcher.started) == 1


def test_the_same_bytes_in_another_workspace_are_another_document() -> None:
    api = make_api()
    _, first = upload(api, HOURS)
    status, other = upload(api, HOURS, principal="bob")
    assert (status, other["duplicate"]) == (202, False)
    assert other["documentId"] != first["documentId"]
    assert "8:30" in the_body(api, first["documentId"])


def test_a_new_title_or_option_is_not_lost_as_a_duplicate() -> None:
    api = make_api()
    _, first = upload(api, HOURS)
    status, renamed = upload(api, HOURS, title="Office hours")
    assert (status, renamed["documentId"], renamed["duplicate"]) == (202, first["documentId"], False)
    assert listed(api)[0]["title"] == "Office hours"
    assert upload(api, HOURS)[1]["duplicate"] is True  # no title given: the stored one stands


def test_a_failed_document_posted_again_is_retried() -> None:
    api = make_api()
    _, first = upload(api, HOURS)
    api.documents.update_document("alice", first["documentId"], {"status": "FAILED", "error": "boom"})
    status, retried = upload(api, HOURS)
    assert (status, retried["duplicate"]) == (202, False)
    assert json_body(api.call("GET", f"/documents/{first['documentId']}"))["status"] == "READY"


def test_a_stuck_copy_posted_again_is_started_again() -> None:
    """Issue 43: a document a crash left PENDING answered ``duplicate: true`` to the same file and
    stayed PENDING: the user could not retry it. Its run is started again (the answer stays the
    duplicate's, the document moves on)."""
    api = make_api(run_pipeline=False)  # the first run never happens: the server died
    _, first = upload(api, HOURS)
    doc_id = first["documentId"]
    assert json_body(api.call("GET", f"/documents/{doc_id}"))["status"] == "PENDING"
    api.launcher.run = lambda owner, doc: run_to_end(api.container.ingest_steps, [(owner, doc)])

    status, again = upload(api, HOURS)

    assert (status, again["duplicate"]) == (200, True)
    assert json_body(api.call("GET", f"/documents/{doc_id}"))["status"] == "READY"
    assert len(api.launcher.started) == 2


def test_a_copy_whose_run_is_under_way_is_not_started_twice() -> None:
    api = make_api(run_pipeline=False)
    _, first = upload(api, HOURS)
    api.launcher.in_flight = lambda owner, doc: (owner, doc) == ("alice", first["documentId"])  # type: ignore[attr-defined]
    status, again = upload(api, HOURS)
    assert (status, again["duplicate"], again["status"]) == (200, True, "PENDING")
    assert len(api.launcher.started) == 1


def test_a_note_with_a_source_is_known_by_it() -> None:
    api = make_api()

    def post(text: str, **fields: Any) -> Any:
        res = api.call("POST", "/notes", body={"text": text, **fields})
        return res["statusCode"], json_body(res)

    _, first = post("Visitors park behind the building.", source="wiki:parking")
    status, again = post("Visitors park behind the building.", source="wiki:parking")
    assert (status, again["documentId"], again["duplicate"]) == (200, first["documentId"], True)
    status, edited = post("Visitors park in the yard.", source="wiki:parking")
    assert (status, edited["documentId"], edited["duplicate"]) == (202, first["documentId"], False)
    status, plain = post("Visitors park in the yard.")  # no source, the same text: that document
    assert (status, plain["documentId"], plain["otherDocument"]) == (200, first["documentId"], True)
    _, other = post("Visitors park on the roof.")  # other text: a new one
    assert other["documentId"] != first["documentId"]
    assert len(listed(api)) == 2


@pytest.fixture
def local_api(tmp_path: Path) -> Api:
    blobs = FileBlobStore(tmp_path / "blobs")
    api = make_api(blobs=blobs)
    blobs.clock = api.clock
    return api


def test_a_direct_upload_of_the_same_file_is_a_duplicate_and_leaves_no_second_copy(
    local_api: Api, tmp_path: Path
) -> None:
    first_ticket = body(presign(local_api, {"filename": "hours.txt"}))
    assert body(post_file(local_api, first_ticket, HOURS))["duplicate"] is False
    second_ticket = body(presign(local_api, {"filename": "hours.txt"}))
    assert second_ticket["documentId"] == first_ticket["documentId"]
    response = post_file(local_api, second_ticket, HOURS)
    assert response["statusCode"] == 200
    assert body(response)["duplicate"] is True
    stored = sorted(p.relative_to(tmp_path / "blobs").as_posix() for p in (tmp_path / "blobs").rglob("*.txt"))
    # one body, at the document's place: the second upload left nothing behind
    assert stored == [f"documents/alice/{first_ticket['documentId']}/body.txt"]
    status, via_api = upload(local_api, HOURS)  # the same file through POST /documents
    assert (status, via_api["documentId"], via_api["duplicate"]) == (200, first_ticket["documentId"], True)


def test_a_changed_direct_upload_replaces_the_body(local_api: Api, tmp_path: Path) -> None:
    first_ticket = body(presign(local_api, {"filename": "hours.txt"}))
    post_file(local_api, first_ticket, HOURS)
    second_ticket = body(presign(local_api, {"filename": "hours.txt"}))
    assert post_file(local_api, second_ticket, HOURS_V2)["statusCode"] == 201
    assert "9:00" in the_body(local_api, first_ticket["documentId"])
    stored = sorted(p.relative_to(tmp_path / "blobs").as_posix() for p in (tmp_path / "blobs").rglob("*.txt"))
    assert stored == [f"documents/alice/{first_ticket['documentId']}/body.txt"]  # one body: the new one
