"""What a chat turn carries between its collaborators."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragchat.domain.history import HistoryWindow, model_turns
from ragchat.domain.models import ChatTurn, Conversation, Message, ModelRequest

if TYPE_CHECKING:
    from ragchat.services.answering import Answerer
    from ragchat.services.model_calls import BreakerScope
    from ragchat.services.retrieval import Retrieval


@dataclass(slots=True)
class TurnResult:
    """The assistant message of a turn (as stored) and how it came about."""

    message: Message
    model: str
    guard_used: bool
    replayed: bool = False
    user_message_id: str | None = None
    # a refusal's closest passages (the reader found no answer in them), offered as suggestions
    suggestions: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Accepted:
    """A turn accepted (validated, rate limited, user message stored), before retrieval."""

    conv: Conversation
    text: str
    user: Message
    client_id: str | None
    history: list[Message]  # the recent messages before the user message, ascending
    started: float
    deadline: float
    timings: dict[str, float]
    workspaces: dict[str, str] | None = None  # the workspaces searched (id → name)
    leased: bool = False  # holds the conversation's turn lease (a retry of a pending message: no)


@dataclass(slots=True)
class Turn:
    """Everything prepared before the model is asked."""

    conv: Conversation
    text: str
    user: Message
    client_id: str | None
    window: HistoryWindow
    history: list[Message]
    retrieval: Retrieval
    reinforce: bool
    persona: str
    started: float
    breaker: BreakerScope
    deadline: float  # on the model caller's clock: the turn's model budget ends here
    refused: bool  # the answerability guard's decision (``answering.refuses``), made once per turn
    timings: dict[str, float] = field(default_factory=dict)
    summary_stored: bool = False  # the window's pending summary was stored (once, after the answer)
    # the workspaces searched (id → name; None: the conversation's owner alone, as before workspaces)
    workspaces: dict[str, str] | None = None


class Replayed(Exception):
    """An earlier request with the same ``messageId`` already answered: its answer is the result."""

    def __init__(self, result: TurnResult) -> None:
        super().__init__("replayed")
        self.result = result


def split_window(turn: Turn) -> tuple[list[ChatTurn], str]:
    """(the chat turns before the current message — summary first —, the current message)."""
    turns = model_turns(turn.window)
    return turns[:-1], turns[-1].content


def model_request(answerer: Answerer, turn: Turn) -> ModelRequest:
    """The turn's model request: the window's turns (summary first), the current message last."""
    history, question = split_window(turn)
    return answerer.request(
        question,
        turn.retrieval,
        history=history,
        persona=turn.persona,
        reinforce=turn.reinforce,
        conversation_id=turn.conv.id,
    )
