"""Where a document's blobs live: its owner's key segment, the kept extracted text of a parsed
document, and the per-version work folder of an ingestion run."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from ragchat.domain.content_types import EXTRACTED_TYPES as _EXTRACTED

if TYPE_CHECKING:
    from ragchat.ports import BlobStore

_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9_.@+-]{1,128}$")
# Content types whose text is extracted by parsing (kept at ``text_key`` by the split step).
EXTRACTED_TYPES = _EXTRACTED


def blob_segment(owner: str) -> str:
    """A key segment for an owner: as-is when it is plainly safe, otherwise a stable hash."""
    if _SAFE_SEGMENT.match(owner) and owner not in (".", ".."):
        return owner
    return "h-" + hashlib.sha256(owner.encode("utf-8")).hexdigest()[:32]


def text_key(owner: str, document_id: str) -> str:
    """Where the extracted text of a PDF or HTML document is kept (written by the split step), so
    reading the document's text never runs extraction on a request."""
    return f"extracted/{blob_segment(owner)}/{document_id}.txt"


def work_prefix(document_id: str, version: str | None = None) -> str:
    """Where a document's batch files live while it is being ingested: one folder per content
    version, so the batches of two runs never collide and each run cleans up only its own."""
    if version:
        return f"work/{document_id}/{version}/"
    return f"work/{document_id}/"


def keep_extracted_text(
    blobs: BlobStore, owner: str, document_id: str, pages: list[tuple[str, dict[str, Any]]]
) -> bytes:
    """Store a parsed document's extracted text (its pages joined by blank lines) at ``text_key``,
    where reading the document's text finds it; returns what was stored."""
    data = "\n\n".join(page for page, _ in pages).encode("utf-8")
    blobs.put(text_key(owner, document_id), data, content_type="text/plain; charset=utf-8")
    return data
