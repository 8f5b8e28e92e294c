"""The split result the state machine receives stays small at any document size (issue 18 item 7):
the batch list inline only for the inline Map (≤ 40 batches); above, the manifest key and the counts,
and the Distributed Map reads the list from the manifest in S3."""

from __future__ import annotations

import json
from typing import Any

from ragchat.config import load_settings
from ragchat.domain.models import DocumentStatus, SearchFilter
from ragchat.services.ingest_pipeline import INLINE_MAX_BATCHES, run_step
from ragchat.services.ingestion import IngestionService, IngestSteps

from tests.fakes import (
    FakeBlobStore,
    FakeClock,
    FakeDocumentStore,
    FakeEmbedder,
    FakeLauncher,
    FakeVectorIndex,
)

OWNER = "alice"
PAYLOAD_LIMIT = 256 * 1024  # Step Functions: a state's input, output or task result


class World:
    def __init__(self) -> None:
        self.settings = load_settings({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})
        self.clock = FakeClock()
        self.docs = FakeDocumentStore(clock=self.clock)
        self.blobs = FakeBlobStore()
        self.embedder = FakeEmbedder()
        self.index = FakeVectorIndex(dimension=self.embedder.dimension)
        # one chunk per batch: as many batches as a ~160,000-chunk document at the real batch size
        self.steps = IngestSteps(
            self.docs, self.blobs, self.embedder, self.index, self.settings, clock=self.clock, batch_size=1
        )
        launcher = FakeLauncher(run=None)
        self.service = IngestionService(self.docs, self.blobs, launcher, self.settings, clock=self.clock)

    def step(self, event: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """One state machine task through the Lambda's dispatcher: its result and the bytes of
        event and result as Step Functions counts them (UTF-8 JSON), whichever is larger."""
        result = run_step(self.steps, event)
        size = max(len(json.dumps(event).encode()), len(json.dumps(result).encode()))
        return result, size


def _words(n: int) -> str:
    return " ".join(f"w{i:06d}" for i in range(n))  # ~12 words per 100-character chunk


def test_2500_batches_give_a_split_result_of_the_manifest_key_and_counts_and_end_ready() -> None:
    w = World()
    doc = w.service.submit(OWNER, text=_words(36_000), title="Huge")
    base = {"owner": OWNER, "documentId": doc.id, "version": doc.version}

    split, split_size = w.step({**base, "step": "split"})
    assert split["batchCount"] >= 2_500 and split["chunkCount"] == split["batchCount"]
    assert "batches" not in split  # only the manifest key and the counts
    assert split_size < 1_000
    manifest = json.loads(w.blobs.get(split["manifestKey"]))
    assert len(manifest) == split["batchCount"]

    largest = split_size
    for item in manifest:  # what the Distributed Map's ItemReader feeds each child execution
        result, size = w.step({**base, "step": "embed_index", "key": item["key"]})
        assert result["indexed"] == 1
        largest = max(largest, size)
    cursor, steps = "", 0  # finalize in bounded steps, as the state machine loops it (FinalizeDone)
    while True:
        final, size = w.step(
            {**base, "step": "finalize", "chunkCount": split["chunkCount"], "cursor": cursor}
        )
        largest, steps, cursor = max(largest, size), steps + 1, final["cursor"]
        if final["finished"]:
            break

    assert final == {"status": "READY", "chunkCount": split["chunkCount"], "finished": True, "cursor": ""}
    assert steps >= 2 * split["chunkCount"] / 1000  # FINALIZE_STEP_CHUNKS: switch on, then swap
    stored = w.docs.get_document(OWNER, doc.id)
    assert stored is not None and stored.status == DocumentStatus.READY
    assert w.index.count(OWNER) == split["chunkCount"]
    assert largest < 2_000 < PAYLOAD_LIMIT


def test_up_to_40_batches_the_list_comes_inline_and_matches_the_manifest() -> None:
    w = World()
    doc = w.service.submit(OWNER, text=_words(10 * INLINE_MAX_BATCHES), title="Small")
    split, _ = w.step({"owner": OWNER, "documentId": doc.id, "version": doc.version, "step": "split"})
    assert 1 < split["batchCount"] <= INLINE_MAX_BATCHES
    assert split["batches"] == json.loads(w.blobs.get(split["manifestKey"]))
    for item in split["batches"]:
        w.step({"owner": OWNER, "documentId": doc.id, "version": doc.version, "step": "embed_index", **item})
    w.step({"owner": OWNER, "documentId": doc.id, "version": doc.version, "step": "finalize",
            "chunkCount": split["chunkCount"]})  # fmt: skip
    hits = w.index.search(w.embedder.embed_query("w000001"), SearchFilter(owner=OWNER), 100)
    assert len(hits) == split["chunkCount"]


def test_the_state_machine_inlines_exactly_up_to_the_same_bound() -> None:
    from pathlib import Path

    definition = json.loads((Path(__file__).parents[2] / "statemachine" / "ingest.asl.json").read_text())
    (choice,) = definition["States"]["HowManyBatches"]["Choices"]
    assert choice["Variable"] == "$.split.batchCount"
    assert choice["NumericGreaterThan"] == INLINE_MAX_BATCHES
    assert choice["Next"] == "EmbedIndexDistributed"
    assert definition["States"]["EmbedIndexInline"]["ItemsPath"] == "$.split.batches"


def test_the_split_does_not_hold_the_body_while_it_chunks_the_text(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Memory (issue 18 item 8): the body is released once its text is extracted — for a 500 MiB
    text upload that is 500 MB less at the split's peak."""
    import sys

    import ragchat.domain.splitting as splitting

    w = World()
    doc = w.service.submit(OWNER, text=_words(2_000), title="Body")
    body = w.blobs.get(doc.body_key)
    held = bytes(bytearray(body))  # an object only this test and the store refer to
    w.blobs.put(doc.body_key, held)
    baseline = sys.getrefcount(held)
    seen: list[int] = []
    original = splitting.split_pages

    def split_pages(*args: Any, **kwargs: Any) -> Any:
        seen.append(sys.getrefcount(held))
        return original(*args, **kwargs)

    monkeypatch.setattr(splitting, "split_pages", split_pages)
    w.step({"owner": OWNER, "documentId": doc.id, "version": doc.version, "step": "split"})
    assert seen == [baseline]  # nothing in the split step still refers to the body
