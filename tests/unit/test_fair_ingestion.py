"""Local ingestion is fair (issue 8): a short note is READY while a big document is still being
embedded, and deleting a document stops its ingestion and leaves nothing of it behind.

Rounds are driven by hand (``SlicedRunner``) or, for the background worker, by an embedder that
only answers when the test lets it: no wall-clock sleeps, no timed assertions."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence

import pytest
from ragchat.adapters.local.pipeline import InlineIngestionLauncher
from ragchat.config import load_settings
from ragchat.domain.content_types import PDF
from ragchat.domain.errors import ValidationError
from ragchat.domain.models import DocumentStatus
from ragchat.domain.parsing import InProcessParser, Parsed, ParseJob, reads_apart
from ragchat.services.documents import DocumentService
from ragchat.services.ingest_lane import ReadingLane
from ragchat.services.ingest_runner import SlicedRunner
from ragchat.services.ingestion import IngestionService, IngestSteps

from tests.fakes import FakeBlobStore, FakeDocumentStore, FakeEmbedder, FakeLauncher, FakeVectorIndex
from tests.pdfs import make_pdf

OWNER = "alice"
WAIT = 10.0  # upper bound for waiting on the worker; never reached when things work
NOTE = "Ferns reproduce with spores rather than seeds."


def big_text(chunks: int) -> str:
    """About ``chunks`` chunks of 100 characters (one paragraph each)."""
    return "\n\n".join(
        f"Paragraph {i} of the big manual talks about topic {i} at some length." for i in range(chunks)
    )


class GatedEmbedder(FakeEmbedder):
    """Each ``embed_documents`` call announces itself on ``entered`` and waits for a permit."""

    def __init__(self) -> None:
        super().__init__()
        self.entered: queue.Queue[int] = queue.Queue()
        self.permits = threading.Semaphore(0)
        self.texts: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.append(list(texts))
        self.entered.put(len(texts))
        assert self.permits.acquire(timeout=WAIT)
        return super().embed_documents(texts)


class World:
    def __init__(self, embedder: FakeEmbedder | None = None) -> None:
        self.settings = load_settings({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})
        self.docs = FakeDocumentStore()
        self.blobs = FakeBlobStore()
        self.embedder = embedder or FakeEmbedder()
        self.index = FakeVectorIndex(dimension=self.embedder.dimension)
        self.steps = IngestSteps(
            self.docs, self.blobs, self.embedder, self.index, self.settings, batch_size=4
        )
        self.ingestion = IngestionService(self.docs, self.blobs, FakeLauncher(), self.settings)
        self.documents = DocumentService(self.docs, self.index, self.blobs)

    def status(self, doc_id: str) -> DocumentStatus | None:
        doc = self.docs.get_document(OWNER, doc_id)
        return None if doc is None else doc.status

    def notes(self, doc_id: str) -> int:
        return len(self.docs.list_notes(OWNER, document_id=doc_id, limit=1000).items)


# ------------------------------------------------------------------------------ rounds by hand
def test_a_short_note_is_ready_in_the_round_after_it_arrives_while_a_big_document_continues() -> None:
    w = World()
    big = w.ingestion.submit(OWNER, body=big_text(200)).id
    runner = SlicedRunner(coalesce_texts=8)
    runner.add([(OWNER, big)])
    for _ in range(3):
        assert runner.round(w.steps) == []
    note = w.ingestion.submit(OWNER, body=NOTE).id
    runner.add([(OWNER, note)])
    before = w.notes(big)

    assert runner.round(w.steps) == [(OWNER, note)]  # a round of its own
    assert w.status(note) == DocumentStatus.READY
    assert w.status(big) == DocumentStatus.PROCESSING
    assert w.notes(big) == before < 40  # most of the big document is still to come

    rounds = 0
    while runner.active():
        runner.round(w.steps)
        rounds += 1
    doc = w.docs.get_document(OWNER, big)
    assert doc is not None and doc.status == DocumentStatus.READY and doc.chunk_count == w.notes(big) >= 200
    assert rounds > 10  # the big one was sliced, not run in one go


def test_a_note_arriving_while_a_big_document_is_split_goes_before_any_of_its_batches() -> None:
    w = World()
    big = w.ingestion.submit(OWNER, body=big_text(200)).id
    runner = SlicedRunner(coalesce_texts=8)
    runner.add([(OWNER, big)])
    note = w.ingestion.submit(OWNER, body=NOTE).id  # arrives while the big one is being split
    assert runner.round(w.steps, arrived=lambda: True) == []
    assert w.embedder.document_calls == 0  # the round ended after the split
    runner.add([(OWNER, note)])
    assert runner.round(w.steps, arrived=lambda: True) == [(OWNER, note)]  # not cut short twice
    assert w.notes(big) == 0 and w.status(note) == DocumentStatus.READY


def test_documents_take_turns_round_by_round() -> None:
    w = World()
    # two documents of other bytes (the same bytes twice would be one document: issue 45)
    first, second = (w.ingestion.submit(OWNER, body=f"Copy {n}.\n\n" + big_text(80)).id for n in range(2))
    runner = SlicedRunner(coalesce_texts=4)  # one batch per round
    runner.add([(OWNER, first), (OWNER, second)])
    runner.round(w.steps)  # both split; the first takes a batch
    runner.round(w.steps)  # the second's turn
    assert w.notes(first) == w.notes(second) == 4


def test_a_stream_of_new_notes_does_not_starve_a_big_document() -> None:
    w = World()
    big = w.ingestion.submit(OWNER, body=big_text(200)).id
    runner = SlicedRunner(coalesce_texts=8)
    runner.add([(OWNER, big)])
    runner.round(w.steps)
    progress = [w.notes(big)]
    for i in range(10):  # a new note arrives before every round
        runner.add([(OWNER, w.ingestion.submit(OWNER, body=f"Note {i} about ferns.").id)])
        runner.round(w.steps)
        progress.append(w.notes(big))
    assert progress[-1] - progress[0] >= 5 * 8  # every other round still went to the big one


def test_deleting_a_document_stops_its_ingestion_and_leaves_nothing() -> None:
    w = World()
    big = w.ingestion.submit(OWNER, body=big_text(200)).id
    runner = SlicedRunner(coalesce_texts=8)
    runner.add([(OWNER, big)])
    runner.round(w.steps)
    runner.round(w.steps)
    assert w.notes(big) > 0
    calls = w.embedder.document_calls

    w.documents.delete(OWNER, big)
    assert runner.round(w.steps) == [(OWNER, big)]  # the queue is free again
    assert not runner.active()
    assert w.embedder.document_calls == calls  # nothing more embedded for it
    assert w.notes(big) == 0 and w.index.count(OWNER) == 0
    assert w.blobs.keys("work/") == []


def test_a_document_deleted_before_its_turn_is_dropped_quietly() -> None:
    w = World()
    doc = w.ingestion.submit(OWNER, body=NOTE).id
    w.documents.delete(OWNER, doc)
    runner = SlicedRunner()
    runner.add([(OWNER, doc)])
    assert runner.round(w.steps) == [(OWNER, doc)]
    assert w.docs.get_document(OWNER, doc) is None and w.embedder.document_calls == 0


# ------------------------------------------------------------------------------ the background worker
@pytest.fixture
def gated() -> Iterator[tuple[World, GatedEmbedder, InlineIngestionLauncher, IngestionService]]:
    embedder = GatedEmbedder()
    w = World(embedder)
    launcher = InlineIngestionLauncher(lambda: w.steps, runner=SlicedRunner(coalesce_texts=8))
    service = IngestionService(w.docs, w.blobs, launcher, w.settings)
    yield w, embedder, launcher, service
    launcher.close(timeout=0)
    for _ in range(1000):  # let a worker blocked in the embedder run out
        embedder.permits.release()


def test_the_worker_makes_a_short_note_ready_while_a_big_document_is_processing(
    gated: tuple[World, GatedEmbedder, InlineIngestionLauncher, IngestionService],
) -> None:
    w, embedder, launcher, service = gated
    big = service.submit(OWNER, body=big_text(400)).id
    assert embedder.entered.get(timeout=WAIT)  # the worker is embedding the big document
    note = service.submit(OWNER, body=NOTE).id

    calls = 1
    while w.status(note) != DocumentStatus.READY:
        embedder.permits.release()
        assert embedder.entered.get(timeout=WAIT)
        calls += 1
        assert calls <= 3, "the note waited behind the big document"
    assert any(NOTE in text for texts in embedder.texts for text in texts)
    assert w.status(big) == DocumentStatus.PROCESSING

    for _ in range(1000):
        embedder.permits.release()
    assert launcher.wait_idle(WAIT)
    assert w.status(big) == DocumentStatus.READY


def test_deleting_a_document_frees_the_worker(
    gated: tuple[World, GatedEmbedder, InlineIngestionLauncher, IngestionService],
) -> None:
    w, embedder, launcher, service = gated
    big = service.submit(OWNER, body=big_text(400)).id
    assert embedder.entered.get(timeout=WAIT)
    w.documents.delete(OWNER, big)  # while its batch is being embedded
    note = service.submit(OWNER, body=NOTE).id

    embedder.permits.release()  # the big document's last slice
    assert embedder.entered.get(timeout=WAIT)  # the next call is the note's alone
    assert embedder.texts[-1] == [NOTE]
    embedder.permits.release()
    assert launcher.wait_idle(WAIT)
    assert w.status(note) == DocumentStatus.READY
    assert w.docs.get_document(OWNER, big) is None
    assert w.notes(big) == 0 and {r.document_id for r in w.index.records.values()} == {note}
    assert len(embedder.texts) == 2


# ------------------------------------------------------------------------------ between owners
ALICE, BOB = "alice", "bob"


class Timed:
    """The steps' split and finalize seen through a fake clock: a split of ``slow`` owner's document
    takes ``cost`` seconds (a PDF that expands to thousands of chunks); finalize records when each
    document became READY."""

    def __init__(self, w: World, slow: str, cost: float) -> None:
        self.now = 0.0
        self.ready_at: dict[str, float] = {}
        split, finalize = w.steps.split, w.steps.finalize

        def timed_split(owner: str, document_id: str, version: str | None = None) -> dict[str, object]:
            if owner == slow:
                self.now += cost
            return split(owner, document_id, version)

        def timed_finalize(owner: str, document_id: str, *args: object, **kwargs: object) -> object:
            result = finalize(owner, document_id, *args, **kwargs)  # type: ignore[arg-type]
            self.ready_at[document_id] = self.now
            return result

        w.steps.split = timed_split  # type: ignore[method-assign]
        w.steps.finalize = timed_finalize  # type: ignore[method-assign,assignment]

    def __call__(self) -> float:
        return self.now


def _html(chunks: int) -> str:
    return "<html><body>" + "".join(f"<p>{p}</p>" for p in big_text(chunks).split("\n\n")) + "</body></html>"


def test_rounds_by_hand_read_one_owners_slow_uploads_after_another_owners_note() -> None:
    """Issue 43: three small PDFs from one user, each expanding to thousands of chunks, held another
    user's one-line note back 178 s (their splits ran first, in order of arrival). Without a reading
    lane (rounds run by hand) a round reads one of them after its embedding."""
    w = World()
    clock = Timed(w, slow=ALICE, cost=50.0)
    heavy = [w.ingestion.submit(ALICE, body=_html(120), content_type="text/html").id for _ in range(3)]
    note = w.ingestion.submit(BOB, body=NOTE).id  # arrives last
    runner = SlicedRunner(coalesce_texts=8, clock=clock)
    runner.add([(ALICE, d) for d in heavy] + [(BOB, note)])
    assert (BOB, note) in runner.round(w.steps)
    assert clock.ready_at[note] < 5  # before any of alice's 50 s splits
    bob_doc = w.docs.get_document(BOB, note)
    assert bob_doc is not None and bob_doc.status == DocumentStatus.READY
    statuses = {w.docs.get_document(ALICE, d).status for d in heavy}  # type: ignore[union-attr]
    assert statuses <= {DocumentStatus.PENDING, DocumentStatus.PROCESSING}
    while runner.active():
        runner.round(w.steps)
    assert {w.docs.get_document(ALICE, d).status for d in heavy} == {DocumentStatus.READY}  # type: ignore[union-attr]


class GatedParser(InProcessParser):
    """Reads text at once; a PDF (any type read apart) only once the test opens ``gate``: it says
    so on ``reading`` first, and sets ``read`` when its reading has ended."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.reading = threading.Event()
        self.read = threading.Event()

    def parse(self, body: Callable[[], bytes], job: ParseJob) -> Parsed:
        data = body()
        if not reads_apart(job.content_type, len(data)):
            return super().parse(lambda: data, job)
        self.reading.set()
        try:
            self.gate.wait(WAIT)  # (on the old worker: the round waits here, the note behind it)
            return super().parse(lambda: data, job)
        finally:
            self.read.set()


