"""Evidence vectors precomputed after ingestion: once a document is warmed, a question embeds only
itself (its decision's passages and its answer's sentences are read by chunk), the answers are the
same as without them, the vectors go with their chunk and document, and warming yields to uploads."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from ragchat.adapters.local.pipeline import InlineIngestionLauncher
from ragchat.adapters.local.sqlite_store import SqliteDatabase
from ragchat.adapters.local.sqlite_store.evidence import SqliteEvidenceStore, decode, encode
from ragchat.adapters.local.vector_index import LocalVectorIndex
from ragchat.bootstrap import Container
from ragchat.cli.serve import warm_unwarmed
from ragchat.config import load_settings
from ragchat.domain import answerability
from ragchat.domain.models import Document, DocumentStatus, VectorRecord
from ragchat.services.evidence import EvidenceWarmer, chunk_evidence_texts
from ragchat.services.ingest_runner import SlicedRunner

from tests.fakes import FakeEmbedder, OneBatchSteps, run_to_end
from tests.unit.evidence_docs import GUIDE, POLICY, QUESTIONS

OWNER = "local"


class _Counting(FakeEmbedder):
    """FakeEmbedder recording every batch of documents embedded."""

    def __init__(self) -> None:
        super().__init__(model_id="fake-calibrated")
        self.batches: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return super().embed_documents(texts)


@pytest.fixture
def calibrated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake embedder gets coefficients, so the decision embeds passages as MiniLM's does."""
    monkeypatch.setitem(
        answerability.CALIBRATED,
        "fake-calibrated",
        answerability.Coefficients(0.2, intercept=0.0, weights={"passage": 5.0}, cutoff=0.3),
    )


def _container(tmp_path: Path, **env: str) -> Container:
    settings = load_settings(
        {
            "RAGCHAT_DATA_DIR": str(tmp_path),
            "RAGCHAT_CHAT_MODEL": "extractive",
            "MIN_SIMILARITY": "0.2",
            **env,
        }
    )
    return Container(settings, embedder=_Counting())


def _ingest(box: Container) -> None:
    box.ingestion.submit_file(OWNER, data=POLICY.encode(), filename="expense-policy.md")
    box.ingestion.submit_file(OWNER, data=GUIDE.encode(), filename="office-guide.txt")
    assert box.launcher.wait_idle(30)


def _ingested_with_warmer(box: Container, batch: int = 128) -> tuple[_Counting, EvidenceWarmer]:
    """The two documents ingested without warming, and a warmer of their passages and sentences."""
    _ingest(box)
    store = SqliteEvidenceStore(box._sqlite, "fake-calibrated")
    embedder = box.embedder
    assert isinstance(embedder, _Counting)
    warmer = EvidenceWarmer(box.documents, store, embedder, passages=True, sentences=True, batch=batch)
    return embedder, warmer


def _answers(box: Container) -> list[tuple[bool, str]]:
    out = []
    for q in QUESTIONS:
        result = box.ask.ask(OWNER, q)
        out.append((result.guard_used, result.answer))
    return out


@pytest.mark.usefixtures("calibrated")
def test_once_warmed_a_question_embeds_nothing_but_itself_and_answers_the_same(tmp_path: Path) -> None:
    with _container(tmp_path / "a") as box:
        _ingest(box)
        assert box.launcher.wait_warm(30)  # type: ignore[attr-defined]
        embedder = box.embedder
        assert isinstance(embedder, _Counting)
        embedder.batches.clear()
        warmed = _answers(box)
        assert embedder.batches == []  # every passage and sentence came from the store
    with _container(tmp_path / "b", PRECOMPUTE_EVIDENCE="false") as plain:
        _ingest(plain)
        cold = _answers(plain)
        embedder = plain.embedder
        assert isinstance(embedder, _Counting) and embedder.batches  # embedded at question time
    assert sum(1 for refused, _ in warmed if not refused) >= 4
    strip = [(r, a.split("[source:")[0]) for r, a in warmed]
    assert strip == [(r, a.split("[source:")[0]) for r, a in cold]


