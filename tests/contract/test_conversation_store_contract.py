"""ConversationStore contract: every adapter registered in ``conftest.CONVERSATION_STORES`` must pass."""

from __future__ import annotations

import pytest
from ragchat.domain.clock import utc_iso
from ragchat.domain.errors import Conflict, NotFound, ValidationError
from ragchat.domain.ids import new_id
from ragchat.domain.models import Conversation, Message, SourceRef
from ragchat.ports import ConversationStore

from tests.fakes import FakeClock


def new_conv(store: ConversationStore, owner: str = "alice", **fields) -> Conversation:
    return store.create_conversation(Conversation(id=new_id(), owner=owner, **fields))


def add(
    store: ConversationStore,
    conv: Conversation,
    content: str = "hello",
    role: str = "user",
    client_message_id: str | None = None,
    **fields,
) -> Message:
    return store.add_message(
        Message(
            id=new_id(),
            conversation_id=conv.id,
            owner=conv.owner,
            role=role,  # type: ignore[arg-type]
            content=content,
            client_message_id=client_message_id,
            **fields,
        )
    )


def test_create_returns_the_conversation_as_stored(conversation_store, clock: FakeClock):
    conv = new_conv(conversation_store, title="Trip", collection="travel", persona="default")
    assert conv.created_at == conv.updated_at == utc_iso(clock())
    assert conv.message_count == 0
    fetched = conversation_store.get_conversation("alice", conv.id)
    assert fetched is not None
    assert (fetched.title, fetched.collection, fetched.persona) == ("Trip", "travel", "default")
    assert (fetched.created_at, fetched.updated_at) == (conv.created_at, conv.updated_at)


def test_add_message_returns_it_as_stored_with_sources_and_flags(conversation_store, clock: FakeClock):
    conv = new_conv(conversation_store)
    clock.advance(3)
    sources = [SourceRef(id="n1", text="first source"), SourceRef(id="n2", text="second")]
    msg = add(
        conversation_store,
        conv,
        "the answer [source: n1]",
        role="assistant",
        client_message_id="c-1",
        sources=sources,
        model="extractive",
        interrupted=True,
    )
    assert msg.created_at == utc_iso(clock())
    fetched = conversation_store.get_message("alice", conv.id, msg.id)
    assert fetched == msg
    assert fetched.sources == sources and fetched.model == "extractive"
    assert fetched.interrupted is True and fetched.client_message_id == "c-1"
    plain = add(conversation_store, conv, "question")
    assert conversation_store.get_message("alice", conv.id, plain.id).sources is None


def test_an_answer_keeps_the_query_its_turn_searched(conversation_store):
    conv = new_conv(conversation_store)
    searched = "When is the library open on Saturdays? And on Sundays?"
    msg = add(conversation_store, conv, "It opens at noon.", role="assistant", query=searched)
    assert conversation_store.get_message("alice", conv.id, msg.id).query == searched
    assert conversation_store.recent_messages("alice", conv.id, 5)[0].query == searched
    question = add(conversation_store, conv, "And on Sundays?")
    assert conversation_store.get_message("alice", conv.id, question.id).query is None


def test_sources_keep_their_document_title_and_page(conversation_store):
    conv = new_conv(conversation_store)
    sources = [
        SourceRef(id="n1", text="from a PDF", document_id="d1", title="Handbook", page=4),
        SourceRef(id="n2", text="a legacy note"),
    ]
    msg = add(conversation_store, conv, "answer", role="assistant", sources=sources)
    assert conversation_store.get_message("alice", conv.id, msg.id).sources == sources
    assert conversation_store.list_messages("alice", conv.id).items[-1].sources == sources


def test_adding_a_message_moves_the_conversation_to_the_top(conversation_store, clock: FakeClock):
    older = new_conv(conversation_store, title="older")
    clock.advance(1)
    newer = new_conv(conversation_store, title="newer")
    clock.advance(1)
    listed = conversation_store.list_conversations("alice").items
    assert [c.id for c in listed] == [newer.id, older.id]
    add(conversation_store, older)
    add(conversation_store, older, "answer", role="assistant")
    page = conversation_store.list_conversations("alice")
    assert [c.id for c in page.items] == [older.id, newer.id]
    assert [c.message_count for c in page.items] == [2, 0]
    assert page.items[0].updated_at == utc_iso(clock())
    assert page.cursor is None