class Gated(World):
    """A world whose PDFs are read only when the test says so; ``ready`` is set when bob's note is."""

    def __init__(self) -> None:
        super().__init__()
        self.parser = GatedParser()
        self.steps.parser = self.parser
        self.ready = threading.Event()
        finalize = self.steps.finalize

        def watched(owner: str, document_id: str, *args: object, **kwargs: object) -> object:
            result = finalize(owner, document_id, *args, **kwargs)  # type: ignore[arg-type]
            if owner == BOB:
                self.ready.set()
            return result

        self.steps.finalize = watched  # type: ignore[method-assign,assignment]

    def pdfs(self, owner: str, n: int) -> list[str]:
        pages = [[f"Manual {i}, page {p}: " + big_text(8) for p in range(3)] for i in range(n)]
        return [self.ingestion.submit(owner, body=make_pdf(p), content_type=PDF).id for p in pages]

    def status_of(self, owner: str, doc_id: str) -> DocumentStatus | None:
        doc = self.docs.get_document(owner, doc_id)
        return None if doc is None else doc.status


def test_another_owners_note_is_ready_while_a_pdf_is_being_read() -> None:
    """Issue 43: a PDF already being read held the worker, so another user's one-line note waited
    for the whole reading (29.5 s in the benchmark); the PDF is read on a lane of its own now."""
    w = Gated()
    heavy = w.pdfs(ALICE, 3)
    runner = SlicedRunner(coalesce_texts=8, lane=ReadingLane())
    runner.add([(ALICE, d) for d in heavy])
    runner.round(w.steps)  # the first PDF goes to the lane
    assert w.parser.reading.wait(WAIT)

    note = w.ingestion.submit(BOB, body=NOTE).id  # while alice's PDF is being read
    runner.add([(BOB, note)])
    assert (BOB, note) in runner.round(w.steps)
    assert w.status_of(BOB, note) == DocumentStatus.READY
    assert not w.parser.read.is_set()  # alice's PDF is still being read
    assert {w.status_of(ALICE, d) for d in heavy} <= {DocumentStatus.PENDING, DocumentStatus.PROCESSING}

    w.parser.gate.set()
    try:
        while runner.active():
            runner.round(w.steps)
            assert runner.wait(WAIT)
    finally:
        runner.close()
    assert {w.status_of(ALICE, d) for d in heavy} == {DocumentStatus.READY}


