"""DynamoDB adapters on moto: what the shared port contract cannot see (key design, batching and
retries, races, no Scan). The port contract itself runs over these adapters from ``conftest.py``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from ragchat.adapters.aws.dynamodb import DynamoConversationStore, DynamoCounters, DynamoDocumentStore
from ragchat.adapters.aws.tables import create_tables
from ragchat.domain.errors import Conflict, NotFound, ValidationError
from ragchat.domain.models import Conversation, Document, DocumentStatus, Message, Note, SourceRef

from tests.fakes import FakeClock


class RecordingClient:
    """Wraps a boto3 DynamoDB client: records operation names; can script UnprocessedItems/Keys."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[str] = []
        self.unprocess_writes = 0  # next N batch_write_item calls leave their last item unprocessed
        self.unprocess_gets = 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)

        def call(**kwargs: Any) -> Any:
            self.calls.append(name)
            if name == "batch_write_item" and self.unprocess_writes:
                self.unprocess_writes -= 1
                ((table, reqs),) = kwargs["RequestItems"].items()
                resp = real(RequestItems={table: reqs[:-1]}) if len(reqs) > 1 else {}
                return {**resp, "UnprocessedItems": {table: reqs[-1:]}}
            if name == "batch_get_item" and self.unprocess_gets:
                self.unprocess_gets -= 1
                ((table, req),) = kwargs["RequestItems"].items()
                keys = req["Keys"]
                resp = real(RequestItems={table: {**req, "Keys": keys[:-1]}}) if len(keys) > 1 else {}
                return {
                    "Responses": resp.get("Responses", {table: []}),
                    "UnprocessedKeys": {table: {**req, "Keys": keys[-1:]}},
                }
            return real(**kwargs)

        return call


@pytest.fixture
def aws() -> Iterator[RecordingClient]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(client, documents="docs", conversations="convs", counters="counters")
        yield RecordingClient(client)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def docs(aws: RecordingClient, clock: FakeClock, sleeps: list[float]) -> DynamoDocumentStore:
    return DynamoDocumentStore("docs", aws, clock=clock, sleep=sleeps.append)


@pytest.fixture
def convs(aws: RecordingClient, clock: FakeClock) -> DynamoConversationStore:
    return DynamoConversationStore("convs", aws, clock=clock)


def _doc(doc_id: str, owner: str = "alice", collection: str | None = None) -> Document:
    return Document(
        id=doc_id,
        owner=owner,
        title=f"title {doc_id}",
        content_type="text/plain",
        source="api",
        body_key=f"bodies/{doc_id}",
        metadata={"lang": "en", "score": 0.5},
        collection=collection,
    )


def _note(doc_id: str | None, i: int, owner: str = "alice") -> Note:
    nid = f"{doc_id or 'N'}-{i:05d}"
    return Note(id=nid, document_id=doc_id, chunk_index=i, text=f"chunk {i}", owner=owner)


def test_documents_round_trip_with_clock_timestamps_and_newest_first_pages(docs, clock, aws):
    stored = []
    for i in range(5):
        clock.advance(1.5)
        stored.append(docs.create_document(_doc(f"D{i}")))
    assert stored[0].created_at == "2026-01-01T00:00:01.500Z"
    got = docs.get_document("alice", "D2")
    assert got == stored[2]
    assert got.metadata == {"lang": "en", "score": 0.5} and got.status is DocumentStatus.PENDING

    first = docs.list_documents("alice", limit=2)
    assert [d.id for d in first.items] == ["D4", "D3"] and first.cursor
    second = docs.list_documents("alice", limit=2, cursor=first.cursor)
    third = docs.list_documents("alice", limit=2, cursor=second.cursor)
    assert [d.id for d in second.items] == ["D2", "D1"]
    assert [d.id for d in third.items] == ["D0"] and third.cursor is None
    exact = docs.list_documents("alice", limit=5)
    assert len(exact.items) == 5 and exact.cursor is None  # no dangling cursor to an empty page
    assert docs.list_documents("bob").items == [] and docs.get_document("bob", "D1") is None
    assert "scan" not in aws.calls


