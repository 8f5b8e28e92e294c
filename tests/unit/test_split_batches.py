"""The split step writes its batch files in parallel (issue 44, item 4c): a 500 MiB text is ~16,600
batches, which one PUT after another could not write within the step's 300 s. Proven without timing:
a store whose first PUTs each wait for the others (a barrier) finishes only if they run at once."""

from __future__ import annotations

import json
import threading

import pytest
from ragchat.domain.errors import NotFound
from ragchat.domain.models import Chunk
from ragchat.services.split_batches import SPLIT_WRITERS, write_batches

from tests.fakes import FakeBlobStore


class MeetingStore(FakeBlobStore):
    """The first ``meet`` PUTs wait for each other: a sequential writer breaks the barrier."""

    def __init__(self, meet: int) -> None:
        super().__init__()
        self.barrier = threading.Barrier(meet, timeout=10)
        self.met = 0
        self.most = 0
        self._in_flight = 0
        self._count = threading.Lock()

    def put(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> None:
        with self._count:
            self._in_flight += 1
            self.most = max(self.most, self._in_flight)
            first = self.met < self.barrier.parties
            self.met += 1
        if first:
            self.barrier.wait()
        super().put(key, data, content_type=content_type)
        with self._count:
            self._in_flight -= 1


def _chunks(n: int) -> tuple[list[Chunk], list[str]]:
    return [Chunk(index=i, text=f"chunk {i}", metadata={"page": i // 10 + 1}) for i in range(n)], [""] * n


def test_batch_files_are_written_at_once_and_listed_in_order() -> None:
    store = MeetingStore(meet=SPLIT_WRITERS)
    chunks, headers = _chunks(64 * 200 + 5)  # 201 batches: several waves
    batches = write_batches(store, "alice", "D1", "v1", chunks, headers, 64, still_there=lambda: None)

    assert store.most >= SPLIT_WRITERS  # the first PUTs met: they were in flight together
    assert [b["key"] for b in batches] == [f"work/D1/v1/batch-{n:05d}.json" for n in range(201)]
    indexes = [c["index"] for b in batches for c in json.loads(store.get(b["key"]))["chunks"]]
    assert indexes == list(range(len(chunks)))  # every chunk once, in order


def test_a_document_deleted_while_its_batches_are_written_stops_the_split() -> None:
    store = FakeBlobStore()
    chunks, headers = _chunks(64 * 200)
    looked_up: list[int] = []

    def still_there() -> None:
        looked_up.append(len(store.keys("work/")))
        raise NotFound("Document D1 not found (deleted while ingesting?)")

    with pytest.raises(NotFound):
        write_batches(store, "alice", "D1", "v1", chunks, headers, 64, still_there=still_there)
    assert looked_up == [SPLIT_WRITERS * 4]  # after the first wave, before any more was written
    assert len(store.keys("work/")) == SPLIT_WRITERS * 4