def test_another_owners_note_is_ready_while_a_large_text_is_being_read() -> None:
    """A text over a megabyte is read apart too (a 500 MiB one took tens of seconds to split)."""
    w = Gated()
    large = w.ingestion.submit(ALICE, body="A long manual line about ferns.\n" * 40_000).id  # 1.3 MB
    runner = SlicedRunner(coalesce_texts=8, lane=ReadingLane())
    try:
        runner.add([(ALICE, large)])
        runner.round(w.steps)
        assert w.parser.reading.wait(WAIT)
        note = w.ingestion.submit(BOB, body=NOTE).id
        runner.add([(BOB, note)])
        assert (BOB, note) in runner.round(w.steps)
        assert w.status_of(BOB, note) == DocumentStatus.READY
        assert not w.parser.read.is_set()
    finally:
        w.parser.gate.set()
        runner.close()


def test_the_worker_makes_another_owners_note_ready_while_a_pdf_is_being_read() -> None:
    w = Gated()
    runner = SlicedRunner(coalesce_texts=8, lane=ReadingLane())
    launcher = InlineIngestionLauncher(lambda: w.steps, runner=runner)
    service = IngestionService(w.docs, w.blobs, launcher, w.settings)
    try:
        w.ingestion = service
        heavy = w.pdfs(ALICE, 3)
        assert w.parser.reading.wait(WAIT)  # the worker has started reading alice's first PDF

        note = service.submit(BOB, body=NOTE).id
        assert w.ready.wait(WAIT), "bob's note waited for alice's PDF"
        assert w.status_of(BOB, note) == DocumentStatus.READY
        assert not w.parser.read.is_set()

        w.parser.gate.set()
        assert launcher.wait_idle(WAIT)
        assert {w.status_of(ALICE, d) for d in heavy} == {DocumentStatus.READY}
    finally:
        w.parser.gate.set()
        launcher.close(timeout=WAIT)