def test_same_millisecond_documents_keep_write_order(docs):
    for i in range(4):
        docs.create_document(_doc(f"Z{i}"))
    assert [d.id for d in docs.list_documents("alice").items] == ["Z3", "Z2", "Z1", "Z0"]


def test_collection_listing_follows_collection_updates(docs, clock):
    docs.create_document(_doc("A", collection="research"))
    docs.create_document(_doc("B", collection="research"))
    docs.create_document(_doc("C"))
    assert [d.id for d in docs.list_documents("alice", collection="research").items] == ["B", "A"]

    clock.advance(10)
    moved = docs.update_document("alice", "A", {"collection": "archive", "enabled": False, "status": "READY"})
    assert moved is not None and moved.collection == "archive" and not moved.enabled
    assert moved.status is DocumentStatus.READY and moved.updated_at == "2026-01-01T00:00:10.000Z"
    assert [d.id for d in docs.list_documents("alice", collection="research").items] == ["B"]
    assert [d.id for d in docs.list_documents("alice", collection="archive").items] == ["A"]
    cleared = docs.update_document("alice", "B", {"collection": None, "error": None})
    assert cleared is not None and cleared.collection is None
    assert docs.list_documents("alice", collection="research").items == []
    assert docs.update_document("bob", "A", {"title": "x"}) is None
    assert docs.update_document("alice", "missing", {"title": "x"}) is None


def test_notes_batch_in_25s_retry_unprocessed_items_and_list_in_chunk_order(docs, aws, sleeps):
    docs.create_document(_doc("D"))
    aws.unprocess_writes = 2
    notes = [_note("D", i) for i in reversed(range(60))]
    stored = docs.put_notes(notes)
    assert len(stored) == 60 and all(n.created_at for n in stored)
    assert len(sleeps) == 2  # two resubmissions, with backoff
    assert aws.calls.count("batch_write_item") == 3 + 2  # 60 items → 25+25+10, plus two retries

    page = docs.list_notes("alice", document_id="D", limit=50)
    assert [n.chunk_index for n in page.items] == list(range(50)) and page.cursor
    rest = docs.list_notes("alice", document_id="D", limit=50, cursor=page.cursor)
    assert [n.chunk_index for n in rest.items] == list(range(50, 60)) and rest.cursor is None


def test_get_notes_in_requested_order_skipping_foreign_and_missing_with_unprocessed_keys(docs, aws):
    docs.put_notes([_note("D", i) for i in range(150)] + [_note("E", 0, owner="bob")])
    aws.unprocess_gets = 1
    ids = ["D-00149", "E-00000", "nope", "D-00003", *[f"D-{i:05d}" for i in range(100, 120)], "D-00003"]
    got = docs.get_notes("alice", ids)
    assert [n.id for n in got] == ["D-00149", "D-00003", *[f"D-{i:05d}" for i in range(100, 120)]]


def test_delete_document_removes_its_notes_only(docs):
    docs.create_document(_doc("D"))
    docs.put_notes([_note("D", i) for i in range(30)] + [_note("F", 0), _note(None, 1)])
    assert docs.delete_document("alice", "D") is True
    assert docs.get_document("alice", "D") is None
    assert docs.list_notes("alice", document_id="D").items == []
    assert {n.id for n in docs.list_notes("alice").items} == {"F-00000", "N-00001"}
    assert docs.delete_document("alice", "D") is False


def test_invalid_cursor_is_a_validation_error(docs):
    with pytest.raises(ValidationError):
        docs.list_documents("alice", cursor="not-a-cursor!!")
    with pytest.raises(ValidationError):
        docs.list_documents("alice", cursor="eyJwayI6IDF9")  # {"pk": 1}


