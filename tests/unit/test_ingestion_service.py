"""Ingestion: accepting documents (validation, storage, launch) and the pipeline steps."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from ragchat.adapters.local.pipeline import InlineIngestionLauncher
from ragchat.config import Settings, load_settings
from ragchat.domain.context import chunk_header, embedding_text
from ragchat.domain.errors import PayloadTooLarge, ValidationError
from ragchat.domain.ids import note_id, stable_document_id
from ragchat.domain.models import Document, DocumentStatus, SearchFilter
from ragchat.services.ingest_runner import SlicedRunner
from ragchat.services.ingestion import IngestionService, IngestSteps, human_error

from tests.fakes import (
    FakeBlobStore,
    FakeClock,
    FakeDocumentStore,
    FakeEmbedder,
    FakeLauncher,
    FakeVectorIndex,
    run_to_end,
)
from tests.pdfs import encrypted, make_pdf

OWNER = "alice"
TEXT = (
    "Photosynthesis converts light energy into chemical energy in plants.\n\n"
    "Mitochondria produce most of the cell's supply of adenosine triphosphate."
)


class World:
    """The ingestion service wired to fakes; ``launcher`` runs the pipeline synchronously."""

    def __init__(self, env: dict[str, str] | None = None, embedder: FakeEmbedder | None = None) -> None:
        self.settings: Settings = load_settings(env or {})
        self.clock = FakeClock()
        self.docs = FakeDocumentStore(clock=self.clock)
        self.blobs = FakeBlobStore()
        self.embedder = embedder or FakeEmbedder()
        self.index = FakeVectorIndex(dimension=self.embedder.dimension)
        self.steps = IngestSteps(
            self.docs, self.blobs, self.embedder, self.index, self.settings, clock=self.clock
        )
        self.launcher = FakeLauncher(run=lambda owner, doc_id: run_to_end(self.steps, [(owner, doc_id)]))
        self.service = IngestionService(self.docs, self.blobs, self.launcher, self.settings, clock=self.clock)

    def version_of(self, doc_id: str) -> str | None:
        doc = self.docs.get_document(OWNER, doc_id)
        return doc.version if doc is not None else None

    def notes_of(self, doc_id: str) -> list[str]:
        return [n.id for n in self.docs.list_notes(OWNER, document_id=doc_id, limit=1000).items]

    def searchable(self, text: str) -> list[str]:
        vec = self.embedder.vector_for(text)
        return [h.id for h in self.index.search(vec, SearchFilter(owner=OWNER), 100)]


class FailingEmbedder(FakeEmbedder):
    """Embeds the first ``ok_calls`` batches, then fails."""

    def __init__(self, ok_calls: int, error: Exception) -> None:
        super().__init__()
        self.ok_calls = ok_calls
        self.error = error

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.document_calls >= self.ok_calls:
            self.document_calls += 1
            raise self.error
        return super().embed_documents(texts)


def many_paragraphs(n: int) -> str:
    return "\n\n".join(f"Paragraph number {i} talks about topic {i} at some length." for i in range(n))


# ------------------------------------------------------------------------------ happy path
def test_document_goes_from_pending_to_ready_through_the_inline_pipeline() -> None:
    w = World()
    launcher = InlineIngestionLauncher(lambda: w.steps, runner=SlicedRunner())
    service = IngestionService(w.docs, w.blobs, launcher, w.settings, clock=w.clock)
    try:
        doc = service.submit(OWNER, body=TEXT, collection="biology")
        assert doc.status == DocumentStatus.PENDING
        assert doc.created_at  # the record as stored
        assert launcher.wait_idle(10)
    finally:
        launcher.close()

    stored = w.docs.get_document(OWNER, doc.id)
    assert stored is not None
    assert stored.status == DocumentStatus.READY
    assert stored.error is None
    assert stored.chunk_count == len(w.notes_of(doc.id)) >= 1
    assert w.blobs.get(stored.body_key) == TEXT.encode()
    assert w.blobs.keys("work/") == []  # work files cleaned up
    assert note_id(doc.id, 0, doc.version) in w.searchable("photosynthesis light energy")
    notes = w.docs.list_notes(OWNER, document_id=doc.id).items
    assert all(n.collection == "biology" for n in notes)


def test_submit_stores_the_body_then_the_pending_document_then_starts_the_pipeline() -> None:
    w = World()
    w.launcher.run = None  # record only
    doc = w.service.submit(OWNER, body=TEXT, filename="notes.md", metadata={"k": "v"})
    assert w.launcher.started == [(OWNER, doc.id)]
    stored = w.docs.get_document(OWNER, doc.id)
    assert stored is not None and stored.status == DocumentStatus.PENDING
    assert stored.content_type == "text/markdown"
    assert stored.title == "notes.md"
    assert stored.metadata == {"k": "v"}
    assert stored.body_key == f"documents/{OWNER}/{doc.id}/body.md"
    assert w.blobs.get(stored.body_key) == TEXT.encode()


def test_title_defaults_to_the_first_line() -> None:
    w = World()
    doc = w.service.submit(OWNER, text="\n  # My  heading \nbody text here")
    assert doc.title == "My heading"


def test_nothing_is_retrievable_before_finalize() -> None:
    w = World({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})
    w.launcher.run = None
    doc = w.service.submit(OWNER, body=many_paragraphs(80))
    plan = w.steps.split(OWNER, doc.id)
    assert plan["batchCount"] == 2 and plan["chunkCount"] == 80
    assert json.loads(w.blobs.get(plan["manifestKey"])) == plan["batches"]
    assert w.docs.get_document(OWNER, doc.id).status == DocumentStatus.PROCESSING  # type: ignore[union-attr]
    for item in plan["batches"]:
        w.steps.embed_index(OWNER, doc.id, item["key"])

    assert len(w.notes_of(doc.id)) == 80
    assert w.index.count(OWNER) == 0
    assert w.searchable("paragraph number 3 topic") == []

    assert w.steps.finalize(OWNER, doc.id, plan["chunkCount"]) == {"status": "READY", "chunkCount": 80}
    assert w.index.count(OWNER) == 80
    assert note_id(doc.id, 3, doc.version) in w.searchable("paragraph number 3 topic 3")


# ------------------------------------------------------------------------------ failures
def accepted_then_corrupted(w: World, corrupt: bytes) -> Document:
    run, w.launcher.run = w.launcher.run, None
    doc = w.service.submit(OWNER, body=make_pdf(["A page of text."]), filename="broken.pdf")
    w.launcher.run = run
    w.blobs.put(doc.body_key, corrupt, content_type="application/pdf")
    return doc


def test_corrupt_pdf_fails_with_a_readable_error_and_leaves_nothing() -> None:
    # A PDF over the inline check's size is only read by the pipeline; here one that was readable
    # when accepted and is corrupt when the pipeline reads it takes the same path.
    w = World()
    doc = accepted_then_corrupted(w, b"%PDF-1.7\nthis is not really a pdf")
    run_to_end(w.steps, [(OWNER, doc.id)])
    stored = w.docs.get_document(OWNER, doc.id)
    assert stored is not None
    assert stored.status == DocumentStatus.FAILED
    assert stored.error and "PDF" in stored.error
    assert "Traceback" not in stored.error
    assert w.notes_of(doc.id) == []
    assert w.index.records == {}
    assert w.blobs.keys("work/") == []


def test_embedder_failure_midway_marks_failed_and_removes_the_indexed_part() -> None:
    w = World(
        {"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"},
        embedder=FailingEmbedder(ok_calls=1, error=RuntimeError("embedding service unavailable")),
    )
    # more chunks than one embedder call takes (256): the first call's batches are stored, then it fails
    doc = w.service.submit(OWNER, body=many_paragraphs(400))
    stored = w.docs.get_document(OWNER, doc.id)
    assert stored is not None
    assert stored.status == DocumentStatus.FAILED
    assert stored.error is not None and "embedding service unavailable" in stored.error
    assert stored.chunk_count == 0
    assert w.notes_of(doc.id) == []  # the first batch's notes are gone again
    assert w.index.records == {}
    assert w.blobs.keys("work/") == []
    # the body is kept: nothing the user sent is lost
    assert w.blobs.get(stored.body_key)


def test_step_functions_error_cause_becomes_a_readable_message() -> None:
    w = World()
    w.launcher.run = None
    doc = w.service.submit(OWNER, body=TEXT)
    cause = json.dumps({"errorMessage": "Task timed out after 900.00 seconds", "errorType": "TimeoutError"})
    assert w.steps.fail(OWNER, doc.id, cause)["status"] == "FAILED"
    stored = w.docs.get_document(OWNER, doc.id)
    assert stored is not None and stored.error == "Task timed out after 900.00 seconds"
    assert human_error("") == "Ingestion failed"


def test_launcher_failure_marks_the_document_failed() -> None:
    w = World()

    def boom(owner: str, doc_id: str) -> None:
        raise RuntimeError("state machine unavailable")

    w.launcher.run = boom
    with pytest.raises(RuntimeError):
        w.service.submit(OWNER, body=TEXT)
    [doc] = w.docs.docs.values()
    assert doc.status == DocumentStatus.FAILED
    assert doc.error and "state machine unavailable" in doc.error


# ------------------------------------------------------------------------------ re-run / replace
def test_rerun_overwrites_instead_of_duplicating() -> None:
    w = World()
    doc = w.service.submit(OWNER, body=TEXT)
    first = sorted(w.notes_of(doc.id))
    run_to_end(w.steps, [(OWNER, doc.id)])
    assert sorted(w.notes_of(doc.id)) == first
    assert sorted(w.index.records) == first


def test_replacing_a_document_by_id_removes_the_old_chunks() -> None:
    w = World({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})
    doc_id = stable_document_id("uploads/alice/report.txt")
    w.service.submit(OWNER, body=many_paragraphs(10), document_id=doc_id, source="s3://b/uploads/r.txt")
    assert len(w.notes_of(doc_id)) == 10
    doc = w.service.submit(OWNER, body="A much shorter replacement.", document_id=doc_id)
    assert doc.id == doc_id
    assert w.notes_of(doc_id) == [note_id(doc_id, 0, w.version_of(doc_id))]
    assert list(w.index.records) == [note_id(doc_id, 0, w.version_of(doc_id))]
    assert w.index.records[note_id(doc_id, 0, w.version_of(doc_id))].text == "A much shorter replacement."
    assert len(w.docs.docs) == 1


def test_without_splitting_a_text_is_one_chunk() -> None:
    w = World({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})
    doc = w.service.submit(OWNER, body=many_paragraphs(10), split=False)
    assert len(w.notes_of(doc.id)) == 1
    w2 = World({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0", "ENABLE_TEXT_SPLITTING": "false"})
    doc2 = w2.service.submit(OWNER, body=many_paragraphs(10))
    assert len(w2.notes_of(doc2.id)) == 1


# ------------------------------------------------------------------------------ validation
def test_body_size_limit_uses_the_1_2_safety_factor() -> None:
    w = World({"MAX_BODY_BYTES": "1200"})
    w.launcher.run = None
    w.service.submit(OWNER, body="x" * 1000)  # 1000 * 1.2 == 1200: accepted
    with pytest.raises(PayloadTooLarge) as exc:
        w.service.submit(OWNER, body="x" * 1001)
    assert exc.value.status == 413
    assert len(w.docs.docs) == 1 and len(w.blobs.objects) == 1  # the rejected one left nothing


def test_a_pdf_over_its_own_limit_is_refused_with_413_and_leaves_nothing() -> None:
    pdf = make_pdf(["A page about photosynthesis."] * 3)
    w = World({"MAX_PDF_BYTES": str(len(pdf) - 1)})
    w.launcher.run = None
    with pytest.raises(PayloadTooLarge) as exc:
        w.service.submit(OWNER, body=pdf, filename="book.pdf")
    assert exc.value.status == 413 and "MAX_PDF_BYTES" in exc.value.message
    assert not w.docs.docs and not w.blobs.objects
    ok = World({"MAX_PDF_BYTES": str(len(pdf))})
    ok.launcher.run = None
    ok.service.submit(OWNER, body=pdf, filename="book.pdf")  # at the limit: accepted
    assert len(ok.docs.docs) == 1


@pytest.mark.parametrize("body", ["", "   \n\t  "])
def test_blank_text_is_rejected(body: str) -> None:
    w = World()
    with pytest.raises(ValidationError) as exc:
        w.service.submit(OWNER, body=body)
    assert exc.value.status == 400
    assert w.docs.docs == {} and w.blobs.objects == {} and w.launcher.started == []


def test_title_longer_than_1000_characters_is_rejected() -> None:
    w = World()
    with pytest.raises(ValidationError, match="title"):
        w.service.submit(OWNER, body=TEXT, title="t" * 1001)
    assert w.docs.docs == {}
    doc = w.service.submit(OWNER, body=TEXT, title="t" * 1000)
    assert len(doc.title) == 1000


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"collection": "../etc"}, "collection"),
        ({"content_type": "image/gif"}, r"^This picture format is not read: OCR reads \.png"),
        ({"content_type": "image/png"}, r"^OCR \(reading pictures and scanned pages\) is off"),
        (
            {"content_type": "application/zip"},
            r"This file type is not supported \(application/zip\): add \.txt",
        ),
        ({"document_id": "bad id with spaces"}, "document id"),
    ],
)
def test_invalid_fields_are_rejected(kwargs: dict[str, object], match: str) -> None:
    w = World()
    with pytest.raises(ValidationError, match=match):
        w.service.submit(OWNER, body=TEXT, **kwargs)  # type: ignore[arg-type]
    assert w.docs.docs == {}


# ------------------------------------------------------------------------------ coalesced runs
class PoisonEmbedder(FakeEmbedder):
    """Fails any call that includes a text containing ``poison``."""

    def __init__(self, poison: str) -> None:
        super().__init__()
        self.poison = poison

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if any(self.poison in t for t in texts):
            self.document_calls += 1
            raise RuntimeError("the embedder rejected a text")
        return super().embed_documents(texts)


def submitted(w: World, bodies: list[str]) -> list[str]:
    w.launcher.run = None  # accept only; the test runs the pipeline
    return [w.service.submit(OWNER, body=b).id for b in bodies]


def test_run_many_embeds_several_documents_together_with_the_same_outcome_as_run() -> None:
    env = {"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"}
    bodies = [many_paragraphs(3), TEXT, many_paragraphs(70), "One short note about ferns."]
    one_by_one, together = World(env), World(env)
    ids = submitted(one_by_one, bodies)
    for doc_id in ids:
        run_to_end(one_by_one.steps, [(OWNER, doc_id)])
    ids2 = submitted(together, bodies)
    run_to_end(together.steps, [(OWNER, d) for d in ids2])

    assert together.embedder.document_calls < one_by_one.embedder.document_calls
    for a, b in zip(ids, ids2, strict=True):
        doc_a, doc_b = one_by_one.docs.get_document(OWNER, a), together.docs.get_document(OWNER, b)
        assert doc_a is not None and doc_b is not None
        assert doc_b.status == doc_a.status == DocumentStatus.READY
        assert doc_b.chunk_count == doc_a.chunk_count
        texts_a = [n.text for n in one_by_one.docs.list_notes(OWNER, document_id=a, limit=1000).items]
        texts_b = [n.text for n in together.docs.list_notes(OWNER, document_id=b, limit=1000).items]
        assert texts_b == texts_a
        for i, text in enumerate(texts_b):  # each vector belongs to its own chunk (header + text)
            embedded = embedding_text(chunk_header(doc_b.title, text=text), text)
            vector = together.index.records[note_id(b, i, together.version_of(b))].vector
            assert vector == together.embedder.vector_for(embedded)
            assert vector == one_by_one.index.records[note_id(a, i, one_by_one.version_of(a))].vector
    total = sum(one_by_one.docs.get_document(OWNER, d).chunk_count for d in ids)  # type: ignore[union-attr]
    assert together.index.count(OWNER) == one_by_one.index.count(OWNER) == total > len(bodies)
    assert together.blobs.keys("work/") == []


def test_run_many_fails_only_the_document_that_fails() -> None:
    w = World(embedder=PoisonEmbedder("poison"))
    w.launcher.run = None
    good1 = w.service.submit(OWNER, body=TEXT).id
    broken_pdf = accepted_then_corrupted(w, b"%PDF-1.7\nnot a pdf").id
    poisoned = w.service.submit(OWNER, body="This one carries poison for the embedder.").id
    good2 = w.service.submit(OWNER, body="Ferns reproduce with spores.").id
    run_to_end(w.steps, [(OWNER, d) for d in (good1, broken_pdf, poisoned, good2)])

    status = {d: w.docs.get_document(OWNER, d).status for d in (good1, broken_pdf, poisoned, good2)}  # type: ignore[union-attr]
    assert status == {
        good1: DocumentStatus.READY,
        broken_pdf: DocumentStatus.FAILED,
        poisoned: DocumentStatus.FAILED,
        good2: DocumentStatus.READY,
    }
    failed = w.docs.get_document(OWNER, poisoned)
    assert failed is not None and failed.error and "the embedder rejected a text" in failed.error
    assert w.notes_of(poisoned) == [] and w.notes_of(broken_pdf) == []
    assert {r.document_id for r in w.index.records.values()} == {good1, good2}
    assert note_id(good2, 0, w.version_of(good2)) in w.searchable("ferns reproduce with spores")
    assert w.blobs.keys("work/") == []


def test_the_inline_launcher_embeds_queued_documents_together() -> None:
    w = World()
    launcher = InlineIngestionLauncher(
        lambda: w.steps, runner=SlicedRunner(max_new_per_round=3), max_documents_per_run=3
    )
    service = IngestionService(w.docs, w.blobs, launcher, w.settings, clock=w.clock)
    with launcher._cond:  # hold the worker back until everything is queued
        ids = [service.submit(OWNER, body=f"Note number {i} about topic {i}.").id for i in range(7)]
    try:
        assert launcher.wait_idle(10)
    finally:
        launcher.close()
    assert all(w.docs.get_document(OWNER, d).status == DocumentStatus.READY for d in ids)  # type: ignore[union-attr]
    assert w.embedder.document_calls == 3  # split three per round: one embedder call per round


# ------------------------------------------------------------------------------ bad input on submit
@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"%PDF-1.7\nthis is not really a pdf", "Could not read PDF"),
        (encrypted(make_pdf(["secret"]), "pw"), "password-protected"),
        (make_pdf(["", ""]), "no extractable text"),
    ],
)
def test_an_unreadable_pdf_is_refused_before_anything_is_stored(body: bytes, problem: str) -> None:
    w = World()
    with pytest.raises(ValidationError, match=problem) as info:
        w.service.submit(OWNER, body=body, filename="report.pdf")
    assert info.value.status == 400
    assert w.launcher.started == []
    assert w.blobs.keys("") == []
    assert w.docs.list_documents(OWNER).items == []


def test_a_readable_pdf_is_accepted_and_ingested() -> None:
    w = World()
    doc = w.service.submit(OWNER, body=make_pdf(["Aspirin lowers fever."]), filename="drugs.pdf")
    stored = w.docs.get_document(OWNER, doc.id)
    assert stored is not None and stored.status == DocumentStatus.READY and stored.chunk_count == 1


def test_titles_lose_control_characters() -> None:
    w = World()
    doc = w.service.submit(OWNER, body=TEXT, title="Line one\r\nline\ttwo\x00\x1b[31m")
    assert doc.title == "Line one line two[31m"
    derived = w.service.submit(OWNER, body="\x1b\x07Heading with a bell\n\nBody text.")
    assert derived.title == "Heading with a bell"
    other = "A second note.\n\n" + TEXT  # the same text again would be the first document (issue 45)
    only_controls = w.service.submit(OWNER, body=other, title="\x00\x01\n")  # as if none was given
    assert only_controls.title == "A second note."


@pytest.mark.parametrize("split", ["yes", "true", 1, 0, "false"])
def test_split_must_be_a_boolean(split: object) -> None:
    w = World()
    with pytest.raises(ValidationError, match="split must be a boolean"):
        w.service.submit(OWNER, body=TEXT, split=split)  # type: ignore[arg-type]
    assert w.docs.list_documents(OWNER).items == []
