"""Existing data migrates intact (issue 32): a SQLite file of the schema before workspaces opens with
its documents, notes, vectors and conversations in their owner's personal workspace, searchable
together with a shared workspace the owner joins."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ragchat.adapters.local.sqlite_store import (
    MIGRATIONS,
    SqliteConversationStore,
    SqliteDatabase,
    SqliteDocumentStore,
    SqliteWorkspaceStore,
)
from ragchat.adapters.local.vector_index import LocalVectorIndex
from ragchat.domain.models import SearchFilter, VectorRecord
from ragchat.services.documents import DocumentService
from ragchat.services.workspaces import WorkspaceService

from tests.fakes import FakeBlobStore

WORKSPACES_STEP = next(i for i, step in enumerate(MIGRATIONS) if any("workspaces" in s for s in step))


def _old_file(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (?)", (WORKSPACES_STEP,))
    for step in MIGRATIONS[:WORKSPACES_STEP]:
        for statement in step:
            conn.execute(statement)
    conn.execute(
        "INSERT INTO documents (id, owner, title, content_type, source, body_key, status, created_at, "
        "updated_at) VALUES ('d1', 'alice', 'Old handbook', 'text/plain', 'api', 'k', 'READY', 't', 't')"
    )
    conn.execute(
        "INSERT INTO notes (id, owner, document_id, chunk_index, text, created_at) "
        "VALUES ('d1-00000', 'alice', 'd1', 0, 'holidays are in August', 't')"
    )
    conn.execute(
        "INSERT INTO conversations (id, owner, title, created_at, updated_at) "
        "VALUES ('c1', 'alice', 'Hi', 't', 't')"
    )
    conn.commit()
    conn.close()


def test_old_records_are_the_personal_workspace(tmp_path: Path):
    path = tmp_path / "ragchat.db"
    _old_file(path)
    db = SqliteDatabase(path)
    index = LocalVectorIndex(db, dimension=4)
    index.upsert([VectorRecord("d1-00000", [1, 0, 0, 0], "holidays are in August", "alice", "d1", 0)])
    docs = SqliteDocumentStore(db)
    blobs = FakeBlobStore()
    service = WorkspaceService(SqliteWorkspaceStore(db), docs, DocumentService(docs, index, blobs), blobs)

    access, doc = service.find_document("alice", "d1")
    assert (access.id, access.name, doc.title) == ("alice", "Personal", "Old handbook")
    conv = SqliteConversationStore(db).get_conversation("alice", "c1")
    assert conv is not None and conv.title == "Hi" and conv.workspace is None

    team = service.create("alice", "Team")
    index.upsert([VectorRecord("t-00000", [1, 0, 0, 0], "team notes", team.id, "t", 0)])
    hits = index.search([1, 0, 0, 0], SearchFilter(owner="alice", owners=service.readable("alice")), 5)
    assert sorted((h.id, h.owner) for h in hits) == [("d1-00000", "alice"), ("t-00000", team.id)]
    db.close()
