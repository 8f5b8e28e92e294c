"""Searching conversation titles (the chat page's search box, ``GET /chat/conversations?q=``) on every
conversation store: an old conversation beyond the newest page is found, pages never overflow their
``limit``, and following the cursor lists every match exactly once."""

from __future__ import annotations

from ragchat.domain.ids import new_id
from ragchat.domain.models import Conversation
from ragchat.ports import ConversationStore
from ragchat.services.chat.conversations import Conversations

from tests.fakes import FakeClock, FakeDocumentStore


def _service(store: ConversationStore) -> Conversations:
    return Conversations(store, FakeDocumentStore(), check_persona=lambda _: None)


def _create(store: ConversationStore, clock: FakeClock, titles: list[str], owner: str = "alice") -> None:
    for title in titles:  # one second apart: the first is the oldest
        store.create_conversation(Conversation(id=new_id(), owner=owner, title=title))
        clock.advance(1)


def test_an_old_conversation_is_found_by_a_word_of_its_title(
    conversation_store: ConversationStore, clock: FakeClock
) -> None:
    titles = ["Quarterly Budget review"] + [f"Standup notes {i}" for i in range(30)]
    _create(conversation_store, clock, titles)
    _create(conversation_store, clock, ["Budget for Bob"], owner="bob")
    service = _service(conversation_store)
    newest = service.list_conversations("alice", limit=10)
    assert "Quarterly Budget review" not in [c.title for c in newest.items]  # beyond the first page
    found = service.list_conversations("alice", limit=10, search="budget QUARTERLY")
    assert [c.title for c in found.items] == ["Quarterly Budget review"]  # every word, any case
    assert found.cursor is None
    nothing = service.list_conversations("alice", limit=10, search="lisbon")
    assert (nothing.items, nothing.cursor) == ([], None)


def test_following_the_cursor_lists_every_match_once_and_no_page_overflows(
    conversation_store: ConversationStore, clock: FakeClock
) -> None:
    titles = [f"Support ticket {i}" if i % 3 == 0 else f"Other thing {i}" for i in range(40)]
    _create(conversation_store, clock, titles)
    service = _service(conversation_store)
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(20):
        page = service.list_conversations("alice", limit=4, cursor=cursor, search="ticket")
        assert len(page.items) <= 4
        seen += [c.title for c in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    expected = [t for t in reversed(titles) if t.startswith("Support")]  # newest first
    assert seen == expected


def test_a_conversation_is_found_by_the_words_of_its_messages(
    conversation_store: ConversationStore, clock: FakeClock
) -> None:
    """Issue 45: the search box matched titles only; what was said is what people remember."""
    from ragchat.domain.models import Message

    _create(conversation_store, clock, ["Ferry times", "Harbour fees", "Lunch"])
    service = _service(conversation_store)
    by_title = {c.title: c for c in service.list_conversations("alice", limit=10).items}
    for title, words in (
        ("Ferry times", "When does the ferry leave?"),
        ("Harbour fees", "The mooring fee is 12 crowns"),
    ):
        conversation_store.add_message(
            Message(new_id(), by_title[title].id, "alice", "user", words)  # type: ignore[arg-type]
        )
        clock.advance(1)
    found = service.list_conversations("alice", limit=10, search="MOORING crowns")
    assert [c.title for c in found.items] == ["Harbour fees"]  # every word, any case, in its messages
    assert [c.title for c in service.list_conversations("alice", limit=10, search="lunch").items] == ["Lunch"]
    assert service.list_conversations("alice", limit=10, search="mooring ferry").items == []
    # another owner's messages are never searched
    assert service.list_conversations("bob", limit=10, search="mooring").items == []
