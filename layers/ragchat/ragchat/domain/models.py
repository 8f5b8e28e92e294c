"""Domain records. Plain dataclasses: no AWS, no storage, no HTTP.

Timestamps are ISO 8601 UTC strings with millisecond precision (``2026-01-02T03:04:05.678Z``)
and are set by the storage adapter when it writes the record: what the API returns is the record
as stored, never a time made up in a handler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")

JSON = dict[str, Any]


class DocumentStatus(StrEnum):
    PENDING = "PENDING"
    PROCESSING = "PROCESSING"
    READY = "READY"
    FAILED = "FAILED"


@dataclass(slots=True)
class Document:
    """A document someone put in. The full body lives in the blob store under ``body_key``."""

    id: str
    owner: str
    title: str
    content_type: str
    source: str  # "api" | "s3://bucket/key" | "file:/path"
    body_key: str
    metadata: JSON = field(default_factory=dict)
    collection: str | None = None
    status: DocumentStatus = DocumentStatus.PENDING
    error: str | None = None
    chunk_count: int = 0
    enabled: bool = True
    split: bool = True
    created_at: str = ""
    updated_at: str = ""
    # The content version being ingested (one per upload): a pipeline step of an older version finds
    # it changed and does nothing (issue 8: a re-upload while a run is in flight). ``None``: unknown.
    version: str | None = None
    # SHA-256 (hex) of the uploaded bytes: the same bytes under the same name are the same document
    # (a re-upload answers with the existing one). ``None``: recorded before hashes were kept.
    content_hash: str | None = None
    # the uploaded body's size in bytes (what the workspace's storage ceiling counts); ``None``:
    # recorded before sizes were kept (counted as 0)
    size: int | None = None
    # Progress of the run in flight (issue 45): the chunks its split made (``None`` until the split is
    # done), how many of them are embedded and indexed (counted atomically per batch: the cloud's
    # batches finish in parallel), and when the split was done (where the time estimate starts).
    chunks_total: int | None = None
    chunks_done: int = 0
    indexing_since: str | None = None
    # Work on a settled document under way in bounded steps: an enable or disable (PATCH),
    # ``"on:<i>"``/``"off:<i>"``, the chunks before ``i`` switched (the record says enabled meanwhile);
    # or ``"cleanup:<version>"``, the reconciler still removing a failed run's chunks.
    switching: str | None = None


@dataclass(slots=True)
class Chunk:
    """One piece of a document produced by the splitter (before it is stored as a Note)."""

    index: int
    text: str
    metadata: JSON = field(default_factory=dict)  # e.g. {"page": 3} for PDFs


@dataclass(slots=True)
class Note:
    """One stored chunk. ``id`` is also the vector id."""

    id: str
    document_id: str | None
    chunk_index: int
    text: str
    owner: str
    collection: str | None = None
    metadata: JSON = field(default_factory=dict)
    created_at: str = ""


@dataclass(slots=True)
class VectorRecord:
    """What goes into the vector index: the note's vector, its text and its filterable metadata."""

    id: str  # note id
    vector: list[float]
    text: str
    owner: str
    document_id: str | None
    chunk_index: int
    collection: str | None = None
    enabled: bool = True

    def metadata(self) -> JSON:
        return {
            "note_id": self.id,
            "document_id": self.document_id,
            "chunk_index": self.chunk_index,
            "owner": self.owner,
            "collection": self.collection,
            "enabled": self.enabled,
        }


@dataclass(slots=True, frozen=True)
class SearchFilter:
    """Confines a search to enabled notes of one owner (a workspace id), or of several with
    ``owners`` (the workspaces a question searches), optionally to a collection or a document."""

    owner: str
    collection: str | None = None
    document_id: str | None = None
    owners: tuple[str, ...] = ()

    @property
    def partitions(self) -> tuple[str, ...]:
        """The owners (workspace ids) a search may return notes of: ``owners``, else ``(owner,)``.
        Every vector index confines search and hybrid search to exactly these."""
        return self.owners or (self.owner,)


@dataclass(slots=True)
class Hit:
    """A search result. ``score`` is the cosine similarity for vector search (what gating uses);
    for keyword or fused results it is that method's score."""

    id: str
    score: float
    text: str
    document_id: str | None = None
    chunk_index: int = 0
    collection: str | None = None
    # Cosine similarity to the query vector when the index knows it (vector hits: equal to ``score``;
    # hybrid hits from the local index: the vector similarity, even for keyword-only matches).
    # Similarity gating reads ``similarity if similarity is not None else score``.
    similarity: float | None = None
    # The owner (workspace id) of the note, when the index knows it (a search over several).
    owner: str | None = None


@dataclass(slots=True)
class Page(Generic[T]):
    """One page of a list; ``cursor`` is opaque and ``None`` on the last page."""

    items: list[T]
    cursor: str | None = None


