"""``MAX_WORKSPACE_BYTES`` under concurrency, through the ingestion service over the SQLite stack
(issue 43 item 5): 8 concurrent 150 KB uploads into one workspace under a 200,000-byte ceiling store
at most 200,000 bytes (before: each upload listed the workspace, then wrote; 450,000 were stored).
Personal workspaces too. The bytes come back when a document is deleted or its body fails to be
stored; a new version counts only its difference."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from ragchat.bootstrap import Container
from ragchat.config import load_settings
from ragchat.domain.errors import PayloadTooLarge

from tests.fakes import FakeEmbedder, FakeLauncher

CAP = 200_000
SIZE = 150_000


@pytest.fixture
def box(tmp_path: Path) -> Any:
    settings = load_settings(
        {
            "RAGCHAT_DATA_DIR": str(tmp_path),
            "RAGCHAT_CHAT_MODEL": "extractive",
            "MAX_WORKSPACE_BYTES": str(CAP),
            "PARSE_ISOLATION": "off",
        }
    )
    with Container(settings, embedder=FakeEmbedder(dimension=64), launcher=FakeLauncher()) as container:
        yield container


def held(box: Any, owner: str) -> int:
    page = box.documents.list_documents(owner, limit=200)
    return sum(d.size or 0 for d in page.items)


@pytest.mark.parametrize("owner", ["ws_team", "ana"], ids=["shared", "personal"])
def test_eight_concurrent_uploads_store_at_most_the_ceiling(box: Any, owner: str) -> None:
    start = threading.Barrier(8)
    outcomes: list[object] = []

    def upload(i: int) -> None:
        start.wait()
        try:
            body = (f"{i}" * SIZE).encode()
            outcomes.append(box.ingestion.accept(owner, body=body, filename=f"f{i}.txt", user="ana"))
        except PayloadTooLarge as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert len(outcomes) == 8
    assert held(box, owner) <= CAP
    assert held(box, owner) == SIZE  # one fits, the other seven are refused with the reason
    assert sum(isinstance(o, PayloadTooLarge) for o in outcomes) == 7


def test_deleting_a_document_gives_its_bytes_back(box: Any) -> None:
    doc = box.ingestion.submit("ana", body=b"a" * SIZE, filename="a.txt")
    with pytest.raises(PayloadTooLarge, match="holds 150000 bytes of its 200000"):
        box.ingestion.submit("ana", body=b"b" * SIZE, filename="b.txt")
    box.document_service.delete("ana", doc.id)
    assert box.ingestion.submit("ana", body=b"b" * SIZE, filename="b.txt").size == SIZE


def test_a_body_that_fails_to_be_stored_gives_its_bytes_back(box: Any) -> None:
    real_put = box.blobs.put

    def failing(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    box.blobs.put = failing
    with pytest.raises(OSError):
        box.ingestion.submit("ana", body=b"a" * SIZE, filename="a.txt")
    box.blobs.put = real_put
    assert box.ingestion.submit("ana", body=b"b" * SIZE, filename="b.txt").size == SIZE


def test_a_new_version_counts_only_its_difference(box: Any) -> None:
    box.ingestion.submit("ana", body=b"a" * SIZE, filename="a.txt", document_id="doc-a")
    box.ingestion.submit("ana", body=b"b" * 190_000, filename="a.txt", document_id="doc-a")  # +40,000
    with pytest.raises(PayloadTooLarge):
        box.ingestion.submit("ana", body=b"c" * 10_001, filename="c.txt")
    box.ingestion.submit("ana", body=b"d" * 100_000, filename="a.txt", document_id="doc-a")  # -90,000
    assert box.ingestion.submit("ana", body=b"c" * 100_000, filename="c.txt").size == 100_000