# ----------------------------------------------------------------------------- conversations
def _msg(mid: str, role: str = "user", cmid: str | None = None, conv: str = "C1") -> Message:
    return Message(
        id=mid,
        conversation_id=conv,
        owner="alice",
        role=role,  # type: ignore[arg-type]
        content=f"text {mid}",
        client_message_id=cmid,
    )


def test_messages_keep_creation_order_under_a_frozen_clock(convs):
    convs.create_conversation(Conversation(id="C1", owner="alice", title="t"))
    for i in range(7):
        convs.add_message(_msg(f"M{i}"))
    assert [m.id for m in convs.recent_messages("alice", "C1", 3)] == ["M6", "M5", "M4"]
    page = convs.list_messages("alice", "C1", limit=4)
    rest = convs.list_messages("alice", "C1", limit=4, cursor=page.cursor)
    assert [m.id for m in page.items + rest.items] == [f"M{i}" for i in range(7)] and rest.cursor is None
    assert convs.get_conversation("alice", "C1").message_count == 7
    assert convs.recent_messages("bob", "C1", 3) == []


def test_assistant_message_round_trips_sources_and_flags(convs, clock):
    convs.create_conversation(Conversation(id="C1", owner="alice"))
    clock.advance(2)
    sent = Message(
        id="A1",
        conversation_id="C1",
        owner="alice",
        role="assistant",
        content="answer",
        sources=[SourceRef(id="D-00001", text="evidence")],
        model="claude",
        interrupted=True,
    )
    stored = convs.add_message(sent)
    assert stored.created_at == "2026-01-01T00:00:02.000Z"
    assert convs.get_message("alice", "C1", "A1") == stored
    assert convs.get_message("bob", "C1", "A1") is None


def test_client_message_id_is_unique_per_role_even_under_a_race(convs, aws):
    """Deterministic interleaving: a competing add with the same client id lands between our sequence
    number and our write; the conditional marker makes exactly one of them win."""
    convs.create_conversation(Conversation(id="C1", owner="alice"))
    real = aws._client.transact_write_items
    state = {"raced": False}

    def transact_write_items(**kwargs: Any) -> Any:
        if not state["raced"]:
            state["raced"] = True
            convs.add_message(_msg("FAST", cmid="client-1"))
        return real(**kwargs)

    aws._client.transact_write_items = transact_write_items  # type: ignore[method-assign]
    with pytest.raises(Conflict):
        convs.add_message(_msg("SLOW", cmid="client-1"))
    with pytest.raises(Conflict):
        convs.add_message(_msg("AGAIN", cmid="client-1"))
    convs.add_message(_msg("A1", role="assistant", cmid="client-1"))
    found = convs.find_by_client_message_id("alice", "C1", "client-1")
    assert [(m.id, m.role) for m in found] == [("FAST", "user"), ("A1", "assistant")]
    assert [m.id for m in convs.list_messages("alice", "C1").items] == ["FAST", "A1"]
    assert convs.get_conversation("alice", "C1").message_count == 2  # losers left no count behind


def test_delete_messages_after_frees_their_client_ids_and_fixes_the_count(convs):
    convs.create_conversation(Conversation(id="C1", owner="alice"))
    convs.add_message(_msg("U1", cmid="a"))
    convs.add_message(_msg("A1", role="assistant", cmid="a"))
    convs.add_message(_msg("U2", cmid="b"))
    convs.add_message(_msg("A2", role="assistant", cmid="b"))
    assert convs.delete_messages_after("alice", "C1", "A1") == 2
    assert [m.id for m in convs.list_messages("alice", "C1").items] == ["U1", "A1"]
    assert convs.get_conversation("alice", "C1").message_count == 2
    assert convs.find_by_client_message_id("alice", "C1", "b") == []
    convs.add_message(_msg("U2b", cmid="b"))  # the id is free again
    assert convs.delete_messages_after("alice", "C1", "missing") == 0


