"""Request bodies (pydantic, so Powertools validates them and documents them in OpenAPI) and the
camelCase JSON shapes the API returns. Responses are the records as stored.

``source_json`` (the one ``SourceRef → {id, documentId, title, page?, text}`` conversion) lives in
the domain and is re-exported here for the routes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from ragchat.domain.content_types import IMAGE_TYPES
from ragchat.domain.intake import already_there
from ragchat.domain.labels import MAX_TITLE_CHARS
from ragchat.domain.models import Conversation, Document, Message, Note, Page
from ragchat.domain.models import source_json as source_json  # the one source serializer

if TYPE_CHECKING:
    from ragchat.services.chat import TurnResult
    from ragchat.services.ingestion import Accepted
    from ragchat.services.workspaces import Access

MAX_TITLE = MAX_TITLE_CHARS


class NoteIn(BaseModel):
    """``POST /notes``."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    text: str = Field(description="The note or document text (required, non-blank).")
    title: str | None = Field(None, max_length=MAX_TITLE)
    content_type: str | None = Field(
        None, alias="contentType", description="text/plain (default), text/markdown or text/html."
    )
    metadata: dict[str, Any] | None = None
    collection: str | None = Field(None, description="1-64 letters, digits, '_', '-', '.', ':'.")
    split: StrictBool | None = Field(None, description="Split into chunks (default: ENABLE_TEXT_SPLITTING).")
    workspace: str | None = Field(
        None, max_length=256, description="The workspace to add it to (editor); default: your personal one."
    )
    source: str | None = Field(
        None,
        min_length=1,
        max_length=1024,
        description="Where the note comes from (e.g. wiki:page-42). The document id is derived from it (per "
        "caller): the same source again is that document again (a new version, or a duplicate when the "
        "text and options are unchanged).",
    )

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("The text is empty: write the note's text.")
        return value