@pytest.mark.usefixtures("calibrated")
def test_warming_embeds_each_text_once_and_a_second_run_embeds_nothing(tmp_path: Path) -> None:
    with _container(tmp_path, PRECOMPUTE_EVIDENCE="false") as box:
        embedder, warmer = _ingested_with_warmer(box)
        assert sorted(d for _, d in warmer.pending()) == sorted(
            d.id for d in box.documents.list_documents(OWNER).items
        )
        embedder.batches.clear()
        for _, doc_id in warmer.pending():
            assert warmer(OWNER, doc_id)
        embedded = [t for b in embedder.batches for t in b]
        assert len(embedded) == len(set(embedded)) > 10
        assert (
            "expense policy: Submit every expense report within 30 days of the purchase. "
            "Late reports need your manager's approval." in embedded
        )
        assert (
            "The lighthouse stood on the island of Pharos. It was about one hundred metres tall." in embedded
        )
        assert warmer.pending() == []
        embedder.batches.clear()
        for doc in box.documents.list_documents(OWNER).items:
            assert warmer(OWNER, doc.id)
        assert embedder.batches == []


def test_stored_vectors_keep_their_direction() -> None:
    vector = [0.3, -0.2, 0.9, 0.05, -0.7]
    back = decode(encode(vector))
    dot = sum(a * b for a, b in zip(vector, back, strict=True))
    norm = sum(a * a for a in vector) ** 0.5 * sum(b * b for b in back) ** 0.5
    assert dot / norm > 0.9999
    assert decode(encode([0.0, 0.0])) == [0.0, 0.0]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SqliteDatabase]:
    database = SqliteDatabase(tmp_path / "ragchat.db")
    yield database
    database.close()


def _record(chunk_id: str, document_id: str, text: str) -> VectorRecord:
    return VectorRecord(
        id=chunk_id, vector=[1.0, 0.0], text=text, owner=OWNER, document_id=document_id, chunk_index=0
    )


def test_a_chunks_vectors_go_with_it_and_are_found_only_for_its_exact_text(db: SqliteDatabase) -> None:
    index = LocalVectorIndex(db, dimension=2)
    store = SqliteEvidenceStore(db, "m")
    index.upsert([_record("c1", "d1", "one. two."), _record("c2", "d2", "three.")])
    assert (
        store.put({"c1": [("one.", [1.0, 0.0])], "c2": [("three.", [0.0, 1.0])], "gone": [("x", [1.0, 0.0])]})
        == 2
    )
    assert set(store.vectors_of(["c1", "c2"], ["one.", "three.", "One."])) == {"one.", "three."}
    assert store.vectors_of(["c2"], ["one."]) == {}  # another chunk's text is not read
    assert SqliteEvidenceStore(db, "other-model").vectors_of(["c1"], ["one."]) == {}
    index.delete(["c1"])
    assert store.vectors_of(["c1"], ["one."]) == {}
    index.upsert([_record("c2", "d2", "three, rewritten.")])  # its text changed: its vectors went
    assert store.vectors_of(["c2"], ["three."]) == {}
    store.put({"c2": [("three, rewritten.", [0.0, 1.0])]})
    index.delete_document(OWNER, "d2")
    assert store.vectors_of(["c2"], ["three, rewritten."]) == {}


def test_a_document_is_warm_until_it_changes_version_or_title_or_goes(tmp_path: Path) -> None:
    with _container(tmp_path, PRECOMPUTE_EVIDENCE="false") as box:
        store = SqliteEvidenceStore(box._sqlite, "m")
        doc = box.documents.create_document(
            Document(
                id="d1", owner=OWNER, title="Guide", content_type="text/plain", source="api", body_key="k"
            )
        )
        assert store.unwarmed() == []  # not READY yet
        box.documents.update_document(OWNER, doc.id, {"status": DocumentStatus.READY, "version": "v1"})
        assert store.unwarmed() == [(OWNER, "d1")]
        store.mark(OWNER, "d1", "v1", "Guide")
        assert store.unwarmed() == []
        box.documents.update_document(OWNER, doc.id, {"title": "Lisbon guide"})
        assert store.unwarmed() == [(OWNER, "d1")]
        store.mark(OWNER, "d1", "v1", "Lisbon guide")
        box.documents.update_document(OWNER, doc.id, {"version": "v2"})
        assert store.unwarmed() == [(OWNER, "d1")]
        box.documents.delete_document(OWNER, "d1")
        store.mark(OWNER, "d1", "v2", "Lisbon guide")  # a late warmer leaves no marker behind
        with box._sqlite.read() as conn:
            assert conn.execute("SELECT count(*) FROM evidence_documents").fetchone()[0] == 0


