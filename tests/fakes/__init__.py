"""In-memory fakes of every port in ``ragchat.ports``, for unit tests.

They behave like the real adapters as far as the port docstrings say (owner confinement, record as
stored with timestamps from an injected clock, upsert by id, opaque cursors, enabled filtering) and
add a few knobs for tests: call counters, recorded requests and scripted failures. Nothing here opens
a socket, touches the disk or sleeps.

Typical use::

    clock = FakeClock()
    docs = FakeDocumentStore(clock=clock)
    index = FakeVectorIndex(dimension=64)
    embedder = FakeEmbedder(dimension=64)

Every fake store is also registered in the contract suites (``tests/contract/conftest.py``) and must
pass them: a behaviour a unit test relies on is one the real adapters have.
"""

from __future__ import annotations

from ragchat.domain.errors import ModelError

from tests.fakes.clock import FakeClock
from tests.fakes.search import FakeEmbedder, FakeVectorIndex, unit
from tests.fakes.services import FakeBlobStore, FakeChatModel, FakeLauncher, OneBatchSteps, run_to_end
from tests.fakes.stores import FakeConversationStore, FakeCounters, FakeDocumentStore
from tests.fakes.streaming import FakePacing, SteppedChatModel
from tests.fakes.workspaces import FakeWorkspaceStore

__all__ = [
    "FakeBlobStore",
    "FakeChatModel",
    "FakeClock",
    "FakeConversationStore",
    "FakeCounters",
    "FakeDocumentStore",
    "FakeEmbedder",
    "FakeLauncher",
    "FakePacing",
    "FakeVectorIndex",
    "FakeWorkspaceStore",
    "OneBatchSteps",
    "SteppedChatModel",
    "run_to_end",
    "unit",
]

# Re-exported so tests can script model failures without another import.
FakeModelError = ModelError


def _conformance() -> None:  # pragma: no cover - checked by mypy, never called
    from ragchat import ports

    _d: ports.DocumentStore = FakeDocumentStore()
    _c: ports.ConversationStore = FakeConversationStore()
    _n: ports.Counters = FakeCounters()
    _v: ports.VectorIndex = FakeVectorIndex()
    _e: ports.Embedder = FakeEmbedder()
    _m: ports.ChatModel = FakeChatModel()
    _b: ports.BlobStore = FakeBlobStore()
    _l: ports.IngestionLauncher = FakeLauncher()
