"""SQLite adapters for the local embedded backend: documents, notes, conversations, messages, counters,
workspaces.

Everything lives in one SQLite file (``<data dir>/ragchat.db``) in WAL mode, so a threaded HTTP
server, its background ingestion worker and a separate ``ragchat ingest`` process can all use it at
once. The vector index (:mod:`ragchat.adapters.local.vector_index`) keeps its tables in the same file.

Concurrency model (:class:`SqliteDatabase`):

* a small pool of connections; a thread holds one for the duration of a ``read()``/``write()`` block
  (nested blocks in the same thread reuse it);
* writes are serialized inside the process by a lock and across processes by ``BEGIN IMMEDIATE`` plus
  ``busy_timeout``; reads run concurrently (WAL readers never block writers);
* the schema is created and migrated on open: ``schema_version`` records the last applied step of
  :data:`MIGRATIONS`, and each step runs in its own transaction.

Timestamps are written here from the injected clock (``utc_iso``); what the methods return is the
record as stored. Lists are ordered by a sort key and paginated with opaque cursors that encode the
last sort key of the page (not an offset), so inserts between page requests neither duplicate nor
skip items.
"""

from ragchat.adapters.local.sqlite_store.conversations import SqliteConversationStore
from ragchat.adapters.local.sqlite_store.counters import SqliteCounters
from ragchat.adapters.local.sqlite_store.db import SqliteDatabase
from ragchat.adapters.local.sqlite_store.documents import SqliteDocumentStore
from ragchat.adapters.local.sqlite_store.schema import MIGRATIONS, SCHEMA_VERSION
from ragchat.adapters.local.sqlite_store.workspaces import SqliteWorkspaceStore

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SqliteConversationStore",
    "SqliteCounters",
    "SqliteDatabase",
    "SqliteDocumentStore",
    "SqliteWorkspaceStore",
]
