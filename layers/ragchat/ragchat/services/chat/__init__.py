"""Multi-turn chat (docs/api.md, §7–§12) as small collaborators, wired in :mod:`ragchat.bootstrap.chat`."""

from ragchat.services.chat.history import ExtractiveSummarizer, ModelSummarizer
from ragchat.services.chat.state import Turn, TurnResult
from ragchat.services.chat.tools import ScopedNoteTools

__all__ = ["ExtractiveSummarizer", "ModelSummarizer", "ScopedNoteTools", "Turn", "TurnResult"]
