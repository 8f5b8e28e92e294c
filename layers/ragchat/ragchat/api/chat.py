"""Area "chat": conversations, messages (JSON or SSE), edits, export (docs/api.md, §10).

``POST /chat/conversations/{id}/messages`` with ``Accept: text/event-stream`` answers as Server-Sent
Events. Under ``ragchat serve`` (and the streaming function, which runs the same local server) the
events are written as they are produced; behind a buffered API Gateway proxy integration the whole
event stream is returned at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, ConfigDict, Field

from ragchat.api.auth import principal
from ragchat.api.limits import rate_limit, source_ip
from ragchat.api.schemas import (
    ConversationOut,
    ConversationPage,
    conversation_export_json,
    conversation_json,
    message_json,
    turn_json,
)
from ragchat.domain.errors import ValidationError
from ragchat.domain.export import export_markdown
from ragchat.domain.labels import validate_collection
from ragchat.domain.personas import persona_notice
from ragchat.services.chat.streaming import KEEPALIVE

if TYPE_CHECKING:
    from ragchat.bootstrap import Container
    from ragchat.services.chat import TurnResult

Limit = Annotated[int, Query(ge=1, le=200, description="Page size.")]
Cursor = Annotated[str | None, Query(description="Opaque cursor from the previous page.")]
TitleSearch = Annotated[
    str | None,
    Query(
        max_length=200,
        description="Only conversations whose title (or collection) contains every word of this "
        "(case-insensitive). A page may hold fewer than `limit` and still have a `cursor`.",
    ),
]


class ConversationIn(BaseModel):
    """``POST /chat/conversations``."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    title: str | None = Field(None, max_length=1000)
    collection: str | None = Field(None, description="Retrieve only from this collection.")
    document_id: str | None = Field(
        None, alias="documentId", max_length=200, description="Retrieve only from this document."
    )
    persona: str | None = Field(None, max_length=64, description="A configured persona (default: `default`).")
    workspace: str | None = Field(
        None,
        max_length=256,
        description="Search only this workspace (default: every workspace you belong to). The "
        "conversation stays yours alone.",
    )


class ConversationPatch(BaseModel):
    """``PATCH /chat/conversations/{id}``: rename."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(
        max_length=1000, description="The new title (one line, not blank, at most 1000 characters)."
    )


class MessageIn(BaseModel):
    """``POST /chat/conversations/{id}/messages``."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    content: str = Field(description="The user message (sanitized; at most 4000 characters).")
    message_id: str | None = Field(
        None,
        alias="messageId",
        description="Client id for idempotency: the same id twice returns the first answer.",
    )


class StopOut(BaseModel):
    """``POST /chat/conversations/{id}/stop``."""

    model_config = ConfigDict(populate_by_name=True)

    conversation_id: str = Field(alias="conversationId")
    in_flight: bool = Field(alias="inFlight", description="Whether an answer was streaming.")


