"""DocumentStore contract: every adapter registered in ``conftest.DOCUMENT_STORES`` must pass."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ragchat.domain.clock import utc_iso
from ragchat.domain.errors import Conflict, ValidationError
from ragchat.domain.ids import new_id, note_id
from ragchat.domain.models import Document, DocumentStatus, Note
from ragchat.ports import DocumentStore

from tests.fakes import FakeClock


def make_doc(owner: str = "alice", *, doc_id: str | None = None, collection: str | None = None) -> Document:
    return Document(
        id=doc_id or new_id(),
        owner=owner,
        title="A title",
        content_type="text/plain",
        source="api",
        body_key=f"documents/{owner}/body",
        metadata={"lang": "en", "tags": ["a", "b"], "nested": {"n": 1}},
        collection=collection,
    )


def make_notes(doc: Document, count: int) -> list[Note]:
    return [
        Note(
            id=note_id(doc.id, i),
            document_id=doc.id,
            chunk_index=i,
            text=f"chunk {i} of {doc.id}",
            owner=doc.owner,
            collection=doc.collection,
            metadata={"page": i + 1},
        )
        for i in range(count)
    ]


def walk_documents(store: DocumentStore, owner: str, limit: int, collection: str | None = None) -> list[str]:
    ids: list[str] = []
    cursor: str | None = None
    for _ in range(100):
        page = store.list_documents(owner, collection=collection, limit=limit, cursor=cursor)
        assert len(page.items) <= limit
        ids += [d.id for d in page.items]
        cursor = page.cursor
        if cursor is None:
            return ids
    raise AssertionError("pagination did not end")


def test_create_returns_the_record_as_stored_with_clock_timestamps(document_store, clock: FakeClock):
    doc = make_doc(collection="work")
    stored = document_store.create_document(doc)
    expected_time = utc_iso(clock())
    assert stored.created_at == stored.updated_at == expected_time
    assert stored.id == doc.id and stored.title == "A title" and stored.collection == "work"
    assert stored.status == DocumentStatus.PENDING and stored.enabled is True
    fetched = document_store.get_document("alice", doc.id)
    assert fetched == stored
    assert fetched.metadata == {"lang": "en", "tags": ["a", "b"], "nested": {"n": 1}}


def test_create_with_the_same_id_replaces_the_record(document_store, clock: FakeClock):
    doc = make_doc()
    document_store.create_document(doc)
    clock.advance(5)
    doc.title = "Replaced"
    doc.status = DocumentStatus.READY
    stored = document_store.create_document(doc)
    assert stored.title == "Replaced" and stored.status == DocumentStatus.READY
    assert stored.updated_at == utc_iso(clock())
    assert [d.id for d in document_store.list_documents("alice").items] == [doc.id]


def test_create_cannot_take_over_another_owners_document(document_store):
    doc = document_store.create_document(make_doc("alice"))
    with pytest.raises(Conflict):
        document_store.create_document(make_doc("mallory", doc_id=doc.id))
    assert document_store.get_document("alice", doc.id).owner == "alice"
    assert document_store.get_document("mallory", doc.id) is None


def test_update_applies_changes_and_bumps_updated_at_only(document_store, clock: FakeClock):
    doc = document_store.create_document(make_doc())
    clock.advance(60)
    updated = document_store.update_document(
        "alice",
        doc.id,
        {"status": DocumentStatus.READY, "chunk_count": 4, "enabled": False, "metadata": {"k": "v"}},
    )
    assert updated is not None
    assert updated.created_at == doc.created_at
    assert updated.updated_at == utc_iso(clock())
    assert (updated.status, updated.chunk_count, updated.enabled, updated.metadata) == (
        DocumentStatus.READY,
        4,
        False,
        {"k": "v"},
    )
    assert document_store.get_document("alice", doc.id) == updated
    assert document_store.update_document("alice", "missing", {"title": "x"}) is None


def test_update_refuses_fields_that_cannot_change(document_store):
    doc = document_store.create_document(make_doc())
    refused = ({"owner": "bob"}, {"id": "other"}, {"created_at": "x"}, {"title": "x", "updated_at": "x"})
    for changes in refused:
        with pytest.raises(ValueError):
            document_store.update_document("alice", doc.id, changes)
    assert document_store.get_document("alice", doc.id) == doc


def test_failed_status_keeps_its_error(document_store):
    doc = document_store.create_document(make_doc())
    document_store.update_document("alice", doc.id, {"status": DocumentStatus.FAILED, "error": "boom"})
    fetched = document_store.get_document("alice", doc.id)
    assert fetched.status == DocumentStatus.FAILED and fetched.error == "boom"


def test_another_owners_documents_are_invisible(document_store):
    doc = document_store.create_document(make_doc("alice"))
    assert document_store.get_document("bob", doc.id) is None
    assert document_store.list_documents("bob").items == []
    assert document_store.update_document("bob", doc.id, {"title": "pwned"}) is None
    assert document_store.delete_document("bob", doc.id) is False
    assert document_store.get_document("alice", doc.id).title == "A title"


def test_list_is_newest_first_and_pages_without_gaps_or_duplicates(document_store, clock: FakeClock):
    created = []
    for _ in range(7):
        created.append(document_store.create_document(make_doc()).id)
        clock.advance(1)
    document_store.create_document(make_doc("bob"))
    expected = list(reversed(created))
    for limit in (1, 3, 7, 50):
        assert walk_documents(document_store, "alice", limit) == expected
    first = document_store.list_documents("alice", limit=3)
    assert [d.id for d in first.items] == expected[:3] and first.cursor is not None
    last = document_store.list_documents("alice", limit=7)
    assert last.cursor is None


def test_documents_written_in_the_same_millisecond_keep_newest_first(document_store):
    # the clock does not move: ids (ULIDs, monotonic) break the tie
    created = [document_store.create_document(make_doc()).id for _ in range(5)]
    assert walk_documents(document_store, "alice", 2) == list(reversed(created))


def test_collection_filter(document_store, clock: FakeClock):
    a = document_store.create_document(make_doc(collection="work")).id
    clock.advance(1)
    document_store.create_document(make_doc(collection="home"))
    clock.advance(1)
    b = document_store.create_document(make_doc(collection="work")).id
    clock.advance(1)
    document_store.create_document(make_doc())
    assert walk_documents(document_store, "alice", 1, collection="work") == [b, a]
    assert document_store.list_documents("bob", collection="work").items == []


def test_invalid_cursor_is_a_validation_error(document_store):
    document_store.create_document(make_doc())
    for bad in ("not-a-cursor", "!!!", "e30"):
        with pytest.raises(ValidationError):
            document_store.list_documents("alice", cursor=bad)


def test_delete_document_removes_it_and_its_notes_only(document_store):
    doc = document_store.create_document(make_doc())
    other = document_store.create_document(make_doc())
    document_store.put_notes(make_notes(doc, 3) + make_notes(other, 2))
    assert document_store.delete_document("alice", doc.id) is True
    assert document_store.get_document("alice", doc.id) is None
    assert document_store.list_notes("alice", document_id=doc.id).items == []
    assert document_store.get_notes("alice", [note_id(doc.id, 0)]) == []
    assert len(document_store.list_notes("alice", document_id=other.id).items) == 2
    assert document_store.delete_document("alice", doc.id) is False


def test_put_notes_returns_them_as_stored_and_round_trips_metadata(document_store, clock: FakeClock):
    doc = document_store.create_document(make_doc(collection="work"))
    clock.advance(2)
    stored = document_store.put_notes(make_notes(doc, 2))
    assert [n.id for n in stored] == [note_id(doc.id, 0), note_id(doc.id, 1)]
    assert all(n.created_at == utc_iso(clock()) for n in stored)
    fetched = document_store.get_notes("alice", [n.id for n in stored])
    assert fetched == stored
    assert fetched[1].metadata == {"page": 2} and fetched[1].collection == "work"


def test_put_notes_twice_with_the_same_id_keeps_one_note(document_store):
    doc = document_store.create_document(make_doc())
    notes = make_notes(doc, 3)
    document_store.put_notes(notes)
    notes[1].text = "rewritten"
    document_store.put_notes(notes)
    listed = document_store.list_notes("alice", document_id=doc.id).items
    assert [n.id for n in listed] == [n.id for n in notes]
    assert listed[1].text == "rewritten"


def test_get_notes_follows_the_requested_order_and_skips_missing_and_foreign(document_store):
    doc = document_store.create_document(make_doc())
    theirs = document_store.create_document(make_doc("bob"))
    document_store.put_notes(make_notes(doc, 4) + make_notes(theirs, 1))
    ids = [note_id(doc.id, 3), "missing", note_id(theirs.id, 0), note_id(doc.id, 0), note_id(doc.id, 2)]
    assert [n.id for n in document_store.get_notes("alice", ids)] == [ids[0], ids[3], ids[4]]
    assert document_store.get_notes("alice", []) == []


def test_get_notes_returns_each_note_once(document_store):
    doc = document_store.create_document(make_doc())
    document_store.put_notes(make_notes(doc, 2))
    ids = [note_id(doc.id, 1), note_id(doc.id, 0), note_id(doc.id, 1)]
    assert [n.id for n in document_store.get_notes("alice", ids)] == ids[:2]


def test_notes_of_a_document_list_in_chunk_order_across_pages(document_store):
    doc = document_store.create_document(make_doc())
    notes = make_notes(doc, 7)
    document_store.put_notes([notes[i] for i in (4, 0, 6, 2, 1, 5, 3)])
    seen: list[int] = []
    cursor = None
    for _ in range(10):
        page = document_store.list_notes("alice", document_id=doc.id, limit=3, cursor=cursor)
        seen += [n.chunk_index for n in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == list(range(7))


def test_all_notes_list_newest_first_across_pages(document_store, clock: FakeClock):
    docs = []
    for _ in range(3):
        doc = document_store.create_document(make_doc())
        document_store.put_notes(make_notes(doc, 2))
        docs.append(doc)
        clock.advance(1)
    ids: list[str] = []
    cursor = None
    for _ in range(10):
        page = document_store.list_notes("alice", limit=4, cursor=cursor)
        ids += [n.id for n in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    assert len(ids) == len(set(ids)) == 6
    # documents written later come first
    assert {ids[0], ids[1]} == {note_id(docs[2].id, 0), note_id(docs[2].id, 1)}
    assert {ids[4], ids[5]} == {note_id(docs[0].id, 0), note_id(docs[0].id, 1)}
    assert document_store.list_notes("bob").items == []


def test_legacy_notes_without_a_document(document_store):
    note = Note(id=new_id(), document_id=None, chunk_index=0, text="loose note", owner="alice")
    document_store.put_notes([note])
    (listed,) = document_store.list_notes("alice").items
    assert listed.id == note.id and listed.document_id is None and listed.text == "loose note"


def test_delete_note_returns_it_once_and_never_for_another_owner(document_store):
    doc = document_store.create_document(make_doc())
    notes = document_store.put_notes(make_notes(doc, 2))
    assert document_store.delete_note("bob", notes[0].id) is None
    deleted = document_store.delete_note("alice", notes[0].id)
    assert deleted is not None and deleted.id == notes[0].id and deleted.text == notes[0].text
    assert document_store.delete_note("alice", notes[0].id) is None
    assert [n.id for n in document_store.list_notes("alice", document_id=doc.id).items] == [notes[1].id]


def test_delete_notes_of_document_returns_their_ids(document_store):
    doc = document_store.create_document(make_doc())
    other = document_store.create_document(make_doc())
    notes = make_notes(doc, 3)
    document_store.put_notes(notes + make_notes(other, 1))
    assert document_store.delete_notes_of_document("bob", doc.id) == []
    assert sorted(document_store.delete_notes_of_document("alice", doc.id)) == sorted(n.id for n in notes)
    assert document_store.list_notes("alice", document_id=doc.id).items == []
    assert document_store.get_document("alice", doc.id) is not None  # the record itself stays
    assert len(document_store.list_notes("alice", document_id=other.id).items) == 1


def test_delete_notes_of_document_with_a_limit_goes_a_page_at_a_time_in_chunk_order(document_store):
    """A big document is deleted a page per call (DELETE /documents/{id} within 29 s, issue 44)."""
    doc = document_store.create_document(make_doc())
    notes = make_notes(doc, 7)
    document_store.put_notes(notes)
    by_chunk = [n.id for n in sorted(notes, key=lambda n: n.chunk_index)]
    assert document_store.delete_notes_of_document("alice", doc.id, limit=3) == by_chunk[:3]
    assert document_store.delete_notes_of_document("alice", doc.id, limit=3) == by_chunk[3:6]
    left = [n.id for n in document_store.list_notes("alice", document_id=doc.id).items]
    assert left == by_chunk[6:]
    assert document_store.delete_notes_of_document("alice", doc.id, limit=3) == by_chunk[6:]
    assert document_store.delete_notes_of_document("alice", doc.id, limit=3) == []


def test_notes_and_documents_in_one_call_skip_missing_and_foreign(document_store):
    doc = document_store.create_document(make_doc())
    other = document_store.create_document(make_doc())
    theirs = document_store.create_document(make_doc("bob"))
    notes = document_store.put_notes(make_notes(doc, 3) + make_notes(theirs, 1))
    wanted = [notes[2].id, "missing", notes[0].id, notes[3].id]
    got_notes, got_docs = document_store.get_notes_and_documents(
        "alice", wanted, [other.id, doc.id, theirs.id, "missing"]
    )
    assert [n.id for n in got_notes] == [notes[2].id, notes[0].id]
    assert got_notes[0].metadata == {"page": 3}  # the PDF page a source shows
    assert [(d.id, d.title) for d in got_docs] == [(other.id, "A title"), (doc.id, "A title")]
    assert document_store.get_notes_and_documents("alice", [], []) == ([], [])


def test_the_ingested_version_is_stored_and_updated(document_store):
    """Issue 8: the submit records the content version being ingested; a replacement changes it, and
    a record without one reads back as ``None``."""
    doc = make_doc()
    assert document_store.create_document(doc).version is None
    stored = document_store.create_document(replace(doc, version="v1"))
    assert stored.version == "v1"
    assert document_store.get_document(doc.owner, doc.id).version == "v1"
    updated = document_store.update_document(doc.owner, doc.id, {"version": "v2"})
    assert updated is not None and updated.version == "v2"
    assert document_store.get_document(doc.owner, doc.id).version == "v2"
    assert document_store.update_document(doc.owner, doc.id, {"status": DocumentStatus.READY}).version == "v2"


def test_the_content_hash_is_stored_with_the_document(document_store):
    """Issue 21: a re-upload is recognised by the hash of its bytes, so every store keeps it (a record
    written before hashes were kept reads back ``None``)."""
    doc = make_doc()
    assert document_store.create_document(doc).content_hash is None
    digest = "ab" * 32
    document_store.create_document(replace(doc, content_hash=digest))
    assert document_store.get_document(doc.owner, doc.id).content_hash == digest
    ready = document_store.update_document(doc.owner, doc.id, {"status": DocumentStatus.READY})
    assert ready is not None and ready.content_hash == digest
    listed = document_store.list_documents(doc.owner).items
    assert [d.content_hash for d in listed] == [digest]


# ------------------------------------------------------------- issue 45: content and progress
def test_a_workspace_document_is_found_by_the_hash_of_its_bytes(document_store, clock: FakeClock):
    first = document_store.create_document(replace(make_doc(), content_hash="h1"))
    clock.advance(1)
    document_store.create_document(replace(make_doc("bob"), content_hash="h1"))  # another workspace's
    assert document_store.find_by_content("alice", "h1").id == first.id
    assert document_store.find_by_content("alice", "h2") is None
    assert document_store.find_by_content("carol", "h1") is None
    # a new version with other bytes is no longer found by the old hash; deleted is gone
    document_store.create_document(replace(first, content_hash="h3"))
    assert document_store.find_by_content("alice", "h1") is None
    assert document_store.find_by_content("alice", "h3").id == first.id
    document_store.delete_document("alice", first.id)
    assert document_store.find_by_content("alice", "h3") is None


def test_chunks_done_counts_every_batch_when_they_finish_at_once(document_store):
    """The cloud's embed steps run in parallel (a Map state): each batch's count is added in one
    atomic write, so 8 threads adding 25 batches each leave exactly 200 counted."""
    from concurrent.futures import ThreadPoolExecutor

    doc = document_store.create_document(replace(make_doc(), version="v1", chunks_total=200))
    assert (doc.chunks_total, doc.chunks_done) == (200, 0)

    def batches(_: int) -> None:
        for _ in range(25):
            assert document_store.add_chunks_done("alice", doc.id, "v1", 1) is not None

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(batches, range(8)))
    assert document_store.get_document("alice", doc.id).chunks_done == 200


def test_chunks_done_of_a_superseded_or_deleted_run_are_not_counted(document_store):
    doc = document_store.create_document(replace(make_doc(), version="v2"))
    assert document_store.add_chunks_done("alice", doc.id, "v1", 5) is None  # an older run's batch
    assert document_store.add_chunks_done("bob", doc.id, "v2", 5) is None  # not bob's
    assert document_store.add_chunks_done("alice", doc.id, "v2", 5).chunks_done == 5
    done = document_store.update_document(
        "alice", doc.id, {"chunks_total": 9, "indexing_since": "2026-01-01T00:00:00.000Z"}
    )
    assert (done.chunks_total, done.chunks_done, done.indexing_since) == (9, 5, "2026-01-01T00:00:00.000Z")
    document_store.delete_document("alice", doc.id)
    assert document_store.add_chunks_done("alice", doc.id, "v2", 1) is None


def test_a_switch_under_way_is_kept_and_cleared(document_store):
    """An enable/disable in bounded steps (PATCH, issue 44) keeps how far it got on the record."""
    doc = document_store.create_document(make_doc())
    assert doc.switching is None
    assert document_store.update_document("alice", doc.id, {"switching": "off:2000"}).switching == "off:2000"
    assert document_store.get_document("alice", doc.id).switching == "off:2000"
    done = document_store.update_document("alice", doc.id, {"enabled": False, "switching": None})
    assert (done.enabled, done.switching) == (False, None)
    assert document_store.get_document("alice", doc.id).switching is None


def test_a_local_store_lists_every_workspaces_unfinished_documents(document_store, clock: FakeClock):
    """What ``ragchat serve`` resumes at start (issue 43): every PENDING/PROCESSING document, of every
    owner, oldest first; the cloud store has no such read (the state machine carries each run)."""
    from ragchat.ports import UnfinishedDocuments

    if not isinstance(document_store, UnfinishedDocuments):
        assert type(document_store).__name__.startswith("Dynamo")
        return
    docs = [make_doc(owner) for owner in ("ana", "ben", "ws_team", "ana")]
    for doc in docs:
        document_store.create_document(doc)
        clock.advance(1)
    document_store.update_document("ben", docs[1].id, {"status": DocumentStatus.PROCESSING})
    document_store.update_document("ana", docs[3].id, {"status": DocumentStatus.READY})
    assert document_store.unfinished() == [(d.owner, d.id) for d in docs[:3]]


def test_what_an_upload_became_is_kept_for_its_workspace_until_it_expires(document_store, clock: FakeClock):
    from ragchat.domain.uploads import UploadOutcome

    now = clock()
    upload = new_id()
    became = UploadOutcome("ws_team", upload, "bob", "doc-1", duplicate=True, other_document=True)
    assert document_store.upload_outcome("ws_team", upload, now=now) is None  # not landed yet
    document_store.record_upload(became, expires_at=now + 3600)
    assert document_store.upload_outcome("ws_team", upload, now=now) == became
    assert document_store.upload_outcome("alice", upload, now=now) is None  # another workspace's id
    # none is a document: no listing sees it
    assert document_store.list_documents("ws_team").items == []
    again = UploadOutcome("ws_team", upload, "bob", "doc-2")
    document_store.record_upload(again, expires_at=now + 3600)  # the same upload again: the latest
    assert document_store.upload_outcome("ws_team", upload, now=now) == again
    assert document_store.upload_outcome("ws_team", upload, now=now + 3600) is None  # expired


def test_an_upload_refused_keeps_its_status_and_message(
    document_store: DocumentStore, clock: FakeClock
) -> None:
    """A refused upload says why (``GET /uploads/{uploadId}``), in every store; an outcome written
    without a refusal reads back as not refused."""
    from ragchat.domain.uploads import UploadOutcome

    now, upload = clock(), new_id()
    message = "The file is too large (31.5 MB): the limit is 20.0 MB."
    refused = UploadOutcome("ws_team", upload, "bob", "", refused_status=413, refused_message=message)
    document_store.record_upload(refused, expires_at=now + 3600)
    found = document_store.upload_outcome("ws_team", upload, now=now)
    assert found == refused and found.refused
    became = UploadOutcome("ws_team", upload, "bob", "doc-1")
    document_store.record_upload(became, expires_at=now + 3600)  # taken in after all: the latest
    found = document_store.upload_outcome("ws_team", upload, now=now)
    assert found == became and not found.refused
