"""The workspace byte ceiling (``MAX_WORKSPACE_BYTES``) is one atomic reservation on every counters
adapter (issue 43 item 5): SQLite, DynamoDB on moto and the in-memory twin. Before, an upload listed
the workspace and then wrote, so 8 concurrent 150 KB uploads under 200,000 bytes stored 450,000."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from ragchat.domain.errors import PayloadTooLarge
from ragchat.domain.ids import new_id
from ragchat.domain.models import Document, DocumentStatus
from ragchat.services.documents import DocumentService
from ragchat.services.storage_ceiling import SEED_CLAIM_TTL_S, WorkspaceBytes
from ragchat.services.workspaces import WorkspaceService

from tests.fakes import FakeBlobStore, FakeClock, FakeDocumentStore, FakeVectorIndex, FakeWorkspaceStore

CAP = 200_000
SIZE = 150_000


def stored(documents: FakeDocumentStore, owner: str, size: int) -> Document:
    doc = Document(
        id=new_id(), owner=owner, title="t", content_type="text/plain", source="api", body_key="k",
        status=DocumentStatus.READY, size=size,
    )  # fmt: skip
    return documents.create_document(doc)


def race(calls: int, work: object) -> list[object]:
    """``work()`` from ``calls`` threads released at once; what each returned or raised."""
    start = threading.Barrier(calls)
    results: list[object] = []
    lock = threading.Lock()

    def worker() -> None:
        start.wait()
        try:
            result: object = work()  # type: ignore[operator]
        except Exception as exc:
            result = exc
        with lock:
            results.append(result)

    pool = [threading.Thread(target=worker) for _ in range(calls)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(60)
    return results


def test_eight_concurrent_uploads_reserve_at_most_the_ceiling(counters) -> None:
    ledger = WorkspaceBytes(counters, FakeDocumentStore(), CAP, FakeClock())
    outcomes = race(8, lambda: ledger.reserve("ws_team", SIZE))
    admitted = [o for o in outcomes if o is None]
    refused = [o for o in outcomes if isinstance(o, PayloadTooLarge)]
    assert (len(admitted), len(refused)) == (1, 7), outcomes
    assert "MAX_WORKSPACE_BYTES" in str(refused[0])
    assert ledger.held("ws_team") == SIZE
    assert ledger.held("bob") == 0  # another workspace (a personal one) has its own ledger


def test_what_a_workspace_held_before_is_counted_once_then_released(counters) -> None:
    documents = FakeDocumentStore()
    old = [stored(documents, "ana", 60_000), stored(documents, "ana", 40_000)]
    stored(documents, "ben", 90_000)
    ledger = WorkspaceBytes(counters, documents, CAP, FakeClock())

    outcomes = race(6, lambda: ledger.reserve("ana", 20_000))  # six first uploads seed it at once

    assert outcomes.count(None) == 5  # 100,000 held + 5 x 20,000 = 200,000: the sixth is refused
    assert ledger.held("ana") == CAP
    ledger.release("ana", old[0].size or 0)  # a document deleted
    assert ledger.held("ana") == CAP - 60_000
    ledger.reserve("ana", 60_000)
    with pytest.raises(PayloadTooLarge):
        ledger.reserve("ana", 1)


def test_without_a_ceiling_the_bytes_are_still_counted(counters) -> None:
    """So a ceiling set later starts from what is held (nothing lists the workspace again)."""
    documents = FakeDocumentStore()
    stored(documents, "ana", 10)
    ledger = WorkspaceBytes(counters, documents, 0, FakeClock())
    ledger.reserve("ana", 10**9)
    stored(documents, "ana", 10**9)
    capped = WorkspaceBytes(counters, documents, 10**9 + 20, FakeClock())
    with pytest.raises(PayloadTooLarge, match=f"holds {10**9 + 10} bytes"):
        capped.reserve("ana", 11)
    capped.reserve("ana", 10)


LEDGER_KEYS = ("ws-bytes:{}", "ws-bytes-seeded:{}", "ws-bytes-seeding:{}")


def test_a_deleted_workspace_leaves_no_ledger_counter_behind(counters) -> None:
    """Its ``ws-bytes:<workspace>`` counters (held, seeded, the seeding claim) went with it; they
    stayed for ever (a century-long TTL) before."""
    clock = FakeClock()
    documents, index, blobs = FakeDocumentStore(), FakeVectorIndex(dimension=4), FakeBlobStore()
    ledger = WorkspaceBytes(counters, documents, CAP, clock)
    deleter = DocumentService(documents, index, blobs, held=ledger)
    service = WorkspaceService(FakeWorkspaceStore(), documents, deleter, blobs, held=ledger)
    team = service.create("ana", "Team")
    ledger.reserve(team.id, 1_000)  # an upload
    stored(documents, team.id, 1_000)
    assert ledger.held(team.id) == 1_000

    service.delete("ana", team.id)

    for key in (k.format(team.id) for k in LEDGER_KEYS):  # nothing live under any of them
        assert counters.put_new(key, 0, ttl_seconds=60, now=clock()), f"{key} was left behind"


def test_a_seeder_whose_claim_ran_out_never_writes_over_the_ledger(counters) -> None:
    """The first count of a workspace is written only where no ledger is yet: a slow seeder (its claim
    expired while it listed) used to overwrite the ledger another request had seeded since, and
    the bytes reserved in it meanwhile were forgotten (room for more than ``MAX_WORKSPACE_BYTES``)."""
    clock = FakeClock()
    documents = FakeDocumentStore()
    stored(documents, "ana", 100_000)
    ledger = WorkspaceBytes(counters, documents, CAP, clock)

    def meanwhile() -> None:  # while the slow seeder lists: its claim runs out, another upload comes
        clock.advance(SEED_CLAIM_TTL_S + 1)
        ledger.reserve("ana", 60_000)  # seeds again (100,000) and reserves: 160,000

    slow_ledger = WorkspaceBytes(counters, SlowList(documents, meanwhile), CAP, clock)
    slow_ledger.reserve("ana", 30_000)  # its count (100,000) is not written: 190,000 held

    assert ledger.held("ana") == 190_000
    with pytest.raises(PayloadTooLarge):
        ledger.reserve("ana", 20_000)


class SlowList:
    """A document store whose first listing runs ``meanwhile`` before it answers (a slow count)."""

    def __init__(self, documents: FakeDocumentStore, meanwhile: Callable[[], None]) -> None:
        self._documents = documents
        self._meanwhile: Callable[[], None] | None = meanwhile

    def list_documents(self, owner: str, **kwargs: Any) -> Any:
        page = self._documents.list_documents(owner, **kwargs)
        if self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            meanwhile()
        return page
