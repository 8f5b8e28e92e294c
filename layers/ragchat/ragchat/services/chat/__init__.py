"""Multi-turn chat (SPEC §4, §7–§12) as small collaborators; :class:`ChatService` wires them."""

from ragchat.services.chat.history import ExtractiveSummarizer, ModelSummarizer
from ragchat.services.chat.service import ChatService
from ragchat.services.chat.state import Turn, TurnResult
from ragchat.services.chat.tools import ScopedNoteTools

__all__ = [
    "ChatService",
    "ExtractiveSummarizer",
    "ModelSummarizer",
    "ScopedNoteTools",
    "Turn",
    "TurnResult",
]
