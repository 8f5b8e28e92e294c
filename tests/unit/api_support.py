"""A resolver over a Container wired with the in-memory fakes (ingestion runs synchronously)."""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from typing import Any

from ragchat.api.app import create_app
from ragchat.bootstrap import Container
from ragchat.config import load_settings

from tests.events import api_event
from tests.fakes import (
    FakeBlobStore,
    FakeClock,
    FakeConversationStore,
    FakeCounters,
    FakeDocumentStore,
    FakeEmbedder,
    FakeLauncher,
    FakeVectorIndex,
    FakeWorkspaceStore,
    run_to_end,
)


@dataclass
class Api:
    container: Container
    app: Any
    launcher: FakeLauncher
    documents: FakeDocumentStore
    index: FakeVectorIndex
    clock: FakeClock

    def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.app.resolve(api_event(method, path, **kwargs), None)
        return result


@functools.cache
def scratch_dir() -> str:
    """One throw-away data dir per test process: the container opens SQLite there for its evidence
    store even with fake stores, and a fixed path (it was ``/nonexistent``, which root can create)
    would carry one run's schema into the next, or into another checkout's run."""
    return tempfile.mkdtemp(prefix="ragchat-unit-")


def make_api(env: dict[str, str] | None = None, *, run_pipeline: bool = True, **overrides: Any) -> Api:
    settings = load_settings(
        {
            "RAGCHAT_CHAT_MODEL": "extractive",
            "MIN_SIMILARITY": "0.3",
            "RAGCHAT_DATA_DIR": scratch_dir(),
            "PARSE_ISOLATION": "off",  # read in-process (the child reader: test_parse_isolation.py)
            **(env or {}),
        }
    )
    clock = FakeClock()
    documents = FakeDocumentStore(clock=clock)
    index = FakeVectorIndex(dimension=64)
    launcher = FakeLauncher()
    parts: dict[str, Any] = {
        "documents": documents,
        "conversations": FakeConversationStore(clock=clock),
        "counters": FakeCounters(),
        "blobs": FakeBlobStore(),
        "embedder": FakeEmbedder(dimension=64),
        "index": index,
        "launcher": launcher,
        "evidence_store": None,  # fakes all the way down: nothing on disk
        "workspace_store": FakeWorkspaceStore(clock=clock),
        **overrides,
    }
    container = Container(settings, clock=clock, **parts)
    if run_pipeline:
        launcher.run = lambda owner, doc_id: run_to_end(container.ingest_steps, [(owner, doc_id)])
    return Api(container, create_app(container), launcher, documents, index, clock)