def test_conversations_newest_updated_first_and_delete_removes_everything(convs, clock, aws):
    for cid in ("C1", "C2", "C3"):
        clock.advance(1)
        convs.create_conversation(Conversation(id=cid, owner="alice"))
    clock.advance(1)
    convs.add_message(_msg("M1", conv="C1"))
    assert [c.id for c in convs.list_conversations("alice").items] == ["C1", "C3", "C2"]
    assert convs.list_conversations("alice").items[0].message_count == 1
    updated = convs.update_conversation("alice", "C2", {"title": "renamed", "summary_cursor": "M0"})
    assert updated is not None and updated.title == "renamed"
    assert [c.id for c in convs.list_conversations("alice", limit=1).items] == ["C2"]

    assert convs.delete_conversation("alice", "C1") is True
    assert convs.get_conversation("alice", "C1") is None
    assert convs.list_messages("alice", "C1").items == []
    assert convs.get_message("alice", "C1", "M1") is None
    assert convs.delete_conversation("alice", "C1") is False
    assert "scan" not in aws.calls


def test_adding_to_a_missing_conversation_is_not_found(convs):
    with pytest.raises(NotFound):
        convs.add_message(_msg("M1", conv="ghost"))


# ----------------------------------------------------------------------------- counters
def test_counter_expiry_and_reset(aws):
    counters = DynamoCounters("counters", aws)
    assert counters.increment("ip:1", ttl_seconds=10, now=100.0) == 1
    assert counters.increment("ip:1", amount=4, ttl_seconds=10, now=105.0) == 5
    assert counters.get("ip:1", now=109.9) == 5
    assert counters.get("ip:1", now=110.0) == 0  # expires_at <= now is expired
    assert counters.increment("ip:1", ttl_seconds=10, now=110.0) == 1  # restarts with a new expiry
    assert counters.get_many(["ip:1", "ip:2"], now=119.0) == {"ip:1": 1, "ip:2": 0}
    counters.reset("ip:1")
    assert counters.get("ip:1", now=111.0) == 0


def test_counter_retries_when_a_competing_reset_wins(aws):
    """Interleave deterministically: between our failed ADD and our SET, another caller restarts the
    expired counter; our SET must then fail its condition and we must ADD onto theirs."""
    counters = DynamoCounters("counters", aws)
    counters.increment("k", ttl_seconds=5, now=0.0)
    other = DynamoCounters("counters", aws._client)
    real_update = aws._client.update_item
    state = {"injected": False}

    def update_item(**kwargs: Any) -> Any:
        if "SET" in kwargs["UpdateExpression"] and not state["injected"]:
            state["injected"] = True
            other.increment("k", amount=10, ttl_seconds=5, now=50.0)
        return real_update(**kwargs)

    aws._client.update_item = update_item  # type: ignore[method-assign]
    assert counters.increment("k", amount=1, ttl_seconds=5, now=50.0) == 11
    assert counters.get("k", now=54.0) == 11


def test_messages_stored_before_sources_said_where_still_load(convs, aws):
    convs.create_conversation(Conversation(id="C1", owner="alice"))
    convs.add_message(
        Message(id="A1", conversation_id="C1", owner="alice", role="assistant", content="a", sources=[])
    )
    [item] = [i for i in aws._client.scan(TableName="convs")["Items"] if i.get("id", {}).get("S") == "A1"]
    aws._client.update_item(
        TableName="convs",
        Key={"pk": item["pk"], "sk": item["sk"]},
        UpdateExpression="SET sources = :s",
        ExpressionAttributeValues={":s": {"S": '[{"id": "n1", "text": "old"}]'}},
    )
    [src] = convs.get_message("alice", "C1", "A1").sources
    assert (src.id, src.text, src.document_id, src.title, src.page) == ("n1", "old", None, None, None)