def test_chunk_texts_cover_what_the_answer_and_decision_ask_for() -> None:
    texts = chunk_evidence_texts(POLICY, "expense-policy.md", passages=True, sentences=True)
    assert (
        "expense policy: Meals are covered up to 60 euros per day in Europe. "
        "Taxis are reimbursed only when no train or bus runs." in texts
    )
    assert "expense policy: Item: Hotel; Limit: 150 euros a night" in texts  # a row: headers and title
    assert "The lighthouse stood on the island of Pharos. It was about one hundred metres tall." in texts
    assert not any("**" in t or "|" in t for t in texts)
    assert chunk_evidence_texts(POLICY, None, passages=False, sentences=False) == []


def test_warming_yields_to_an_upload_and_resumes_after_it() -> None:
    """The worker embeds evidence only while no document waits: an upload arriving mid-warm is
    ingested first, then the interrupted document is warmed again from where it stopped."""
    events: list[str] = []
    warming = threading.Event()
    upload_started = threading.Event()
    attempts = {"n": 0}

    def warmer(owner: str, document_id: str, should_yield: object) -> bool:
        attempts["n"] += 1
        events.append(f"warm {document_id} #{attempts['n']}")
        if attempts["n"] == 1:
            warming.set()
            assert upload_started.wait(10)
            assert callable(should_yield) and should_yield()  # an upload waits: stop here
            return False
        return True

    class Steps(OneBatchSteps):
        def split(self, owner: str, document_id: str) -> dict[str, Any]:
            events.append(f"ingest {document_id}")
            return super().split(owner, document_id)

    launcher = InlineIngestionLauncher(lambda: Steps(), runner=SlicedRunner(), warmer=warmer)  # type: ignore[arg-type, return-value]
    try:
        launcher.warm([(OWNER, "old")])
        assert warming.wait(10)
        launcher.start(OWNER, "new")
        upload_started.set()
        assert launcher.wait_warm(10)
    finally:
        launcher.close()
    assert events == ["warm old #1", "ingest new", "warm old #2", "warm new #3"]


@pytest.mark.usefixtures("calibrated")
def test_a_server_start_warms_documents_ingested_without_it(tmp_path: Path) -> None:
    """`ragchat ingest` (or an older version) left READY documents without evidence: `serve` queues
    them, and once warmed questions embed nothing but themselves."""
    with _container(tmp_path, PRECOMPUTE_EVIDENCE="false") as first:
        _ingest(first)
    with _container(tmp_path) as box:
        assert warm_unwarmed(box) == 2
        assert box.launcher.wait_warm(30)  # type: ignore[attr-defined]
        assert warm_unwarmed(box) == 0
        embedder = box.embedder
        assert isinstance(embedder, _Counting)
        embedder.batches.clear()
        _answers(box)
        assert embedder.batches == []


@pytest.mark.usefixtures("calibrated")
def test_a_warm_cut_short_keeps_what_it_stored_and_finishes_later(tmp_path: Path) -> None:
    with _container(tmp_path, PRECOMPUTE_EVIDENCE="false") as box:
        embedder, warmer = _ingested_with_warmer(box, batch=4)
        doc = next(d for d in box.documents.list_documents(OWNER).items if d.title == "expense-policy.md")
        embedder.batches.clear()
        assert warmer(OWNER, doc.id, lambda: True) is False  # an upload waits: one batch, then stop
        assert [len(b) for b in embedder.batches] == [4]
        assert (OWNER, doc.id) in warmer.pending()
        assert warmer(OWNER, doc.id) is True
        embedded = [t for b in embedder.batches for t in b]
        assert len(embedded) == len(set(embedded))  # nothing embedded twice
        assert (OWNER, doc.id) not in warmer.pending()


