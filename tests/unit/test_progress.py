"""Issue 45 item 5: an indexing document says how far it has got (chunks done / total) and about
how long it will still take, in ``GET /documents/{id}`` and ``GET /documents``, while it is being
ingested. The embedder here is slow on an injected clock: each call takes 3 s of the test's time."""

from __future__ import annotations

from typing import Any

from ragchat.domain.models import Document, DocumentStatus
from ragchat.domain.progress import describe, duration, progress_of

from tests.events import json_body
from tests.fakes import FakeClock, FakeEmbedder
from tests.unit.api_support import make_api

SECONDS_PER_BATCH = 3.0


class SlowEmbedder(FakeEmbedder):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__(dimension=64)
        self.clock = clock

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.clock.advance(SECONDS_PER_BATCH)
        return super().embed_documents(texts)


def test_the_api_shows_progress_and_an_estimate_mid_ingestion() -> None:
    slow = SlowEmbedder(FakeClock())
    api = make_api({"CHUNK_SIZE": "200", "CHUNK_OVERLAP": "20"}, run_pipeline=False, embedder=slow)
    slow.clock = api.clock  # the embedder's calls take the test's time
    text = "\n\n".join(
        f"Paragraph {n} tells the tale of harbour number {n} and its lighthouse." for n in range(400)
    )
    doc_id = json_body(api.call("POST", "/notes", body={"text": text, "title": "Harbours"}))["documentId"]

    def progress() -> Any:
        return json_body(api.call("GET", f"/documents/{doc_id}"))["progress"]

    assert progress() == {
        "stage": "queued",
        "chunksDone": 0,
        "chunksTotal": None,
        "percent": None,
        "secondsLeft": None,
        "text": "waiting to be read",
    }
    steps = api.container.ingest_steps
    plan = steps.split("alice", doc_id)
    total, batches = plan["chunkCount"], plan["batches"]
    assert len(batches) >= 3
    assert progress()["text"] == f"0 / {total} chunks (0%)"

    first = steps.embed_index("alice", doc_id, batches[0]["key"], plan["version"])["indexed"]
    shown = progress()
    left = round(SECONDS_PER_BATCH * (total - first) / first + 0.4999)
    assert shown["chunksDone"] == first and shown["chunksTotal"] == total
    assert shown["percent"] == 100 * first // total
    assert shown["secondsLeft"] == left  # the pace so far: 3 s for the first batch
    listed = json_body(api.call("GET", "/documents"))["items"][0]
    assert listed["progress"] == shown  # the list says the same
    assert shown["text"] == f"{first} / {total} chunks ({100 * first // total}%), about {duration(left)} left"

    for batch in batches[1:]:
        steps.embed_index("alice", doc_id, batch["key"], plan["version"])
    steps.finalize("alice", doc_id, total, plan["version"])
    doc = json_body(api.call("GET", f"/documents/{doc_id}"))
    assert doc["status"] == "READY" and doc["progress"] is None and doc["chunkCount"] == total


def doc(**fields: Any) -> Document:
    base = Document(id="d", owner="o", title="t", content_type="text/plain", source="api", body_key="k")
    for name, value in fields.items():
        setattr(base, name, value)
    return base


def test_progress_never_passes_100_percent_and_reads_in_plain_words() -> None:
    since = "2026-01-01T00:00:00.000Z"
    start = 1_767_225_600.0
    half = progress_of(
        doc(status=DocumentStatus.PROCESSING, chunks_total=10, chunks_done=5, indexing_since=since),
        start + 120,
    )
    assert half is not None and (half.percent, half.seconds_left) == (50, 120)
    assert describe(half) == "5 / 10 chunks (50%), about 2 min left"
    retried = progress_of(
        doc(status=DocumentStatus.PROCESSING, chunks_total=10, chunks_done=12, indexing_since=since), start
    )
    assert retried is not None and (retried.done, retried.percent) == (10, 100)
    assert progress_of(doc(status=DocumentStatus.READY, chunks_total=10, chunks_done=10), start) is None
    assert [duration(s) for s in (0, 59, 61, 3600, 3900)] == ["1 s", "59 s", "2 min", "1 h", "1 h 5 min"]
