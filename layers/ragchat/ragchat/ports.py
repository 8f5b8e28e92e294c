"""Ports: every outside dependency the services use, as ``typing.Protocol``. Adapters for the local
embedded default live in ``ragchat.adapters.local`` and for AWS in ``ragchat.adapters.aws``; the same
contract tests (``tests/contract``) run against both."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ragchat.domain.images import TextRecognizer as TextRecognizer  # OCR (defined beside what it reads)
from ragchat.domain.models import (
    Completion,
    Conversation,
    Document,
    Feedback,
    Hit,
    Message,
    ModelRequest,
    Note,
    Page,
    SearchFilter,
    VectorRecord,
)
from ragchat.domain.page_images import PageImage
from ragchat.domain.parsing import Parsed, ParseJob
from ragchat.domain.reading import Reading
from ragchat.domain.uploads import PresignedUpload, UploadGrant, UploadOutcome
from ragchat.domain.workspaces import Membership, Role, Workspace


@runtime_checkable
class DocumentStore(Protocol):
    """Documents and their notes. Every read is confined to one owner."""

    def create_document(self, doc: Document) -> Document:
        """Insert (or replace, same id) and return the record as stored, timestamps set."""
        ...

    def get_document(self, owner: str, doc_id: str) -> Document | None: ...

    def list_documents(
        self, owner: str, *, collection: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Document]:
        """Newest first."""
        ...

    def update_document(self, owner: str, doc_id: str, changes: dict[str, Any]) -> Document | None:
        """Apply ``changes`` (field name → value), bump ``updated_at``; ``None`` if absent."""
        ...

    def delete_document(self, owner: str, doc_id: str) -> bool:
        """Delete the document record and all its notes."""
        ...

    def find_by_content(self, owner: str, content_hash: str) -> Document | None:
        """A document of ``owner`` whose uploaded bytes have this SHA-256 (one read: an index or a
        pointer, never a scan); ``None`` when there is none."""
        ...

    def add_chunks_done(self, owner: str, doc_id: str, version: str | None, count: int) -> Document | None:
        """Add ``count`` to the document's ``chunks_done`` in one atomic write (batches finish in
        parallel), only while its version is ``version`` (``None``: any); returns the document as
        updated, ``None`` when it is gone or another version is being ingested."""
        ...

    def put_notes(self, notes: Sequence[Note]) -> list[Note]: ...  # upsert (same id overwrites): as stored

    def get_notes(self, owner: str, ids: Sequence[str]) -> list[Note]: ...  # missing ids left out; in order

    def get_notes_and_documents(
        self, owner: str, note_ids: Sequence[str], document_ids: Sequence[str]
    ) -> tuple[list[Note], list[Document]]:
        """Notes and documents by id in ONE round trip (where a turn's sources come from: page,
        title); missing or foreign ids are left out; orders follow the ids."""
        ...

    def list_notes(
        self, owner: str, *, document_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Note]:
        """With ``document_id``: that document's notes in chunk order; otherwise newest first."""
        ...

    def delete_note(self, owner: str, note_id: str) -> Note | None: ...

    def delete_notes_of_document(self, owner: str, doc_id: str, *, limit: int | None = None) -> list[str]:
        """Delete every note of a document (with ``limit``: at most that many, the first in chunk
        order, so a big document goes a page per call); returns their ids."""
        ...

    def record_upload(self, outcome: UploadOutcome, *, expires_at: float) -> None:
        """What a granted upload became (a new document, or the one its bytes already were)."""
        ...

    def upload_outcome(self, owner: str, upload_id: str, *, now: float) -> UploadOutcome | None: ...


@runtime_checkable
class UnfinishedDocuments(Protocol):
    """A store that can list every unfinished document of every workspace (the local stores: what
    ``ragchat serve`` resumes at start; in the cloud the state machine carries each run, and a
    whole-table read is never made)."""

    def unfinished(self) -> list[tuple[str, str]]:
        """(owner, document id) of every ``PENDING``/``PROCESSING`` document, oldest first."""
        ...