def test_conversations_page_without_gaps_or_duplicates(conversation_store, clock: FakeClock):
    created = []
    for _ in range(5):
        created.append(new_conv(conversation_store).id)
        clock.advance(1)
    new_conv(conversation_store, owner="bob")
    ids: list[str] = []
    cursor = None
    for _ in range(10):
        page = conversation_store.list_conversations("alice", limit=2, cursor=cursor)
        assert len(page.items) <= 2
        ids += [c.id for c in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    assert ids == list(reversed(created))
    with pytest.raises(ValidationError):
        conversation_store.list_conversations("alice", cursor="garbage")


def test_update_conversation(conversation_store, clock: FakeClock):
    conv = new_conv(conversation_store)
    clock.advance(10)
    updated = conversation_store.update_conversation(
        "alice", conv.id, {"title": "Renamed", "summary_cursor": "m1", "last_summary_id": "s1"}
    )
    assert updated is not None
    assert (updated.title, updated.summary_cursor, updated.last_summary_id) == ("Renamed", "m1", "s1")
    assert updated.created_at == conv.created_at and updated.updated_at == utc_iso(clock())
    assert conversation_store.get_conversation("alice", conv.id).title == "Renamed"
    assert conversation_store.update_conversation("alice", "missing", {"title": "x"}) is None


def test_a_renamed_conversation_keeps_its_messages_and_shows_the_title_in_the_list(
    conversation_store, clock: FakeClock
):
    conv = new_conv(conversation_store, title="Old")
    add(conversation_store, conv, "hello")
    add(conversation_store, conv, "hi there", role="assistant")
    clock.advance(10)
    renamed = conversation_store.update_conversation("alice", conv.id, {"title": "Sky notes"})
    assert renamed is not None and (renamed.title, renamed.message_count) == ("Sky notes", 2)
    listed = conversation_store.list_conversations("alice").items
    assert [(c.id, c.title, c.message_count) for c in listed] == [(conv.id, "Sky notes", 2)]
    assert [m.content for m in conversation_store.list_messages("alice", conv.id).items] == [
        "hello",
        "hi there",
    ]


def test_update_refuses_fields_that_cannot_change(conversation_store):
    conv = new_conv(conversation_store, title="Kept")
    refused = ({"owner": "bob"}, {"id": "other"}, {"message_count": 9}, {"title": "x", "created_at": "x"})
    for changes in refused:
        with pytest.raises(ValueError):
            conversation_store.update_conversation("alice", conv.id, changes)
    assert conversation_store.get_conversation("alice", conv.id) == conv


def test_creating_an_existing_conversation_id_is_a_conflict(conversation_store):
    conv = new_conv(conversation_store, title="First")
    add(conversation_store, conv)
    with pytest.raises(Conflict):
        conversation_store.create_conversation(Conversation(id=conv.id, owner="alice", title="Second"))
    kept = conversation_store.get_conversation("alice", conv.id)
    assert (kept.title, kept.message_count) == ("First", 1)


def test_a_message_needs_its_conversation(conversation_store):
    with pytest.raises(NotFound):
        conversation_store.add_message(
            Message(id=new_id(), conversation_id="missing", owner="alice", role="user", content="hi")
        )
    assert conversation_store.list_messages("alice", "missing").items == []


def test_another_owners_conversation_is_invisible(conversation_store):
    conv = new_conv(conversation_store)
    msg = add(conversation_store, conv, client_message_id="c-1")
    assert conversation_store.get_conversation("bob", conv.id) is None
    assert conversation_store.list_conversations("bob").items == []
    assert conversation_store.update_conversation("bob", conv.id, {"title": "pwned"}) is None
    assert conversation_store.recent_messages("bob", conv.id, 10) == []
    assert conversation_store.list_messages("bob", conv.id).items == []
    assert conversation_store.get_message("bob", conv.id, msg.id) is None
    assert conversation_store.find_by_client_message_id("bob", conv.id, "c-1") == []
    assert conversation_store.delete_messages_after("bob", conv.id, msg.id) == 0
    assert conversation_store.delete_conversation("bob", conv.id) is False
    with pytest.raises(NotFound):
        conversation_store.add_message(
            Message(id=new_id(), conversation_id=conv.id, owner="bob", role="user", content="hi")
        )
    assert conversation_store.get_conversation("alice", conv.id).message_count == 1
    assert conversation_store.get_conversation("alice", conv.id).title == ""


def test_messages_keep_creation_order_within_one_millisecond(conversation_store):
    conv = new_conv(conversation_store)  # the clock never moves in this test
    roles = ["user", "assistant"] * 3
    sent = [add(conversation_store, conv, f"m{i}", role=role) for i, role in enumerate(roles)]
    ids = [m.id for m in sent]
    assert [m.id for m in conversation_store.list_messages("alice", conv.id).items] == ids
    assert [m.id for m in conversation_store.recent_messages("alice", conv.id, 4)] == ids[::-1][:4]


def test_recent_messages_newest_first_with_limit(conversation_store, clock: FakeClock):
    conv = new_conv(conversation_store)
    sent = []
    for i in range(5):
        sent.append(add(conversation_store, conv, f"m{i}").id)
        clock.advance(1)
    assert [m.id for m in conversation_store.recent_messages("alice", conv.id, 3)] == sent[::-1][:3]
    assert [m.id for m in conversation_store.recent_messages("alice", conv.id, 50)] == sent[::-1]


def test_list_messages_pages_in_ascending_order(conversation_store, clock: FakeClock):
    conv = new_conv(conversation_store)
    other = new_conv(conversation_store)
    sent = []
    for i in range(7):
        sent.append(add(conversation_store, conv, f"m{i}").id)
        add(conversation_store, other, "noise")
        clock.advance(1)
    ids: list[str] = []
    cursor = None
    for _ in range(10):
        page = conversation_store.list_messages("alice", conv.id, limit=3, cursor=cursor)
        ids += [m.id for m in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    assert ids == sent


def test_duplicate_client_message_id_for_the_same_role_is_a_conflict(conversation_store):
    conv = new_conv(conversation_store)
    user = add(conversation_store, conv, "question", client_message_id="c-1")
    answer = add(conversation_store, conv, "answer", role="assistant", client_message_id="c-1")
    with pytest.raises(Conflict):
        add(conversation_store, conv, "question again", client_message_id="c-1")
    with pytest.raises(Conflict):
        add(conversation_store, conv, "answer again", role="assistant", client_message_id="c-1")
    # the same client id in another conversation is independent
    add(conversation_store, new_conv(conversation_store), "question", client_message_id="c-1")
    found = conversation_store.find_by_client_message_id("alice", conv.id, "c-1")
    assert sorted(m.id for m in found) == sorted([user.id, answer.id])
    assert {m.role for m in found} == {"user", "assistant"}
    assert len(conversation_store.list_messages("alice", conv.id).items) == 2
    assert conversation_store.find_by_client_message_id("alice", conv.id, "other") == []


def test_delete_messages_after(conversation_store, clock: FakeClock):
    conv = new_conv(conversation_store)
    sent = []
    for i in range(5):
        sent.append(add(conversation_store, conv, f"m{i}", client_message_id=f"c-{i}").id)
        clock.advance(1)
    assert conversation_store.delete_messages_after("alice", conv.id, sent[1]) == 3
    assert [m.id for m in conversation_store.list_messages("alice", conv.id).items] == sent[:2]
    assert conversation_store.list_conversations("alice").items[0].message_count == 2
    # the deleted messages' client ids can be used again
    add(conversation_store, conv, "again", client_message_id="c-3")
    assert conversation_store.delete_messages_after("alice", conv.id, "missing") == 0


def test_delete_messages_after_none_empties_the_conversation_but_keeps_it(
    conversation_store, clock: FakeClock
):
    conv = new_conv(conversation_store)
    other = new_conv(conversation_store)
    for i in range(3):
        add(conversation_store, conv, f"m{i}", client_message_id=f"c-{i}")
    kept = add(conversation_store, other, "stays")
    clock.advance(60)
    assert conversation_store.delete_messages_after("alice", conv.id, None) == 3
    assert conversation_store.list_messages("alice", conv.id).items == []
    again = conversation_store.get_conversation("alice", conv.id)
    assert again is not None and again.created_at == conv.created_at and again.message_count == 0
    assert [m.id for m in conversation_store.list_messages("alice", other.id).items] == [kept.id]
    # the conversation takes messages again, and the old client ids are free
    add(conversation_store, conv, "fresh", client_message_id="c-0")
    assert len(conversation_store.list_messages("alice", conv.id).items) == 1


def test_delete_conversation_removes_its_messages(conversation_store):
    conv = new_conv(conversation_store)
    keep = new_conv(conversation_store)
    msg = add(conversation_store, conv)
    add(conversation_store, keep)
    assert conversation_store.delete_conversation("alice", conv.id) is True
    assert conversation_store.get_conversation("alice", conv.id) is None
    assert conversation_store.get_message("alice", conv.id, msg.id) is None
    assert conversation_store.list_messages("alice", conv.id).items == []
    assert conversation_store.delete_conversation("alice", conv.id) is False
    assert [c.id for c in conversation_store.list_conversations("alice").items] == [keep.id]
    assert len(conversation_store.list_messages("alice", keep.id).items) == 1


def test_feedback_is_stored_on_the_message_and_can_be_changed_or_cleared(
    conversation_store, clock: FakeClock
):
    conv = new_conv(conversation_store)
    other = new_conv(conversation_store, owner="bob")
    question = add(conversation_store, conv, "question")
    answer = add(conversation_store, conv, "answer [source: n1]", role="assistant", model="extractive")
    assert answer.feedback is None
    before = conversation_store.get_conversation("alice", conv.id)
    clock.advance(30)

    rated = conversation_store.set_feedback("alice", conv.id, answer.id, "up")
    assert rated is not None and rated.feedback == "up" and rated.content == answer.content
    listed = conversation_store.list_messages("alice", conv.id).items
    assert [(m.id, m.feedback) for m in listed] == [(question.id, None), (answer.id, "up")]
    assert conversation_store.set_feedback("alice", conv.id, answer.id, "down").feedback == "down"
    assert conversation_store.get_message("alice", conv.id, answer.id).feedback == "down"
    assert conversation_store.recent_messages("alice", conv.id, 1)[0].feedback == "down"
    cleared = conversation_store.set_feedback("alice", conv.id, answer.id, None)
    assert cleared is not None and cleared.feedback is None
    assert conversation_store.get_message("alice", conv.id, answer.id).feedback is None
    # rating does not move the conversation in the list
    after = conversation_store.get_conversation("alice", conv.id)
    assert after.updated_at == before.updated_at

    # another owner, another conversation, an unknown or deleted message: nothing found, nothing stored
    assert conversation_store.set_feedback("bob", conv.id, answer.id, "up") is None
    assert conversation_store.set_feedback("bob", other.id, answer.id, "up") is None
    assert conversation_store.set_feedback("alice", conv.id, "missing", "up") is None
    conversation_store.delete_messages_after("alice", conv.id, question.id)
    assert conversation_store.set_feedback("alice", conv.id, answer.id, "up") is None
    assert conversation_store.get_message("alice", conv.id, answer.id) is None


def test_a_conversation_is_found_by_its_id_alone_until_it_is_deleted(conversation_store):
    """Only to tell a member of its workspace whose it is (GET /chat/conversations/{id})."""
    conv = new_conv(conversation_store, owner="alice", workspace="ws_team", title="Fees")
    found = conversation_store.find_conversation(conv.id)
    assert (found.owner, found.workspace, found.title) == ("alice", "ws_team", "Fees")
    assert conversation_store.find_conversation("01NOPE0000000000000000000") is None
    with pytest.raises(Conflict):  # the id stays alice's
        conversation_store.create_conversation(Conversation(id=conv.id, owner="bob"))
    assert conversation_store.find_conversation(conv.id).owner == "alice"
    assert conversation_store.delete_conversation("alice", conv.id) is True
    assert conversation_store.find_conversation(conv.id) is None
