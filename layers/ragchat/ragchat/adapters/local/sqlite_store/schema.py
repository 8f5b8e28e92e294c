"""The schema of the local SQLite file: ordered migrations, one list of statements per step.

The tables of every local adapter live here (documents, notes, conversations, messages, counters,
the vector index's ``vectors``/``vectors_fts``/``index_state``, the precomputed
``evidence_vectors``, and ``workspaces``/``workspace_members``), so the file has one version.
"""

from __future__ import annotations

# Ordered migrations: step N (1-based) brings the schema from version N-1 to N. Append only; never
# edit a released step. Each step is a list of single statements run in one transaction.
MIGRATIONS: list[list[str]] = [
    # 1: documents, notes, conversations, messages, counters
    [
        """CREATE TABLE documents (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            title TEXT NOT NULL,
            content_type TEXT NOT NULL,
            source TEXT NOT NULL,
            body_key TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            collection TEXT,
            status TEXT NOT NULL,
            error TEXT,
            chunk_count INTEGER NOT NULL DEFAULT 0,
            enabled INTEGER NOT NULL DEFAULT 1,
            split INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        # list documents by owner newest first (optionally within a collection)
        "CREATE INDEX documents_by_owner ON documents (owner, created_at, id)",
        "CREATE INDEX documents_by_collection ON documents (owner, collection, created_at, id)",
        """CREATE TABLE notes (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            document_id TEXT,
            chunk_index INTEGER NOT NULL,
            text TEXT NOT NULL,
            collection TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL
        )""",
        # notes of a document in chunk order; all notes of an owner newest first
        "CREATE INDEX notes_by_document ON notes (owner, document_id, chunk_index, id)",
        "CREATE INDEX notes_by_owner ON notes (owner, created_at, id)",
        """CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            collection TEXT,
            document_id TEXT,
            persona TEXT,
            summary_cursor TEXT,
            last_summary_id TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        "CREATE INDEX conversations_by_owner ON conversations (owner, updated_at, id)",
        """CREATE TABLE messages (
            id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            sources TEXT,
            model TEXT,
            client_message_id TEXT,
            interrupted INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        )""",
        # messages of a conversation in creation order: (created_at, id); ULIDs are monotonic within
        # a process, so two messages written in the same millisecond keep their order.
        "CREATE INDEX messages_by_conversation ON messages (conversation_id, created_at, id)",
        # idempotency: one message per (conversation, client message id, role), enforced under races
        """CREATE UNIQUE INDEX messages_client_id ON messages (conversation_id, client_message_id, role)
            WHERE client_message_id IS NOT NULL""",
        """CREATE TABLE counters (
            key TEXT PRIMARY KEY,
            value INTEGER NOT NULL,
            expires_at REAL NOT NULL
        )""",
        "CREATE INDEX counters_by_expiry ON counters (expires_at)",
    ],
    # 2: the local vector index (vectors + FTS5 keyword index kept in sync by triggers)
    [
        """CREATE TABLE vectors (
            rid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            owner TEXT NOT NULL,
            document_id TEXT,
            chunk_index INTEGER NOT NULL,
            collection TEXT,
            enabled INTEGER NOT NULL DEFAULT 1,
            text TEXT NOT NULL,
            vector BLOB NOT NULL
        )""",
        "CREATE INDEX vectors_by_document ON vectors (owner, document_id)",
        """CREATE VIRTUAL TABLE vectors_fts USING fts5(
            text, content='vectors', content_rowid='rid', tokenize='porter unicode61'
        )""",
        """CREATE TRIGGER vectors_ai AFTER INSERT ON vectors BEGIN
            INSERT INTO vectors_fts (rowid, text) VALUES (new.rid, new.text);
        END""",
        """CREATE TRIGGER vectors_ad AFTER DELETE ON vectors BEGIN
            INSERT INTO vectors_fts (vectors_fts, rowid, text) VALUES ('delete', old.rid, old.text);
        END""",
        """CREATE TRIGGER vectors_au AFTER UPDATE OF text ON vectors BEGIN
            INSERT INTO vectors_fts (vectors_fts, rowid, text) VALUES ('delete', old.rid, old.text);
            INSERT INTO vectors_fts (rowid, text) VALUES (new.rid, new.text);
        END""",
        # change counter: bumped by every index write, so a process notices another one's writes
        "CREATE TABLE index_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        "INSERT INTO index_state (key, value) VALUES ('version', 0)",
    ],
    # 3: document frequencies of the keyword index (hybrid search leaves out near-universal terms)
    [
        "CREATE VIRTUAL TABLE vectors_vocab USING fts5vocab(vectors_fts, 'row')",
    ],
    # 4: the content version a document's ingestion is for (a step of an older one does nothing)
    [
        "ALTER TABLE documents ADD COLUMN version TEXT",
    ],
    # 5: vectors of the texts a question embeds for a chunk (its passages and sentences), computed
    # after ingestion (``evidence.py``); they go with their chunk and with their document
    [
        """CREATE TABLE evidence_vectors (
            chunk_id TEXT NOT NULL,
            key BLOB NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (chunk_id, key)
        ) WITHOUT ROWID""",
        """CREATE TRIGGER vectors_evidence_ad AFTER DELETE ON vectors BEGIN
            DELETE FROM evidence_vectors WHERE chunk_id = old.id;
        END""",
        """CREATE TRIGGER vectors_evidence_au AFTER UPDATE OF text ON vectors
            WHEN old.text IS NOT new.text BEGIN
            DELETE FROM evidence_vectors WHERE chunk_id = old.id;
        END""",
        """CREATE TABLE evidence_documents (
            owner TEXT NOT NULL,
            document_id TEXT NOT NULL,
            version TEXT,
            title TEXT NOT NULL,
            PRIMARY KEY (owner, document_id)
        )""",
        """CREATE TRIGGER documents_evidence_ad AFTER DELETE ON documents BEGIN
            DELETE FROM evidence_documents WHERE owner = old.owner AND document_id = old.id;
        END""",
    ],
    # 6: the user's thumbs up / down on an answer ('up', 'down' or NULL)
    [
        "ALTER TABLE messages ADD COLUMN feedback TEXT",
    ],
    # 7: the SHA-256 of a document's uploaded bytes (a re-upload of the same bytes is a duplicate)
    [
        "ALTER TABLE documents ADD COLUMN content_hash TEXT",
    ],
    # 8: the query an assistant message's turn searched (a follow-up's standalone query)
    [
        "ALTER TABLE messages ADD COLUMN query TEXT",
    ],
    # 9: the approximate (HNSW) snapshot of a large vector index (``vector_ann``): file
    # ann_generation holds the rows with rid <= ann_max_rid as they were when it was written. The
    # triggers note each row with rid <= ann_watch_rid (>= ann_max_rid) inserted, re-vectored or
    # deleted since, with the change counter of its write: those rows are searched exactly instead.
    [
        "INSERT INTO index_state (key, value) VALUES ('ann_generation', 0)",
        "INSERT INTO index_state (key, value) VALUES ('ann_max_rid', 0)",
        "INSERT INTO index_state (key, value) VALUES ('ann_watch_rid', 0)",
        "CREATE TABLE vectors_ann_stale (rid INTEGER PRIMARY KEY, seq INTEGER NOT NULL)",
        # with a snapshot, counts and filtered scans go to SQL: an owner's switched-on rows
        # (optionally in a collection) are counted from this index alone
        "CREATE INDEX vectors_by_owner ON vectors (owner, enabled, collection)",
        """CREATE TRIGGER vectors_ann_ai AFTER INSERT ON vectors
            WHEN new.rid <= (SELECT value FROM index_state WHERE key = 'ann_watch_rid') BEGIN
            INSERT OR REPLACE INTO vectors_ann_stale (rid, seq)
                VALUES (new.rid, (SELECT value FROM index_state WHERE key = 'version'));
        END""",
        """CREATE TRIGGER vectors_ann_au AFTER UPDATE OF vector ON vectors
            WHEN old.vector IS NOT new.vector
            AND new.rid <= (SELECT value FROM index_state WHERE key = 'ann_watch_rid') BEGIN
            INSERT OR REPLACE INTO vectors_ann_stale (rid, seq)
                VALUES (new.rid, (SELECT value FROM index_state WHERE key = 'version'));
        END""",
        """CREATE TRIGGER vectors_ann_ad AFTER DELETE ON vectors
            WHEN old.rid <= (SELECT value FROM index_state WHERE key = 'ann_watch_rid') BEGIN
            INSERT OR REPLACE INTO vectors_ann_stale (rid, seq)
                VALUES (old.rid, (SELECT value FROM index_state WHERE key = 'version'));
        END""",
    ],
    # 10: the embedding model key (model id, plus the precision when not fp32) a document's evidence
    # was stored for: after EMBEDDER_PRECISION changes, its documents are warmed again. NULL = marked
    # before this column, when every evidence vector was keyed by the model id alone.
    [
        "ALTER TABLE evidence_documents ADD COLUMN model TEXT",
    ],
    # 11: shared workspaces and their members (a personal workspace is implicit: its id is its
    # user's id, so every record written before is already in its owner's personal workspace), and
    # the workspace a conversation is pinned to (NULL: every workspace its user belongs to)
    [
        """CREATE TABLE workspaces (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        """CREATE TABLE workspace_members (
            workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            role TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (workspace_id, user_id)
        ) WITHOUT ROWID""",
        "CREATE INDEX workspace_members_by_user ON workspace_members (user_id, workspace_id)",
        "ALTER TABLE conversations ADD COLUMN workspace TEXT",
        # the uploaded body's size (a workspace's storage ceiling counts it; NULL: stored before)
        "ALTER TABLE documents ADD COLUMN size INTEGER",
    ],
    # 12 (issue 45): one document per content (a workspace's documents by the hash of their bytes),
    # and the progress of a run in flight (chunks made by the split, chunks indexed, since when)
    [
        "CREATE INDEX documents_by_content ON documents (owner, content_hash)",
        "ALTER TABLE documents ADD COLUMN chunks_total INTEGER",
        "ALTER TABLE documents ADD COLUMN chunks_done INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE documents ADD COLUMN indexing_since TEXT",
    ],
    # 13 (issue 45): what a granted upload became (GET /uploads/{id}: a duplicate the receiver or the
    # trigger found is said, not left a 404), kept a day
    [
        """CREATE TABLE upload_outcomes (
            owner TEXT NOT NULL,
            upload_id TEXT NOT NULL,
            uploader TEXT NOT NULL,
            document_id TEXT NOT NULL,
            duplicate INTEGER NOT NULL,
            other_document INTEGER NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (owner, upload_id)
        ) WITHOUT ROWID""",
    ],
    # 14 (issue 45): an upload the receiver or the trigger refused says why (0: not refused)
    [
        "ALTER TABLE upload_outcomes ADD COLUMN refused_status INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE upload_outcomes ADD COLUMN refused_message TEXT NOT NULL DEFAULT ''",
    ],
    # 15 (issue 44): an enable or disable of a big document under way, switched in bounded steps
    ["ALTER TABLE documents ADD COLUMN switching TEXT"],
]

SCHEMA_VERSION = len(MIGRATIONS)
