"""Sources that say where (docs/api.md, §7): each cited note's document, the document's title and the PDF
page the note came from.

Where title and page come from — one batched read per answer, not the vector index. A chat turn
costs 4 store round trips before this (get conversation, read recent messages, add user message, add
assistant message; ``bench/bench_chat_turn.py`` measures them); an answer that cites something adds
ONE more (``DocumentStore.get_notes_and_documents``: a single BatchGetItem on DynamoDB — notes and
documents share the owner's partition — a single read on SQLite). Guard replies and answers that
cite nothing read nothing. The alternative, copying title and page into the vector metadata at index
time, would read nothing per turn but: every PATCH of a title would have to rewrite all the
document's vectors (S3 Vectors has no metadata update: get + put per 100 keys), S3 Vectors' indexes
fix their non-filterable keys at creation (the title would become a 2 KB filterable key, or the
index would have to be recreated), the local index would need a schema migration, and vectors
indexed before the change would carry neither until re-indexed. A read at answer time is always
current (a renamed document shows its new title in the next answer) and needs no migration; it is a
few milliseconds of a turn that already spends its time in the model. A failed read degrades to
sources without title and page (the answer stands).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ragchat.domain.models import Hit, Note, SourceRef
from ragchat.services.logs import log_error, message_of

if TYPE_CHECKING:
    from ragchat.ports import DocumentStore


def with_documents(sources: Sequence[SourceRef], hits: Sequence[Hit]) -> list[SourceRef]:
    """Each source with the document id and workspace its hit carries (no store read)."""
    hit_of = {h.id: h for h in hits}
    out = []
    for s in sources:
        hit = hit_of.get(s.id)
        doc = s.document_id if s.document_id is not None else (hit.document_id if hit else None)
        ws = s.workspace_id if s.workspace_id is not None else (hit.owner if hit else None)
        out.append(dataclasses.replace(s, document_id=doc, workspace_id=ws))
    return out


def locate_sources(
    documents: DocumentStore | None,
    owner: str,
    sources: Sequence[SourceRef],
    *,
    conversation_id: str | None = None,
    workspaces: Mapping[str, str] | None = None,
) -> list[SourceRef]:
    """``sources`` with ``documentId``, ``title`` and ``page`` filled in from one batched read of
    their notes and documents per workspace (``owner`` for a source whose hit did not say);
    unchanged when there is nothing to look up or the read fails. ``workspaces`` (id → name): the
    caller's workspaces, to name each source's."""
    if workspaces is None:  # one workspace searched: the sources need not say which
        out = [dataclasses.replace(s, workspace_id=None) for s in sources]
    else:
        out = [
            dataclasses.replace(
                s,
                workspace_id=s.workspace_id or owner,
                workspace_name=workspaces.get(s.workspace_id or owner, s.workspace_name),
            )
            for s in sources
        ]
    if not out or documents is None:
        return out
    note_by_id: dict[str, Note] = {}
    title_of: dict[str, str] = {}
    for ws in dict.fromkeys(s.workspace_id or owner for s in sources):
        mine = [s for s in sources if (s.workspace_id or owner) == ws]
        doc_ids = list(dict.fromkeys(s.document_id for s in mine if s.document_id))
        try:
            notes, docs = documents.get_notes_and_documents(ws, [s.id for s in mine], doc_ids)
        except Exception as exc:  # the answer stands without title and page
            log_error(conversation_id, type(exc).__name__, f"sources: {message_of(exc)}")
            return out
        note_by_id.update((n.id, n) for n in notes)
        title_of.update((d.id, d.title) for d in docs)
    located = []
    for src in out:
        note = note_by_id.get(src.id)
        page = note.metadata.get("page") if note is not None else None
        doc_id = src.document_id or (note.document_id if note is not None else None)
        located.append(
            dataclasses.replace(
                src,
                document_id=doc_id,
                title=title_of.get(doc_id or "", src.title),
                page=page if isinstance(page, int) and not isinstance(page, bool) else src.page,
            )
        )
    return located
