"""Big documents on the local stack (issue 8): a 1,000-page PDF goes from submit to READY through
the real parts — SQLite document store, file blob store, SQLite vector index, the background
worker, pypdf extraction and the splitter — with a fake embedder (the model is not the subject).
The largest size tested: 1,000 pages, 40 lines each, 3.2 MB, ~3,900 chunks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from ragchat.bootstrap import Container
from ragchat.config import load_settings
from ragchat.domain.models import DocumentStatus, SearchFilter

from tests.fakes import FakeEmbedder
from tests.pdfs import book_pdf

pytestmark = pytest.mark.slow

OWNER = "alice"
PAGES = 1000
NOTE = "Ferns reproduce with spores."


class RecordingEmbedder(FakeEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return super().embed_documents(texts)


def test_a_1000_page_pdf_ingests_end_to_end_and_a_note_posted_after_it_is_not_held_up(
    tmp_path: Path,
) -> None:
    settings = load_settings({"RAGCHAT_DATA_DIR": str(tmp_path), "RAGCHAT_CHAT_MODEL": "extractive"})
    embedder = RecordingEmbedder()
    container = Container(settings, embedder=embedder)
    pdf = book_pdf(PAGES)
    assert len(pdf) > 3_000_000

    book = container.ingestion.submit(OWNER, body=pdf, filename="annual-report.pdf")
    note = container.ingestion.submit(OWNER, body=NOTE)
    assert container.launcher.wait_idle(600)  # type: ignore[attr-defined]

    stored = container.documents.get_document(OWNER, book.id)
    assert stored is not None and stored.status == DocumentStatus.READY, stored
    assert stored.chunk_count > 3 * PAGES
    assert container.index.count(OWNER) == stored.chunk_count + 1
    notes = container.documents.list_notes(OWNER, document_id=book.id, limit=10_000).items
    assert {n.metadata["page"] for n in notes} == set(range(1, PAGES + 1))
    # the last page is searchable: it is among the best hits for its own text (the fake embedder's
    # bag of hashed words gives the book's near-identical pages equal scores; ties go to the first)
    hits = container.index.search(embedder.vector_for(notes[-1].text), SearchFilter(owner=OWNER), 500)
    assert notes[-1].id in [h.id for h in hits if h.score >= hits[0].score - 1e-6]
    assert not any((tmp_path / "blobs" / "work").glob("**/*.json"))  # batch files cleaned up

    # Posted just after the book, the note was embedded in the book's first round (the book's
    # other ~60 batches came after), not at the end.
    assert embedder.texts.index(NOTE) < 300
    done = container.documents.get_document(OWNER, note.id)
    assert done is not None and done.status == DocumentStatus.READY