class _HeldWarmer:
    """Stands in for the launcher's warmer: holds every document until ``release`` (the evidence of a
    document that just turned READY is not stored yet), then warms as the real one does."""

    def __init__(self, real: EvidenceWarmer) -> None:
        self.real = real
        self.released = threading.Event()

    def pending(self) -> list[tuple[str, str]]:
        return self.real.pending()

    def __call__(self, owner: str, document_id: str, should_yield: Any = lambda: False) -> bool:
        assert self.released.wait(30)
        return self.real(owner, document_id, should_yield)


@pytest.mark.usefixtures("calibrated")
def test_the_first_question_at_ready_embeds_what_it_reaches_and_answers_as_once_warmed(
    tmp_path: Path,
) -> None:
    """Asked before the document's evidence vectors are stored (a document too big to get them before
    READY, its warmer held back), as `ragchat serve` runs, a question embeds the passages and sentences
    it reaches itself and stores them: it is answered by meaning, from the right document, with the
    answer the warmed document gives (no top-1-and-words fallback at READY, issue 31). The warmer then
    skips what that question stored, and asked again the question embeds nothing but itself."""
    with _container(tmp_path, EVIDENCE_INLINE_CHUNKS="0") as box:
        launcher = box.launcher
        assert isinstance(launcher, InlineIngestionLauncher) and launcher._warmer is not None
        held = _HeldWarmer(launcher._warmer)  # type: ignore[arg-type]
        launcher._warmer = held
        warm_unwarmed(box)  # as `ragchat serve` starts (its worker warms)
        _ingest(box)
        embedder = box.embedder
        assert isinstance(embedder, _Counting)
        embedder.batches.clear()
        question = "How long do I have to hand in an expense report?"
        first = box.ask.ask(OWNER, question)
        assert not first.guard_used
        assert "30 days" in first.answer
        assert first.sources and "expense" in (first.sources[0].title or "").lower()
        on_request = {t for b in embedder.batches for t in b}
        assert on_request  # the hits' passages and sentences, embedded for this answer
        embedder.batches.clear()
        held.released.set()
        assert launcher.wait_warm(30)
        assert not on_request & {t for b in embedder.batches for t in b}  # not embedded twice
        embedder.batches.clear()
        assert box.ask.ask(OWNER, question).answer == first.answer
        assert embedder.batches == []


@pytest.mark.usefixtures("calibrated")
def test_without_a_warmer_a_question_embeds_the_missing_evidence_and_answers_by_meaning(
    tmp_path: Path,
) -> None:
    """A one-shot process (``ragchat ask`` after ``ragchat ingest``, which exits before warming) has
    nobody to store the evidence later: for a document too big to get it before READY, the question
    embeds what it needs, as before, and the answer is the one a warmed document gives."""
    with _container(tmp_path, EVIDENCE_INLINE_CHUNKS="0") as box:
        launcher = box.launcher
        assert isinstance(launcher, InlineIngestionLauncher) and launcher._warmer is not None
        held = _HeldWarmer(launcher._warmer)  # type: ignore[arg-type]
        launcher._warmer = held  # never released: the evidence is never stored
        _ingest(box)
        embedder = box.embedder
        assert isinstance(embedder, _Counting)
        embedder.batches.clear()
        question = "How long do I have to hand in an expense report?"
        answer = box.ask.ask(OWNER, question)
        assert not answer.guard_used
        assert answer.sources and "expense" in (answer.sources[0].title or "").lower()
        assert embedder.batches != []  # the hits' passages and sentences, embedded for this answer
        held.released.set()
        assert launcher.wait_warm(30)
        assert box.ask.ask(OWNER, question).answer == answer.answer  # what the warmed document says