class EditIn(BaseModel):
    """``PUT /chat/conversations/{id}/messages/{messageId}``."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(description="The new version of the user message.")


class FeedbackIn(BaseModel):
    """``POST /chat/conversations/{id}/messages/{messageId}/feedback``."""

    model_config = ConfigDict(extra="forbid")

    rating: Literal["up", "down"] | None = Field(
        description="`up` or `down` on the answer; `null` takes the rating back."
    )


def router(container: Container) -> APIGatewayRouter:
    r = APIGatewayRouter()  # type: ignore[no-untyped-call]
    _conversation_routes(r, container)
    _message_routes(r, container)
    _feedback_route(r, container)
    _stop_route(r, container)
    _export_route(r, container)
    return r


def _searched(container: Container, user: str, workspace: str | None) -> dict[str, Any]:
    """A new conversation's workspace (checked: 404 unless a member) or, unpinned, all the user's."""
    if workspace:
        return {"workspace": container.workspaces.require(user, workspace).id}
    return {"readable": container.workspaces.readable(user)}


def _owner(r: APIGatewayRouter) -> str:
    return principal(r.current_event)


def _source_ip(r: APIGatewayRouter) -> str | None:
    return source_ip(r.current_event)


def _wants_stream(r: APIGatewayRouter) -> bool:
    accept = (r.current_event.headers or {}).get("accept") or _header(r.current_event, "Accept")
    return "text/event-stream" in (accept or "").lower()


def _can_stream(r: APIGatewayRouter) -> bool:
    # ragchat serve and the chat_stream function (ragchat.lambda_web) write an iterator body as it is
    # produced and say so on their context object; a buffered Lambda's real context does not.
    return bool(getattr(r.lambda_context, "streams_response", False))


def _reply(result: TurnResult) -> Response[dict[str, Any]]:
    msg = result.message
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=turn_json(result),
        headers={"x-model-used": result.model, "x-source-count": str(len(msg.sources or []))},
    )


def _conversation_routes(r: APIGatewayRouter, container: Container) -> None:
    @r.post("/chat/conversations", status_code=201, summary="Start a conversation", tags=["chat"])
    def create(conv: Annotated[ConversationIn, Body()]) -> Response[ConversationOut]:
        rate_limit(container, "conversations", r.current_event)
        user = _owner(r)
        created = container.chat.conversations.create(
            user,
            title=conv.title,
            collection=validate_collection(conv.collection),  # the documents' rule (domain.labels)
            document_id=conv.document_id,
            persona=conv.persona,
            **_searched(container, user, conv.workspace),
        )
        out = ConversationOut.of(created)
        out.notice = persona_notice(created.persona, container.model_reads())
        return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=out)

    @r.get("/chat/conversations", summary="Your conversations, newest first", tags=["chat"])
    def list_conversations(
        limit: Limit = 50,
        cursor: Cursor = None,
        q: TitleSearch = None,
    ) -> ConversationPage:
        page = container.chat.conversations.list_conversations(
            _owner(r), limit=limit, cursor=cursor, search=q
        )
        return ConversationPage(items=[ConversationOut.of(c) for c in page.items], cursor=page.cursor)

    @r.get(
        "/chat/conversations/<conversation_id>",
        summary="A conversation and its messages (ascending, with summaries and sources)",
        description="Conversations are private to whoever started them: another member of a workspace "
        "holding it gets 403 saying so; anyone else 404, as for an id never used.",
        tags=["chat"],
    )
    def get_conversation(
        conversation_id: Annotated[str, Path()],
        limit: Annotated[int, Query(ge=1, le=1000)] = 1000,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        return _conversation_read(container, _owner(r), conversation_id, limit=limit, cursor=cursor)

    @r.patch("/chat/conversations/<conversation_id>", summary="Rename a conversation", tags=["chat"])
    def rename_conversation(
        conversation_id: Annotated[str, Path()], patch: Annotated[ConversationPatch, Body()]
    ) -> ConversationOut:
        return ConversationOut.of(
            container.chat.conversations.rename(_owner(r), conversation_id, patch.title)
        )

    @r.delete("/chat/conversations/<conversation_id>", summary="Delete a conversation", tags=["chat"])
    def delete_conversation(conversation_id: Annotated[str, Path()]) -> Response[str]:
        container.chat.conversations.delete(_owner(r), conversation_id)
        return Response(status_code=204, content_type=None, body="")


def _conversation_read(
    container: Container, who: str, conversation_id: str, *, limit: int, cursor: str | None
) -> dict[str, Any]:
    """``who``'s conversation and a page of its messages. A link opened by another member of a
    workspace holding it is a 403 saying so; anyone else gets the plain 404."""
    shared_home = container.workspaces.shared_home
    conv = container.chat.conversations.get(who, conversation_id, shared_home=shared_home)
    page = container.chat.conversations.messages(who, conversation_id, limit=limit, cursor=cursor)
    return {
        **conversation_json(conv),
        "messages": [message_json(m) for m in page.items],
        "cursor": page.cursor,
    }


def _message_routes(r: APIGatewayRouter, container: Container) -> None:
    @r.post(
        "/chat/conversations/<conversation_id>/messages",
        summary="Send a message; JSON answer, or SSE with Accept: text/event-stream",
        tags=["chat"],
    )
    # No return annotation: with one, Powertools' validating serializer turns the SSE generator into a
    # list before the server sees it, and every event reaches the client at the end of the turn.
    def post_message(conversation_id: Annotated[str, Path()], message: Annotated[MessageIn, Body()]):  # type: ignore[no-untyped-def]
        who = _owner(r)
        message_id = message.message_id or _header(r.current_event, "Idempotency-Key") or None
        if not _wants_stream(r):
            result = container.chat.turns.send(
                who, conversation_id, message.content, message_id=message_id, ip=_source_ip(r)
            )
            return _reply(result)
        model, events = container.chat.turns.stream(
            who, conversation_id, message.content, message_id=message_id, ip=_source_ip(r)
        )
        body: Any = sse(events)
        if not _can_stream(r):
            body = "".join(body)
        return Response(
            status_code=200,
            content_type="text/event-stream; charset=utf-8",
            body=body,
            headers={"x-model-used": model},
        )

    @r.put(
        "/chat/conversations/<conversation_id>/messages/<message_id>",
        summary="Edit a user message: later messages are deleted and the new version answered",
        tags=["chat"],
    )
    def edit_message(
        conversation_id: Annotated[str, Path()],
        message_id: Annotated[str, Path()],
        edit: Annotated[EditIn, Body()],
    ) -> Response[dict[str, Any]]:
        result = container.chat.turns.edit(
            _owner(r), conversation_id, message_id, edit.content, ip=_source_ip(r)
        )
        return _reply(result)


def _feedback_route(r: APIGatewayRouter, container: Container) -> None:
    @r.post(
        "/chat/conversations/<conversation_id>/messages/<message_id>/feedback",
        summary="Rate an answer: thumbs up / down, stored with the message",
        description=(
            "Stores `rating` on the assistant message (`null` clears it) and returns the message; "
            "`GET /chat/conversations/{id}` then shows it as the message's `feedback`. Only answers "
            "can be rated (400 for a user message)."
        ),
        tags=["chat"],
    )
    def rate(
        conversation_id: Annotated[str, Path()],
        message_id: Annotated[str, Path()],
        feedback: Annotated[FeedbackIn, Body()],
    ) -> dict[str, Any]:
        rated = container.chat.conversations.rate(_owner(r), conversation_id, message_id, feedback.rating)
        return message_json(rated)


def _stop_route(r: APIGatewayRouter, container: Container) -> None:
    @r.post(
        "/chat/conversations/<conversation_id>/stop",
        status_code=202,
        summary="Stop the conversation's answer in flight (from any request, process or container)",
        description=(
            "The streaming answer in flight ends within about a second: its stream still sends "
            "`sources` and `answer_end` (`interrupted: true`) and the partial answer is stored marked "
            "interrupted. `inFlight` says whether an answer was streaming. A JSON (non-streaming) "
            "turn cannot be stopped."
        ),
        tags=["chat"],
    )
    def stop(conversation_id: Annotated[str, Path()]) -> Response[StopOut]:
        in_flight = container.chat.turns.stop(_owner(r), conversation_id)
        return Response(
            status_code=202,
            content_type=content_types.APPLICATION_JSON,
            body=StopOut(conversation_id=conversation_id, in_flight=in_flight),
        )


def _export_route(r: APIGatewayRouter, container: Container) -> None:
    @r.get(
        "/chat/conversations/<conversation_id>/export",
        summary="Export a conversation as markdown or JSON",
        tags=["chat"],
    )
    def export(
        conversation_id: Annotated[str, Path()],
        format: Annotated[str, Query(description="`markdown` (default) or `json`.")] = "markdown",
    ) -> Response[str]:
        fmt = format.lower()
        if fmt not in ("markdown", "md", "json"):
            raise ValidationError("format: use markdown or json")
        conv, messages = container.chat.conversations.transcript(_owner(r), conversation_id)
        if fmt == "json":
            ctype, ext = "application/json", "json"
            text = json.dumps(conversation_export_json(conv, messages), ensure_ascii=False, indent=2)
        else:
            ctype, ext = "text/markdown; charset=utf-8", "md"
            text = export_markdown(conv, messages)
        return Response(
            status_code=200,
            content_type=ctype,
            body=text,
            headers={"Content-Disposition": f'attachment; filename="conversation-{conversation_id}.{ext}"'},
        )


def sse(events: Iterator[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    """docs/chat.md events as ``text/event-stream`` frames (a keep-alive as the comment ``: keep-alive``).
    Closing this generator closes ``events`` (which stops generation and stores the partial answer)."""
    try:
        for name, data in events:
            if name == KEEPALIVE[0]:
                yield ": keep-alive\n\n"  # a comment line: keeps an idle connection open
                continue
            yield f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
    finally:
        close = getattr(events, "close", None)
        if callable(close):
            close()


def _header(event: Any, name: str) -> str | None:
    headers = event.headers or {}
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return str(value)
    return None
