"""Idempotent turns (docs/security.md): a second request with the same ``messageId`` gets the first answer.

It rides on ``ConversationStore.add_message`` raising ``Conflict`` for a duplicate
``client_message_id`` (same role): the second request finds the first request's messages and returns
its answer, waiting (bounded) while the first is still answering.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ragchat.domain.clock import Clock, parse_iso
from ragchat.domain.errors import Conflict
from ragchat.domain.messages import GUARD_MODEL
from ragchat.domain.models import Conversation, Message
from ragchat.services.chat.state import Replayed, TurnResult

if TYPE_CHECKING:
    from ragchat.ports import ConversationStore

# A first attempt silent this long is presumed dead: answer in its place (the default of the
# ``IDEMPOTENCY_TAKEOVER_SECONDS`` setting; a retry waits at most the polls below either way).
IDEMPOTENCY_TAKEOVER_S = 60.0
# The longest a retry waits for the first attempt's answer before answering itself: the wait plus the
# model budget (15 s, which starts after it) fit in the chat function's 29 s.
IDEMPOTENCY_MAX_WAIT_S = 10.0
IDEMPOTENCY_POLLS = 400
IDEMPOTENCY_POLL_S = 0.05


class Replays:
    def __init__(
        self,
        conversations: ConversationStore,
        clock: Clock,
        sleep: Callable[[float], None],
        *,
        takeover_s: float = IDEMPOTENCY_TAKEOVER_S,
    ) -> None:
        self.conversations = conversations
        self.clock = clock
        self.sleep = sleep
        self.takeover_s = takeover_s

    def answered(self, conv: Conversation, message_id: str, text: str) -> TurnResult | None:
        """The stored answer to ``message_id``, if there is one (``Conflict`` if the id was used for
        another text)."""
        found = self.conversations.find_by_client_message_id(conv.owner, conv.id, message_id)
        return replay_from(found, text)

    def pending(self, conv: Conversation, message_id: str | None) -> bool:
        """Is ``message_id`` a message the conversation has stored and may still be answering (a
        retry of it waits for that answer instead of being refused as a second turn)?"""
        if message_id is None:
            return False
        found = self.conversations.find_by_client_message_id(conv.owner, conv.id, message_id)
        return any(m.role == "user" for m in found)

    def await_first_attempt(self, conv: Conversation, message_id: str, text: str) -> Message:
        """Another request stored this ``messageId`` first: raise :class:`Replayed` with its answer
        once it exists (polling, bounded); if it stays unanswered for ``takeover_s`` since it was
        stored, or for :data:`IDEMPOTENCY_MAX_WAIT_S` of this wait, return its user message so this
        request answers it (the assistant write is idempotent: the first answer stored stands)."""
        user: Message | None = None
        began = self.clock()
        for _ in range(IDEMPOTENCY_POLLS):
            found = self.conversations.find_by_client_message_id(conv.owner, conv.id, message_id)
            replay = replay_from(found, text)
            if replay is not None:
                raise Replayed(replay)
            user = next((m for m in found if m.role == "user"), None)
            if user is None:
                raise Conflict("messageId is being reused; retry")
            now = self.clock()
            if now - parse_iso(user.created_at) >= self.takeover_s or now - began >= IDEMPOTENCY_MAX_WAIT_S:
                return user
            self.sleep(IDEMPOTENCY_POLL_S)
        assert user is not None
        return user


def replay_from(found: Sequence[Message], text: str) -> TurnResult | None:
    user = next((m for m in found if m.role == "user"), None)
    if user is not None and user.content != text:
        raise Conflict("messageId was already used for a different message")
    assistant = next((m for m in found if m.role == "assistant"), None)
    if assistant is None:
        return None
    model = assistant.model or ""
    return TurnResult(
        message=assistant,
        model=model,
        guard_used=model == GUARD_MODEL,
        replayed=True,
        user_message_id=user.id if user else None,
    )