def test_a_chunk_is_warmed_once_its_document_is_marked_for_its_version_and_title(tmp_path: Path) -> None:
    with _container(tmp_path, PRECOMPUTE_EVIDENCE="false") as box:
        _, warmer = _ingested_with_warmer(box)
        store = warmer.store
        docs = {d.id: d for d in box.documents.list_documents(OWNER).items}
        chunks = {d: [n.id for n in box.documents.list_notes(OWNER, document_id=d).items] for d in docs}
        every = [c for ids in chunks.values() for c in ids]
        assert store.warmed_chunks(every) == set()
        policy = next(d for d in docs if "expense" in docs[d].title.lower())
        assert warmer(OWNER, policy)
        assert store.warmed_chunks(every) == set(chunks[policy])
        box.documents.update_document(OWNER, policy, {"title": "Spending rules"})
        assert store.warmed_chunks(every) == set()  # renamed: its passages are not those stored


@pytest.mark.usefixtures("calibrated")
def test_a_small_document_is_ready_with_its_evidence_and_answers_at_once_as_a_big_one_later(
    tmp_path: Path,
) -> None:
    """A note or a short file (at most ``EVIDENCE_INLINE_CHUNKS`` chunks) gets its passages' and
    sentences' vectors in its own ingestion pass, before READY (issue 31): with no warmer ever
    running, the first question at READY embeds nothing but itself, and its answer is the one the
    on-demand path gives."""
    question = "How long do I have to hand in an expense report?"
    answers = []
    for inline in ("16", "0"):
        with _container(tmp_path / inline, EVIDENCE_INLINE_CHUNKS=inline) as box:
            launcher = box.launcher
            assert isinstance(launcher, InlineIngestionLauncher) and launcher._warmer is not None
            held = _HeldWarmer(launcher._warmer)  # type: ignore[arg-type]  # not before the question
            launcher._warmer = held  # type: ignore[assignment]
            _ingest(box)
            embedder = box.embedder
            assert isinstance(embedder, _Counting)
            embedder.batches.clear()
            result = box.ask.ask(OWNER, question)
            assert not result.guard_used and "30 days" in result.answer
            if inline == "16":
                assert embedder.batches == []  # every vector it reads was stored before READY
            else:
                assert embedder.batches != []
            named = result.answer
            for s in result.sources:  # document ids differ between the two stores
                named = named.replace(s.id, f"{s.title}#{s.id.split('-')[1][:5]}")
            answers.append(named)
            held.released.set()  # its worker thread is not left waiting after the test
    assert answers[0] == answers[1]


@pytest.mark.usefixtures("calibrated")
def test_a_bulk_load_of_small_documents_is_ready_without_waiting_for_their_evidence(tmp_path: Path) -> None:
    """Evidence before READY is for a note added while nothing else ingests: documents ingested in
    the same embedder call count together, so a bulk load of small files (here 20, run as one
    `ragchat ingest` runs them) is READY at the chunks' own cost, and the warmer stores their
    evidence afterwards; the one note added later gets its own before READY."""
    from tests.fakes import FakeLauncher

    with _container(tmp_path) as box:
        box.__dict__["launcher"] = FakeLauncher()  # nothing runs on submit: the bulk is run at once
        for i in range(20):
            text = f"Room {i} of the harbour office opens at {i + 7}:00. Keys are at the front desk."
            box.ingestion.submit_file(OWNER, data=text.encode(), filename=f"room-{i}.txt")
        run_to_end(box.ingest_steps, box.launcher.started)
        with box._sqlite.read() as conn:
            assert conn.execute("SELECT COUNT(*) FROM evidence_vectors").fetchone()[0] == 0
            assert conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] == 20
        box.launcher.started.clear()
        box.ingestion.submit_file(OWNER, data=POLICY.encode(), filename="expense-policy.md")
        run_to_end(box.ingest_steps, box.launcher.started)
        with box._sqlite.read() as conn:
            rows = conn.execute("SELECT DISTINCT chunk_id FROM evidence_vectors").fetchall()
        assert rows and all(str(r[0]).startswith(box.launcher.started[0][1]) for r in rows)