@runtime_checkable
class ConversationStore(Protocol):
    def create_conversation(self, conv: Conversation) -> Conversation: ...

    def get_conversation(self, owner: str, conv_id: str) -> Conversation | None: ...

    def find_conversation(self, conv_id: str) -> Conversation | None: ...  # whoever's (never shown: see API)

    def list_conversations(
        self, owner: str, *, limit: int = 50, cursor: str | None = None
    ) -> Page[Conversation]:
        """Newest (most recently updated) first, with ``message_count`` filled in."""
        ...

    def update_conversation(
        self, owner: str, conv_id: str, changes: dict[str, Any]
    ) -> Conversation | None: ...

    def delete_conversation(self, owner: str, conv_id: str) -> bool:
        """Delete the conversation and all its messages."""
        ...

    def add_message(self, msg: Message) -> Message:
        """Insert; if ``client_message_id`` is set and already used in this conversation for the same
        role, raise ``ragchat.domain.errors.Conflict``. Returns the record as stored."""
        ...

    def recent_messages(self, owner: str, conv_id: str, limit: int) -> list[Message]:
        """Newest first, at most ``limit`` (one query)."""
        ...

    def list_messages(
        self, owner: str, conv_id: str, *, limit: int = 1000, cursor: str | None = None
    ) -> Page[Message]:
        """Ascending by creation."""
        ...

    def get_message(self, owner: str, conv_id: str, message_id: str) -> Message | None: ...

    def find_by_client_message_id(self, owner: str, conv_id: str, client_message_id: str) -> list[Message]:
        """The messages (user and assistant) created for one client message id."""
        ...

    def delete_messages_after(self, owner: str, conv_id: str, message_id: str | None) -> int:
        """Delete every message created after ``message_id`` (``None``: every message of the
        conversation, which itself stays, with its id, times and settings); returns how many. An
        unknown ``message_id`` deletes nothing."""
        ...

    def set_feedback(
        self, owner: str, conv_id: str, message_id: str, feedback: Feedback | None
    ) -> Message | None:
        """Store the user's rating on the message (``None`` clears it) and return the message as
        stored; ``None`` when the message is not in the caller's conversation. Changes nothing else
        (not the conversation's ``updated_at``: rating an answer does not reorder the list)."""
        ...


@runtime_checkable
class WorkspaceStore(Protocol):
    """Shared workspaces and their members. Personal workspaces are implicit (id = user id) and are
    never stored here. Reads are strongly consistent: a removed member loses access at once."""

    def create_workspace(self, workspace: Workspace, owner: str) -> Workspace:
        """Store a new workspace with ``owner`` as its first member (role owner); returns it as
        stored (timestamps set)."""
        ...

    def get_workspace(self, workspace_id: str) -> Workspace | None: ...

    def rename_workspace(self, workspace_id: str, name: str) -> Workspace | None: ...

    def delete_workspace(self, workspace_id: str) -> bool:
        """Remove the workspace and all its memberships (its documents are the caller's job)."""
        ...

    def memberships(self, user_id: str) -> list[Membership]:
        """The shared workspaces ``user_id`` belongs to, with role and workspace name."""
        ...

    def membership(self, workspace_id: str, user_id: str) -> Membership | None: ...

    def members(self, workspace_id: str) -> list[Membership]: ...

    def put_member(
        self, workspace_id: str, user_id: str, role: Role, *, keep_owner: bool = False
    ) -> Membership:
        """Add ``user_id`` or change their role. ``keep_owner``: refuse (``Conflict``) a change that
        would leave no owner, decided atomically with the write."""
        ...

    def remove_member(self, workspace_id: str, user_id: str, *, keep_owner: bool = False) -> bool:
        """``False`` when ``user_id`` was not a member; ``keep_owner`` as in :meth:`put_member`."""
        ...


@runtime_checkable
class Counters(Protocol):
    """Expiring integer counters (rate limits, flood detection, circuit breaker). Atomic."""

    def increment(self, key: str, *, amount: int = 1, ttl_seconds: float, now: float) -> int:
        """Add ``amount``, return the new value. A missing or expired (``expires_at <= now``) counter
        starts from 0 with ``expires_at = now + ttl_seconds``; a live one keeps its expiry."""
        ...

    def get(self, key: str, *, now: float) -> int:
        """Current value; 0 when absent or expired."""
        ...

    def increment_up_to(
        self, key: str, *, limit: int, amount: int = 1, ttl_seconds: float, now: float
    ) -> int | None:
        """``increment`` only when the live value would then be at most ``limit``: the new value, or
        ``None``, nothing changed. Atomic: of concurrent calls exactly as many succeed as fit."""
        ...

    def get_many(self, keys: Sequence[str], *, now: float) -> dict[str, int]: ...

    def reset(self, key: str) -> None: ...

    def put(self, key: str, value: int, *, ttl_seconds: float, now: float) -> None:
        """Set ``value``, ``expires_at = now + ttl_seconds``, replacing any counter (a flag)."""
        ...

    def put_new(self, key: str, value: int, *, ttl_seconds: float, now: float) -> bool:
        """:meth:`put` only where no live counter is (True: written). Atomic: one of concurrent calls."""


@runtime_checkable
class LocalCounters(Protocol):
    """Counters one machine's processes share (SQLite): what ``ragchat serve`` clears at start."""

    def reset_prefix(self, prefix: str) -> int:
        """Remove every counter whose key starts with ``prefix``; returns how many went."""
        ...


