"""One typed client for the ragchat HTTP API (docs/api.md): what ``ragchat ingest/ask/chat --api URL`` use.

Standard library only (``urllib``). The transport is a parameter so tests can answer requests
in-process; errors come back as ``ApiError`` carrying the API's ``{"error": ...}`` message.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragchat.cli.common import SUPPORTED

logger = logging.getLogger("ragchat.cli.client")

NO_TOKEN_HINT = (
    "pass --token or set RAGCHAT_TOKEN; for a local ragchat serve, run this where its data dir is "
    "(RAGCHAT_DATA_DIR, default .ragchat), whose serve.token holds the token of its run"
)
# A request goes out, (status, body) comes back; raises ``ApiError(0, …)`` when nothing answers.
Transport = Callable[[urllib.request.Request, float], tuple[int, bytes]]


class ApiError(Exception):
    """An HTTP error answer (``status`` ≥ 400) or, with ``status`` 0, an API that cannot be reached."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Source:
    id: str
    text: str
    title: str | None = None
    page: int | None = None

    def where(self) -> str:
        """``Title, p. 3`` (what is known of it; empty when nothing is)."""
        parts = [self.title] if self.title else []
        if self.page is not None:
            parts.append(f"p. {self.page}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Accepted:
    """The answer to an upload: the document's id and status; ``duplicate``: these bytes already were
    that document (``200``; nothing was started, the document is as it was); ``new_version``: other
    bytes under the same name, now a new version of that document."""

    document_id: str
    status: str
    duplicate: bool = False
    new_version: bool = False
    elsewhere: bool = False  # a duplicate of another document (the same content under another name)


@dataclass(frozen=True, slots=True)
class DocumentState:
    id: str
    status: str
    chunk_count: int
    error: str
    title: str = ""
    progress: str = ""  # while it is being ingested: "12 / 40 chunks (30%), about 1 min left"


@dataclass(frozen=True, slots=True)
class Answer:
    """A one-shot answer; ``raw`` is the JSON as the API (or the local service) gave it."""

    answer: str
    sources: list[Source]
    guard_used: bool
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Reply:
    """The assistant's message of a chat turn."""

    content: str
    sources: list[Source]
    query: str | None = None  # what was searched (a follow-up's standalone question)


@dataclass(frozen=True, slots=True)
class Transcript:
    title: str
    messages: list[tuple[str, str]]  # (role, content), oldest first

    def markdown(self) -> str:
        lines = [f"# {self.title or 'Conversation'}"]
        for role, content in self.messages:
            lines += ["", f"## {role}", "", content]
        return "\n".join(lines)


def sources_of(items: Any) -> list[Source]:
    out = []
    for s in items or []:
        title, page = s.get("title"), s.get("page")
        out.append(
            Source(
                str(s.get("id", "")),
                str(s.get("text", "")),
                title=str(title) if title else None,
                page=page if isinstance(page, int) and not isinstance(page, bool) else None,
            )
        )
    return out


def urllib_transport(req: urllib.request.Request, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), bytes(resp.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())
    except urllib.error.URLError as exc:
        raise ApiError(0, f"cannot reach {req.full_url}: {exc.reason}") from None
    except (TimeoutError, ConnectionError) as exc:
        raise ApiError(0, f"cannot reach {req.full_url}: {exc}") from None


def _error_message(status: int, raw: bytes) -> str:
    text = raw.decode(errors="replace")
    try:
        data = json.loads(raw)
    except ValueError:
        return text or f"HTTP {status}"
    if isinstance(data, dict) and data.get("error"):
        return str(data["error"])
    return text or f"HTTP {status}"


class ApiClient:
    """The calls the CLI makes, each returning a typed value."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 120.0,
        transport: Transport = urllib_transport,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.transport = transport

    # ---------------------------------------------------------------- documents
    def upload(
        self,
        path: Path,
        *,
        collection: str | None = None,
        source: str | None = None,
        workspace: str | None = None,
    ) -> Accepted:
        """``POST /documents`` with the file's bytes. ``source`` (``file:…``) names the file: the API
        derives the document id from it, so uploading the same source again replaces the document."""
        query = {"filename": path.name, "collection": collection, "source": source, "workspace": workspace}
        headers = {
            "Content-Type": SUPPORTED.get(path.suffix.lower(), "application/octet-stream"),
            "X-Filename": urllib.parse.quote(path.name),
        }
        data = self._json("POST", "/documents", query=query, body=path.read_bytes(), headers=headers)
        return Accepted(
            str(data["documentId"]),
            str(data.get("status", "")),
            data.get("duplicate") is True,
            data.get("newVersion") is True,
            data.get("otherDocument") is True,
        )

    def document(self, document_id: str) -> DocumentState:
        data = self._json("GET", f"/documents/{urllib.parse.quote(document_id, safe='')}")
        return DocumentState(
            id=str(data.get("id", document_id)),
            status=str(data.get("status", "")),
            chunk_count=int(data.get("chunkCount") or 0),
            error=str(data.get("error") or ""),
            title=str(data.get("title") or ""),
            progress=str((data.get("progress") or {}).get("text") or ""),
        )

    # ---------------------------------------------------------------- questions
    def ask(self, question: str, *, collection: str | None = None, workspace: str | None = None) -> Answer:
        data = self._json(
            "GET", "/", query={"text": question, "collection": collection, "workspace": workspace}
        )
        return Answer(
            answer=str(data.get("answer", "")),
            sources=sources_of(data.get("sources")),
            guard_used=bool(data.get("guardUsed")),
            raw=data,
        )

    # ---------------------------------------------------------------- chat
    def collections(self) -> set[str]:
        """The collections the caller's documents are in (``GET /documents``, every page)."""
        found: set[str] = set()
        cursor: str | None = None
        while True:
            data = self._json("GET", "/documents", query={"limit": "100", "cursor": cursor})
            found |= {str(d["collection"]) for d in data.get("items", []) if d.get("collection")}
            cursor = data.get("cursor")
            if not cursor:
                return found

    def create_conversation(
        self,
        *,
        collection: str | None = None,
        document_id: str | None = None,
        persona: str | None = None,
        workspace: str | None = None,
    ) -> dict[str, Any]:
        """The conversation as created (``id``; ``notice``: what the server has to say about it)."""
        body = {
            "collection": collection,
            "documentId": document_id,
            "persona": persona,
            "workspace": workspace,
        }
        return self._json("POST", "/chat/conversations", payload={k: v for k, v in body.items() if v})

    def send_message(self, conversation_id: str, content: str) -> Reply:
        path = f"/chat/conversations/{urllib.parse.quote(conversation_id, safe='')}/messages"
        data = self._json("POST", path, payload={"content": content})
        query = data.get("query")
        return Reply(
            str(data.get("content", "")), sources_of(data.get("sources")), str(query) if query else None
        )

    def export(self, conversation_id: str) -> Transcript:
        path = f"/chat/conversations/{urllib.parse.quote(conversation_id, safe='')}/export"
        data = self._json("GET", path, query={"format": "json"})
        messages = [(str(m["role"]), str(m["content"])) for m in data.get("messages", [])]
        return Transcript(str(data.get("title") or ""), messages)

    # ---------------------------------------------------------------- plumbing
    def _json(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | None] | None = None,
        payload: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One request; the JSON object answered, or ``ApiError`` on a 4xx/5xx."""
        hdrs = {"Accept": "application/json", **(headers or {})}
        if payload is not None:
            body = json.dumps(payload).encode()
            hdrs["Content-Type"] = "application/json"
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        params = {k: v for k, v in (query or {}).items() if v is not None and v != ""}
        url = self.base_url + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        req = urllib.request.Request(url, data=body, method=method, headers=hdrs)
        status, raw = self.transport(req, self.timeout)
        logger.debug("%s %s -> %s", method, url, status)
        if status >= 400:
            message = _error_message(status, raw)
            if status == 401 and not self.token:
                message += f" (no token sent: {NO_TOKEN_HINT})"
            raise ApiError(status, message)
        data = json.loads(raw) if raw else {}
        if not isinstance(data, dict):
            raise ApiError(status, f"unexpected answer from {url}: {raw[:200].decode(errors='replace')}")
        return data
