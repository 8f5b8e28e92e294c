"""Identifiers: ULIDs, and deterministic note ids so a re-run of ingestion overwrites."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from ulid import ULID


def new_id() -> str:
    return str(ULID())


def note_id(document_id: str, chunk_index: int, version: str | None = None) -> str:
    """Stable per (document id, content version, chunk index): ``<document id>-<index, 5 digits>``,
    then ``v`` and a tag of the version when there is one. A re-run of one version overwrites its own
    notes; two versions of a document never share an id, so a replacement's chunks are written
    beside the previous version's, which stay searchable until the new version is READY.

    Matches the citation id pattern ``[A-Za-z0-9_-]+`` so notes can be cited as-is."""
    return tagged_note_id(document_id, chunk_index, version_tag(version) if version else None)


def tagged_note_id(document_id: str, chunk_index: int, tag: str | None) -> str:
    """The note id of chunk ``chunk_index`` of the version whose tag is ``tag`` (``None``: an id
    without a version, as documents ingested before ids were per version have)."""
    base = f"{document_id}-{chunk_index:05d}"
    return f"{base}v{tag}" if tag else base


def version_tag(version: str) -> str:
    """A short, id-safe tag of a content version (8 hex digits of its hash)."""
    return hashlib.sha256(version.encode("utf-8")).hexdigest()[:8]


_TAGGED = re.compile(r"-[0-9]{5,}v([0-9a-f]{8})\Z")


def note_tag(nid: str) -> str | None:
    """The version tag a note id carries (``None`` for an id without one)."""
    found = _TAGGED.search(nid)
    return found.group(1) if found else None


def version_tags(note_ids: Iterable[str], *versions: str | None) -> list[str]:
    """The version tags of a document's vectors: those its note ids carry and those of ``versions``
    (sorted, each once). Indexes that cannot select a document's vectors by a filter enumerate the
    keys of each tag (and the ids without one)."""
    tags = {tag for tag in map(note_tag, note_ids) if tag}
    return sorted(tags | {version_tag(v) for v in versions if v})


def stable_document_id(source: str) -> str:
    """A document id derived from a source key (an S3 object key, a file path): re-ingesting the
    same key replaces the document instead of creating another. 26 chars of Crockford-like base32."""
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    n = int.from_bytes(digest[:17], "big")
    chars = []
    for _ in range(26):
        n, r = divmod(n, 32)
        chars.append(alphabet[r])
    return "D" + "".join(chars)[:25]


def named_document_id(owner: str, collection: str | None, filename: str) -> str:
    """The id of the file ``filename`` an owner keeps in ``collection``: uploading a file under the
    same name again (same owner, same collection) is that document again, a new version of it when
    the bytes changed. Distinct from every ``stable_document_id`` of a path or key."""
    return stable_document_id(f"name\n{owner}\n{collection or ''}\n{filename}")