class DocumentPatch(BaseModel):
    """``PATCH /documents/{id}``: at least one field."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool | None = None
    title: str | None = Field(None, max_length=MAX_TITLE)
    metadata: dict[str, Any] | None = None

    def changes(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump(exclude_unset=True).items() if v is not None}


def document_json(
    doc: Document, workspace: Access | None = None, *, now: float | None = None
) -> dict[str, Any]:
    """A document; ``workspace``: the one it is in (shown as ``{id, name}``); ``now``: the time its
    progress estimate is made at (``progress``: ``null`` once READY or FAILED)."""
    out = _document_json(doc)
    if now is not None:
        out["progress"] = progress_json(doc, now)
    if workspace is not None:
        out["workspace"] = {"id": workspace.id, "name": workspace.name}
    return out


def progress_json(doc: Document, now: float) -> dict[str, Any] | None:
    """``{stage, chunksDone, chunksTotal, percent, secondsLeft, text}`` of a document being ingested."""
    from ragchat.domain.progress import describe, progress_of

    progress = progress_of(doc, now)
    if progress is None:
        return None
    return {
        "stage": progress.stage,
        "chunksDone": progress.done,
        "chunksTotal": progress.total,
        "percent": progress.percent,
        "secondsLeft": progress.seconds_left,
        "text": describe(progress),
    }


def _document_json(doc: Document) -> dict[str, Any]:
    out = {
        "id": doc.id,
        "documentId": doc.id,
        "title": doc.title,
        "contentType": doc.content_type,
        "metadata": doc.metadata,
        "collection": doc.collection,
        "source": doc.source,
        "status": str(doc.status),
        "error": doc.error,
        "chunkCount": doc.chunk_count,
        "enabled": doc.enabled,
        "createdAt": doc.created_at,
        "updatedAt": doc.updated_at,
    }
    if doc.content_type in IMAGE_TYPES:
        out["textFrom"] = "ocr"  # its text was read from a picture (the viewer says so)
    side, _, at = (doc.switching or "").partition(":")
    if side in ("on", "off"):  # an enable/disable under way (PATCH repeated until finished)
        out["switching"] = {"enabled": side == "on", "chunksSwitched": int(at or 0)}
    return out


def accepted_json(accepted: Accepted) -> tuple[int, dict[str, Any]]:
    """The answer to an upload: 202 and the new document's status (``newVersion: true`` when it
    replaces an existing document's other bytes), or 200 with ``duplicate: true`` when these bytes
    already were that document (nothing was started)."""
    doc = accepted.document
    body: dict[str, Any] = {"documentId": doc.id, "status": str(doc.status), "duplicate": accepted.duplicate}
    if accepted.new_version:
        body["newVersion"] = True
    if accepted.duplicate:
        body["title"] = doc.title
        body["message"] = already_there(doc.title, doc.id)
        body["otherDocument"] = accepted.elsewhere  # not the document this name or source is
    return (200 if accepted.duplicate else 202), body


def note_json(note: Note) -> dict[str, Any]:
    return {
        "id": note.id,
        "documentId": note.document_id,
        "chunkIndex": note.chunk_index,
        "text": note.text,
        "collection": note.collection,
        "metadata": note.metadata,
        "createdAt": note.created_at,
    }


class ConversationOut(BaseModel):
    """A conversation as the API returns it (camelCase)."""

    model_config = ConfigDict(populate_by_name=True)

    id: str
    title: str
    workspace: str | None = Field(
        None, description="The workspace its questions search (null: every workspace you belong to)."
    )
    collection: str | None
    document_id: str | None = Field(alias="documentId")
    persona: str | None
    message_count: int = Field(alias="messageCount")
    summary_cursor: str | None = Field(alias="summaryCursor")
    last_summary_id: str | None = Field(alias="lastSummaryId")
    created_at: str = Field(alias="createdAt")
    updated_at: str = Field(alias="updatedAt")
    notice: str | None = Field(
        None,
        description="Said once, when the conversation is made: e.g. that its persona takes effect "
        "only when a language model writes the answers.",
    )

    @classmethod
    def of(cls, conv: Conversation) -> ConversationOut:
        return cls.model_validate(conversation_json(conv))


class ConversationPage(BaseModel):
    """``GET /chat/conversations``: a page of conversations, newest first."""

    items: list[ConversationOut]
    cursor: str | None = Field(description="Opaque cursor of the next page (null on the last).")


def conversation_json(conv: Conversation) -> dict[str, Any]:
    return {
        "id": conv.id,
        "title": conv.title,
        "collection": conv.collection,
        "documentId": conv.document_id,
        "persona": conv.persona,
        "messageCount": conv.message_count,
        "summaryCursor": conv.summary_cursor,
        "lastSummaryId": conv.last_summary_id,
        "createdAt": conv.created_at,
        "updatedAt": conv.updated_at,
        "workspace": conv.workspace,
    }


def message_json(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": msg.id,
        "role": msg.role,
        "content": msg.content,
        "sources": None if msg.sources is None else [source_json(s) for s in msg.sources],
        "model": msg.model,
        "createdAt": msg.created_at,
    }
    if msg.client_message_id:
        out["messageId"] = msg.client_message_id
    if msg.interrupted:
        out["interrupted"] = True
    if msg.feedback:
        out["feedback"] = msg.feedback  # the user's thumbs up / down on an answer
    if msg.query is not None:
        out["query"] = msg.query
    return out


def conversation_export_json(conv: Conversation, messages: Sequence[Message]) -> dict[str, Any]:
    """``GET …/export?format=json``: the conversation with every message."""
    return {**conversation_json(conv), "messages": [message_json(m) for m in messages]}


def turn_json(result: TurnResult) -> dict[str, Any]:
    """The JSON answer of a turn (``POST …/messages``, ``PUT …/messages/{id}``)."""
    msg = result.message
    body: dict[str, Any] = {
        "role": "assistant",
        "id": msg.id,
        "content": msg.content,
        "sources": [source_json(s) for s in msg.sources or []],
        "model": result.model,
        "guardUsed": result.guard_used,
        "userMessageId": result.user_message_id,
        "createdAt": msg.created_at,
    }
    if msg.query is not None:
        body["query"] = msg.query
    if result.replayed:
        body["replayed"] = True
    if result.suggestions:  # a refusal's closest passages (READER=on)
        body["suggestions"] = list(result.suggestions)
    return body


def page_json(page: Page[Any], convert: Any) -> dict[str, Any]:
    return {"items": [convert(item) for item in page.items], "cursor": page.cursor}
