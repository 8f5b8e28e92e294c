"""Issue 30 finding 8: ``DELETE /documents/{id}`` while the split step writes the document's batch
files answered 500 (2 of 10): the blob store's ``delete_prefix`` met a folder the worker had just
written into ("Directory not empty"); the row stayed and later turned FAILED.

Replayed deterministically over ``ragchat serve``'s server (SQLite and files in a temporary data
directory): the blob store's hook runs the client's DELETE between two batch writes, and the worker's
next batch lands inside the folder the DELETE is removing, just before it removes it (the interleaving
that broke). The DELETE answers 204 and afterwards nothing of the document is left: no row, note,
vector, body, kept text or batch file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from ragchat.adapters.local.files import FileBlobStore
from ragchat.bootstrap import Container
from ragchat.domain.parsing import InProcessParser
from ragchat.local_server import LocalServer

from tests.fakes import FakeEmbedder
from tests.security.test_parse_isolation import Client, settings

OWNER = "local"
# ~200 chunks of 1,000 characters: 4 batch files of 64 chunks
BIG_NOTE = " ".join(
    f"Paragraph {i} tells how lighthouse keeper {i % 17} trimmed the wick." for i in range(3_000)
)


class HookedBlobs(FileBlobStore):
    """The local blob store, with a hook run when a batch file of a given number is about to be written
    (in the ingestion worker's thread)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.before_batch: dict[int, Any] = {}

    def put(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> None:
        if "/batch-" in key:
            hook = self.before_batch.pop(int(key.rsplit("batch-", 1)[1][:5]), None)
            if hook is not None:
                hook(key)
        super().put(key, data, content_type=content_type)


@pytest.mark.parametrize("during_batch", [1, 3])  # between two batches; before the last one
def test_delete_while_batches_are_written_answers_204_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, during_batch: int
) -> None:
    blobs = HookedBlobs(tmp_path / "blobs")
    container = Container(
        settings(tmp_path), embedder=FakeEmbedder(dimension=64), blobs=blobs, parser=InProcessParser()
    )
    local = LocalServer(container, port=0)
    local.start()
    client = Client(int(local.httpd.server_address[1]))
    answered: list[int] = []
    done = threading.Event()
    real_rmdir = os.rmdir

    def worker_writes_during_the_delete(path: Any, *args: Any, **kwargs: Any) -> None:
        """The DELETE is removing the batch folder: the worker's next batch lands in it right now."""
        folder = Path(path)
        if folder.parent.parent.name == "work" and not (folder / "late.json").exists() and not done.is_set():
            done.set()
            (folder / "late.json").write_bytes(b"{}")
        real_rmdir(path, *args, **kwargs)

    def delete_now(key: str) -> None:
        monkeypatch.setattr(os, "rmdir", worker_writes_during_the_delete)
        try:
            answered.append(client.call("DELETE", f"/documents/{doc_id}")[0])
        finally:
            monkeypatch.setattr(os, "rmdir", real_rmdir)

    blobs.before_batch[during_batch] = delete_now
    try:
        status, body = client.call("POST", "/notes", f'{{"title": "Big", "text": "{BIG_NOTE}"}}'.encode())
        assert status == 202
        doc_id = body["documentId"] if "documentId" in body else body["id"]
        assert container.launcher.wait_idle(60)
        assert done.is_set(), "the interleaving did not happen"
        assert answered == [204]
        assert client.call("GET", f"/documents/{doc_id}")[0] == 404
        assert container.documents.list_notes(OWNER, document_id=doc_id, limit=10).items == []
        assert container.index.count(OWNER) == 0
        left = [str(p.relative_to(blobs.root)) for p in blobs.root.rglob("*") if p.is_file()]
        assert [p for p in left if doc_id in p] == []
        assert not (blobs.root / "work" / doc_id).exists()
        # issue 43: the count of the run it was deleted in (INGEST_MAX_ATTEMPTS) stayed behind
        with sqlite3.connect(tmp_path / "ragchat.db") as conn:
            counted = conn.execute("SELECT key FROM counters WHERE key LIKE 'ingest-attempts:%'").fetchall()
        assert [k for (k,) in counted if doc_id in k] == []
    finally:
        local.stop()
        container.close()