class Unreadable(InProcessParser):
    def parse(self, body: Callable[[], bytes], job: ParseJob) -> Parsed:
        if reads_apart(job.content_type, 0):
            raise ValidationError("Could not read PDF: its page tree is broken")
        return super().parse(body, job)


def test_a_pdf_that_cannot_be_read_on_the_lane_fails_on_its_own() -> None:
    w = Gated()
    w.steps.parser = Unreadable()
    (bad,) = w.pdfs(ALICE, 1)
    note = w.ingestion.submit(BOB, body=NOTE).id
    runner = SlicedRunner(lane=ReadingLane())
    runner.add([(ALICE, bad), (BOB, note)])
    try:
        while runner.active():
            runner.round(w.steps)
            assert runner.wait(WAIT)
    finally:
        runner.close()
    doc = w.docs.get_document(ALICE, bad)
    assert doc is not None and doc.status == DocumentStatus.FAILED
    assert "its page tree is broken" in str(doc.error)
    assert w.status_of(BOB, note) == DocumentStatus.READY


def test_an_owner_with_three_big_documents_gets_the_share_of_one() -> None:
    w = World()
    mine = [w.ingestion.submit(ALICE, body=big_text(120 + i)).id for i in range(3)]
    theirs = w.ingestion.submit(BOB, body=big_text(121)).id
    runner = SlicedRunner(coalesce_texts=8)  # two batches of 4 per round
    runner.add([(ALICE, d) for d in mine] + [(BOB, theirs)])
    for _ in range(6):
        runner.round(w.steps)

    def stored(owner: str, doc: str) -> int:
        return len(w.docs.list_notes(owner, document_id=doc, limit=1000).items)

    alice = sum(stored(ALICE, d) for d in mine)
    bob = stored(BOB, theirs)
    assert bob >= 16 and abs(alice - bob) <= 8, (alice, bob)  # half each (was a quarter for bob)