Role = Literal["user", "assistant", "system-summary"]
Feedback = Literal["up", "down"]  # thumbs up / down on an answer
FEEDBACK_VALUES: tuple[Feedback, ...] = ("up", "down")


@dataclass(slots=True)
class SourceRef:
    """A citation stored with an assistant message: the note id, up to 160 chars of its text, and
    where it comes from (its document, the document's title, the PDF page when known). Messages
    stored before sources said where load with ``document_id``/``title``/``page`` left ``None``."""

    id: str
    text: str
    document_id: str | None = None
    title: str | None = None
    page: int | None = None
    # the workspace the note is in (id and name, as when the answer was given)
    workspace_id: str | None = None
    workspace_name: str | None = None
    # the answer span the reader found in this note (``READER=on``): what the citation highlights
    highlight: str | None = None


def source_json(src: SourceRef) -> JSON:
    """The one JSON shape of a source, in API responses, SSE, stored messages, exports and the CLI:
    ``{id, documentId, title, page?, workspace?, text, highlight?}`` (``page``, ``workspace`` and
    ``highlight`` only when known; ``workspace`` is ``{id, name}``; ``highlight``: the answer span
    the reader found in the note, what the citation panel marks)."""
    out: JSON = {"id": src.id, "documentId": src.document_id, "title": src.title}
    if src.page is not None:
        out["page"] = src.page
    if src.workspace_id is not None and src.workspace_name is not None:
        out["workspace"] = {"id": src.workspace_id, "name": src.workspace_name}
    out["text"] = src.text
    if src.highlight:
        out["highlight"] = src.highlight
    return out


def source_from_json(data: JSON) -> SourceRef:
    """A source back from :func:`source_json`'s shape; older records (``{id, text}``) still load."""
    page = data.get("page")
    ws = data.get("workspace")
    ws = ws if isinstance(ws, dict) else {}
    return SourceRef(
        id=str(data["id"]),
        text=str(data.get("text") or ""),
        document_id=data.get("documentId"),
        title=data.get("title"),
        page=page if isinstance(page, int) and not isinstance(page, bool) else None,
        workspace_id=ws.get("id"),
        workspace_name=ws.get("name"),
        highlight=data["highlight"] if isinstance(data.get("highlight"), str) else None,
    )


@dataclass(slots=True)
class Conversation:
    id: str
    owner: str
    title: str = ""
    collection: str | None = None
    document_id: str | None = None
    persona: str | None = None
    summary_cursor: str | None = None  # id of the last message the latest summary covers
    last_summary_id: str | None = None
    message_count: int = 0
    created_at: str = ""
    updated_at: str = ""
    # the workspace its questions search (``None``: every workspace its user belongs to); the
    # conversation itself stays its user's (``owner``), even when pinned to a shared workspace
    workspace: str | None = None


@dataclass(slots=True)
class Message:
    id: str
    conversation_id: str
    owner: str
    role: Role
    content: str
    sources: list[SourceRef] | None = None
    model: str | None = None
    client_message_id: str | None = None
    interrupted: bool = False
    created_at: str = ""
    feedback: Feedback | None = None  # the user's rating of an assistant message
    # an assistant message: the query its turn searched (a follow-up's standalone query)
    query: str | None = None


@dataclass(slots=True, frozen=True)
class ChatTurn:
    """One message as sent to a chat model."""

    role: Literal["user", "assistant"]
    content: str


@dataclass(slots=True)
class ModelRequest:
    """Everything a chat model may use to answer: the rebuilt system prompt, the history window
    ending with the current user message, and the retrieved notes (the extractive answerer reads
    these instead of the prompt)."""

    system: str
    messages: list[ChatTurn]
    sources: list[Hit]
    question: str
    max_tokens: int = 1024
    # Seconds this call may take in all (its share of the turn budget); adapters bound their
    # attempts by it. ``None``: only the adapter's own connect / first-token timeouts.
    timeout_s: float | None = None
    # The question's embedding when retrieval made one (the extractive answerer reuses it rather
    # than embedding the question a second time).
    question_vector: list[float] | None = None
    # The retrieved notes' document titles (document id → title), when retrieval read them: the
    # extractive answerer compares a table row by meaning with its document's title in front.
    source_titles: dict[str, str] | None = None
    # ``READER=on``: the answer span the reader found, a ``ragchat.domain.read_answers.Found`` (the
    # extractive answerer quotes its sentences); typed loosely so that this module, which
    # read_answers builds on, does not import it back
    found: object | None = None


@dataclass(slots=True)
class Completion:
    text: str
    model: str
    # Notes returned by tools during tool-use mode; they count as retrieved for citation validation.
    tool_hits: list[Hit] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
