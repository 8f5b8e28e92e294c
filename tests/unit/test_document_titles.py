"""The answerability decision's passages carry their document's title: read in one batch, remembered
for a short while, renamed documents picked up after that while, a failing store never fails a
question."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from ragchat.config import load_settings
from ragchat.domain.answerability import evidence_passages
from ragchat.domain.models import Document, Note, SearchFilter, VectorRecord
from ragchat.services.retrieval import Retriever
from ragchat.services.titles import TITLE_TTL_S, DocumentTitles

from tests.fakes import FakeClock, FakeDocumentStore, FakeEmbedder, FakeVectorIndex

OWNER = "alice"


def _doc(doc_id: str, title: str, owner: str = OWNER) -> Document:
    return Document(
        id=doc_id, owner=owner, title=title, content_type="text/plain", source="api", body_key="k"
    )


class CountingStore(FakeDocumentStore):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.reads = 0
        self.fail = False

    def get_notes_and_documents(
        self, owner: str, note_ids: Sequence[str], document_ids: Sequence[str]
    ) -> tuple[list[Note], list[Document]]:
        self.reads += 1
        if self.fail:
            raise ConnectionError("store down")
        return super().get_notes_and_documents(owner, note_ids, document_ids)


@pytest.fixture
def rig() -> tuple[DocumentTitles, CountingStore, FakeClock]:
    clock = FakeClock()
    store = CountingStore(clock)
    store.create_document(_doc("d1", "expense-policy.md"))
    store.create_document(_doc("d2", "Office guide"))
    store.create_document(_doc("d3", "Bob's notes", owner="bob"))
    return DocumentTitles(store, clock=clock), store, clock


def test_titles_are_read_in_one_batch_and_remembered(
    rig: tuple[DocumentTitles, CountingStore, FakeClock],
) -> None:
    titles, store, _ = rig
    assert titles(OWNER, ["d1", "d2", "d1"]) == {"d1": "expense-policy.md", "d2": "Office guide"}
    assert titles(OWNER, ["d2", "d1"]) == {"d1": "expense-policy.md", "d2": "Office guide"}
    assert store.reads == 1


def test_another_owners_or_an_unknown_document_has_no_title(
    rig: tuple[DocumentTitles, CountingStore, FakeClock],
) -> None:
    titles, _, _ = rig
    assert titles(OWNER, ["d3", "nope"]) == {}
    assert titles("bob", ["d3"]) == {"d3": "Bob's notes"}


def test_a_renamed_document_shows_its_new_title_after_the_ttl(
    rig: tuple[DocumentTitles, CountingStore, FakeClock],
) -> None:
    titles, store, clock = rig
    assert titles(OWNER, ["d2"])["d2"] == "Office guide"
    store.docs["d2"] = dataclasses.replace(store.docs["d2"], title="Lisbon office guide")
    clock.advance(TITLE_TTL_S - 1)
    assert titles(OWNER, ["d2"])["d2"] == "Office guide"
    clock.advance(2)
    assert titles(OWNER, ["d2"])["d2"] == "Lisbon office guide"


def test_a_failing_store_gives_no_titles_and_no_error(
    rig: tuple[DocumentTitles, CountingStore, FakeClock],
) -> None:
    titles, store, _ = rig
    store.fail = True
    assert titles(OWNER, ["d1"]) == {}
    store.fail = False
    assert titles(OWNER, ["d1"]) == {"d1": "expense-policy.md"}


def test_passages_are_prefixed_with_their_documents_title_words() -> None:
    texts = ["Claims are paid monthly. Submit within 30 days.", "Desks are free.", "Ignored? No."]
    passages = evidence_passages(texts, titles=["expense-policy.md", None, "Office guide"])
    assert passages == [
        "expense policy: Claims are paid monthly. Submit within 30 days.",
        "Desks are free.",
        "Office guide: Ignored? No.",
    ]


def test_the_retriever_embeds_passages_with_their_titles(
    monkeypatch: pytest.MonkeyPatch, rig: tuple[DocumentTitles, CountingStore, FakeClock]
) -> None:
    from ragchat.domain import answerability

    monkeypatch.setitem(
        answerability.CALIBRATED, "fake-embedder", answerability.Coefficients(0.35, 0.0, {}, 0.5)
    )
    titles, store, _ = rig
    embedder = FakeEmbedder()
    index = FakeVectorIndex(dimension=embedder.dimension)
    text = "Submit a claim within 30 days."
    index.upsert(
        [
            VectorRecord(
                id="n1",
                vector=embedder.vector_for(text),
                text=text,
                owner=OWNER,
                document_id="d1",
                chunk_index=0,
            )
        ]
    )
    settings = load_settings({"RETRIEVAL_MODE": "vector"})
    retriever = Retriever(embedder, index, settings, titles=titles)
    retriever.retrieve("claim deadline", SearchFilter(owner=OWNER))
    assert "expense policy: Submit a claim within 30 days." in embedder.embedded_texts

    store.fail = True  # titles unavailable: the passage is embedded as it is, the question answered
    titles_down = Retriever(embedder, index, settings, titles=DocumentTitles(store))
    assert not titles_down.retrieve("claim deadline", SearchFilter(owner=OWNER)).guard
    assert text in embedder.embedded_texts


def test_a_document_the_store_lacks_is_not_read_again_on_every_question(
    rig: tuple[DocumentTitles, CountingStore, FakeClock],
) -> None:
    titles, store, clock = rig
    assert titles(OWNER, ["gone", "d1"]) == {"d1": "expense-policy.md"}
    assert titles(OWNER, ["gone"]) == {}
    assert store.reads == 1
    store.create_document(_doc("gone", "Arrived later"))
    clock.advance(TITLE_TTL_S + 1)
    assert titles(OWNER, ["gone"]) == {"gone": "Arrived later"}


def test_the_answered_notes_titles_are_read_only_for_an_answerer_that_uses_them(
    rig: tuple[DocumentTitles, CountingStore, FakeClock],
) -> None:
    # the extractive answer by meaning reads a table row with its title; a Claude answer does not,
    # so its questions (whose decision reads no titles: no calibration for the embedder) read none
    titles, store, _ = rig
    embedder = FakeEmbedder()
    index = FakeVectorIndex(dimension=embedder.dimension)
    text = "Submit a claim within 30 days."
    record = VectorRecord(
        id="n1", vector=embedder.vector_for(text), text=text, owner=OWNER, document_id="d1", chunk_index=0
    )
    index.upsert([record])
    settings = load_settings({"RETRIEVAL_MODE": "vector", "MIN_SIMILARITY": "-1"})
    claude = Retriever(embedder, index, settings, titles=titles)
    assert claude.retrieve("claim deadline", SearchFilter(owner=OWNER)).titles == {}
    assert store.reads == 0
    extractive = Retriever(embedder, index, settings, titles=titles, answer_titles=True)
    assert extractive.retrieve("claim deadline", SearchFilter(owner=OWNER)).titles == {
        "d1": "expense-policy.md"
    }
    assert store.reads == 1