@runtime_checkable
class VectorIndex(Protocol):
    dimension: int

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or overwrite by id. Raises on any record it could not store (no silent drop)."""
        ...

    def search(self, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        """Top ``k`` by cosine similarity among the owner's enabled notes within the filter."""
        ...

    def hybrid_search(self, text: str, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        """Keyword (BM25) and vector results fused; ``score`` is the fused score."""
        ...

    def delete(self, ids: Sequence[str], *, settled: bool = False) -> None:
        """Remove these vectors. With ``settled`` (ingestion's swap of a replaced version), return
        only once none of them is searchable (a near-real-time store waits, bounded, or raises
        ``TransientError``)."""
        ...

    def delete_document(self, owner: str, document_id: str, *, tags: Sequence[str] = ()) -> int:
        """Remove every vector of a document; returns how many (best effort for remote indexes).
        ``tags``: the version tags its note ids may carry (``<doc>-NNNNNv<tag>``, besides the ids
        without one), for an index that finds a document's vectors by their keys, not by a filter."""
        ...

    def set_enabled(
        self,
        owner: str,
        document_id: str,
        enabled: bool,
        *,
        chunk_count: int | None = None,
        tags: Sequence[str] = (),
        chunks: tuple[int, int] | None = None,
    ) -> None:
        """Switch a document's vectors on or off (``tags`` as in :meth:`delete_document`); ``chunks``
        ``(start, stop)``: only chunk indexes ``start <= i < stop`` (a finalize step). With ``chunk_count``
        (finalize; ``tags``: the new version's tag, none for ids without one), return once that version's
        vectors (of the range) are searchable in the new state and no earlier copy is (a near-real-time
        store waits, bounded, or raises ``TransientError``); the previous version's are not counted."""
        ...

    def count(self, owner: str) -> int:
        """How many enabled vectors this owner has (0 → empty knowledge base)."""
        ...


@runtime_checkable
class Embedder(Protocol):
    model_id: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text, in order."""
        ...

    def embed_query(self, text: str) -> list[float]: ...


@runtime_checkable
class ChatModel(Protocol):
    model_id: str

    def complete(self, request: ModelRequest) -> Completion: ...

    def stream(self, request: ModelRequest) -> Iterator[str]:
        """Yield text deltas; the concatenation is the answer."""
        ...


class NoteTools(Protocol):
    """What the chat model may call in tool-use mode (docs/chat.md), confined to the caller and the
    conversation's scope (the chat service implements it per turn)."""

    def search_notes(self, query: str, limit: int) -> list[Hit]: ...

    def get_note(self, note_id: str) -> Hit | None: ...


@runtime_checkable
class ToolCallingChatModel(ChatModel, Protocol):
    """A chat model that can also answer by calling :class:`NoteTools` (``CHAT_MODE=tools``)."""

    def complete_with_tools(self, request: ModelRequest, tools: NoteTools) -> Completion:
        """Answer, calling ``tools`` as the model asks; ``Completion.tool_hits`` holds what they
        returned (those notes count as retrieved for citation validation)."""
        ...


class Summarizer(Protocol):
    """Writes the summary that replaces older messages in the history window (docs/chat.md)."""

    def summarize(
        self, messages: Sequence[Message], *, previous: str | None, deadline: float | None = None
    ) -> str:
        """``deadline``: the turn's model deadline (on the chat clock), for a summarizer that calls
        the model."""
        ...


class PageRenderer(Protocol):
    """A PDF's page as an image (the document viewer), the passages ``find`` boxed on it (``marks``).
    Raises ``NotFound`` for a page past the end, ``ValidationError`` for bytes that are no readable PDF."""

    def render(self, pdf: bytes, page: int, width: int, find: Sequence[str] = ()) -> PageImage: ...


@runtime_checkable
class BlobStore(Protocol):
    def put(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> None: ...

    def get(self, key: str) -> bytes: ...  # raises ``KeyError`` when absent

    def get_with_metadata(self, key: str) -> tuple[bytes, dict[str, str]]:
        """The object and its user metadata (names lower-cased; ``{}`` when the store keeps none).
        Raises ``KeyError`` when absent."""
        ...

    def delete(self, key: str) -> None: ...  # absent keys are not an error

    def delete_prefix(self, prefix: str) -> int: ...

    def presign_post(
        self,
        key: str,
        *,
        content_type: str,
        min_bytes: int,
        max_bytes: int,
        expires_in: int,
        metadata: dict[str, str],
    ) -> PresignedUpload:
        """A browser form POST that stores one file at ``key`` without further credentials: the
        content type and ``metadata`` (names without ``x-amz-meta-``) pinned, the size within
        ``[min_bytes, max_bytes]``, valid for ``expires_in`` seconds. The URL may be relative (a route
        of the local server itself)."""
        ...

    def link(self, key: str, *, content_type: str, expires_in: int) -> str | None:
        """A URL that reads the object for ``expires_in`` seconds without further credentials,
        served as ``content_type`` (a presigned GET); ``None`` from a store that gives no such links
        (the caller reads the bytes with ``get``). Raises ``KeyError`` when absent."""
        ...

    def upload_grant(self, token: str) -> UploadGrant:
        """The grant behind a presigned URL the store serves itself (``/uploads/local/<token>``);
        ``Forbidden`` when forged or expired, ``NotFound`` for a store whose uploads go elsewhere."""
        ...


@runtime_checkable
class IngestionLauncher(Protocol):
    def start(self, owner: str, document_id: str, *, version: str | None = None) -> None:
        """Start the ingestion pipeline for a document. Starting the same document twice while a run
        is under way is not an error and does not start a second concurrent run. ``version`` names
        the content being ingested (a new one per upload): when it differs from the running one, the
        pipeline must end with the newest content READY (re-run or supersede the running one)."""
        ...


class DocumentParser(Protocol):
    def parse(self, body: Callable[[], bytes], job: ParseJob) -> Parsed:
        """Read one uploaded document (:func:`ragchat.domain.parsing.parse_document`) whose bytes
        ``body()`` returns (called once; not held once handed over). A document over a CPU, memory
        or time limit raises ``ValidationError`` saying which; the next one is read normally."""
        ...


@runtime_checkable
class Metrics(Protocol):
    """Operational metrics (docs/deploy.md): CloudWatch EMF (namespace ``ragchat``) on AWS, nothing locally.
    The names, units and dimensions the services use are in ``ragchat.services.metrics``."""

    def add(
        self,
        name: str,
        value: float = 1.0,
        *,
        unit: str = "Count",
        dimensions: Mapping[str, str] | None = None,
    ) -> None:
        """Record one ``value`` of the metric ``name`` (``unit``: a CloudWatch unit such as ``Count``,
        ``Milliseconds``, ``Seconds``); ``dimensions`` (e.g. ``{"phase": "vector_search"}``) split it.
        Never raises: a metric that cannot be recorded is dropped."""
        ...


@runtime_checkable
class EvidenceStore(Protocol):
    """Vectors of the texts a question embeds for a chunk (its decision's passages and its answer's
    sentences), computed ahead of time after ingestion (local SQLite only; see
    ``ragchat.services.evidence``). A text is found only by its exact value and embedding model."""

    def vectors_of(self, chunk_ids: Sequence[str], texts: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors of those ``texts`` that ``chunk_ids`` have (the others are absent)."""
        ...

    def warmed_chunks(self, chunk_ids: Sequence[str]) -> set[str]:
        """Those of ``chunk_ids`` whose evidence is all stored (their document's, for its current
        version and title and this store's embedding model key), or that belong to no document."""
        ...

    def put(self, vectors: Mapping[str, Sequence[tuple[str, Sequence[float]]]]) -> int:
        """Store ``chunk_id → [(text, vector), …]`` for chunks still indexed; returns rows written."""
        ...

    def mark(self, owner: str, document_id: str, version: str | None, title: str) -> None:
        """Record that a document (content ``version``, ``title``) has all its evidence vectors."""
        ...

    def unwarmed(self) -> list[tuple[str, str]]:
        """``(owner, document_id)`` of READY documents whose evidence is missing or outdated."""
        ...


@runtime_checkable
class CalibrationStore(Protocol):
    """The answerability coefficients ``ragchat calibrate`` fitted, per embedding model id (an SSM
    parameter in the cloud, a file locally)."""

    def load(self) -> dict[str, dict[str, Any]]:
        """``model id → Coefficients.as_json() (+ "figures")``; empty when nothing is stored."""
        ...

    def save(self, model_id: str, entry: Mapping[str, Any]) -> None:
        """Store ``entry`` under ``model_id`` (the other models' entries kept)."""
        ...


@runtime_checkable
class UserDirectory(Protocol):
    """Who a member identifier names, for adding workspace members (issue 32): a user id (a Cognito
    ``sub``, ``apikey:<id>``, a local user name) or an e-mail address. Cloud: the Cognito user pool;
    locally: the users of ``ragchat serve``."""

    def resolve(self, identifier: str) -> str | None:
        """The user id ``identifier`` names, or ``None`` when it names nobody known."""


@runtime_checkable
class Reader(Protocol):
    """An extractive reader (docs/reader.md): reads a question and a passage together, finds the
    passage's best answer span and scores it against "no answer here"."""

    def read(self, question: str, passages: Sequence[str]) -> list[Reading]:
        """One reading per passage, in order (character offsets into each passage)."""
        ...

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        """σ(best span − no answer) in [0, 1], one per passage, in order."""
        ...
