"""The extractive reader in the product (``READER=on``, docs/reader.md, docs/chat.md),
with a deterministic fake reader (tests/fakes/reader.py): what the user sees.

- the answer is the sentence holding the reader's span, cited, then the ``Sources:`` line; the
  citation highlights the span (a table row's cell, not the table), and it is stored so;
- a heading never runs into the quoted sentence;
- no answer beats the span: the guard reply, the closest passages offered as suggestions;
- follow-ups: the carried query is kept only when the reader finds an answer under it; a message
  that changes subject is searched on its own;
- with a language model answering, the reader is the guard before the model: no call when refused,
  the passage holding the answer sent first when answered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ragchat.adapters.local.extractive import ExtractiveChatModel
from ragchat.bootstrap import build_chat
from ragchat.config import load_settings
from ragchat.domain.answerability import (
    DEFAULT_READER_THRESHOLD,
    EXTRACTIVE_POLICY,
    NO_ANSWER,
    READER_POLICY,
    READER_THRESHOLDS,
    reader_threshold,
)
from ragchat.domain.models import Hit, ModelRequest, Note, SearchFilter, VectorRecord, source_json
from ragchat.domain.prompts import GUARD_REPLY
from ragchat.domain.read_answers import Found, best_found, passage_of, reader_answer
from ragchat.domain.reading import Reading
from ragchat.services.retrieval import Retriever

from tests.fakes import (
    FakeChatModel,
    FakeClock,
    FakeConversationStore,
    FakeCounters,
    FakeDocumentStore,
    FakeEmbedder,
    FakeVectorIndex,
)
from tests.fakes.reader import FakeReader

OWNER = "alice"
BIKES = (
    "Cargo bikes\n"
    "Employees may park cargo bikes in the yard behind the workshop. Standard bikes go in the basement racks."
)
ALLOTMENT = "| Plot | Rent per year |\n|---|---|\n| Half plot | 48 pounds |\n| Full plot | 90 pounds |"
LIBRARY = "The library opens at 9 on weekdays. On Sundays it opens at noon."
NOTES = {
    "n-bikes": ("d-bikes", "Cycling policy", BIKES),
    "n-plots": ("d-plots", "Allotments", ALLOTMENT),
    "n-library": ("d-library", "Library hours", LIBRARY),
}
ANSWERS = {
    "cargo": "in the yard behind the workshop",
    "half plot": "48 pounds",
    "library open": "at 9",
    "sunday": "at noon",
}


class Rig:
    def __init__(
        self, env: dict[str, str] | None = None, *, model: Any = None, policy: str = EXTRACTIVE_POLICY
    ):
        self.clock = FakeClock()
        self.store = FakeConversationStore(clock=self.clock)
        self.documents = FakeDocumentStore(clock=self.clock)
        self.embedder = FakeEmbedder(dimension=64)
        self.index = FakeVectorIndex(dimension=64)
        self.settings = load_settings(
            {"MIN_SIMILARITY": "0.3", "RAGCHAT_DATA_DIR": "/nonexistent", "READER": "on", **(env or {})}
        )
        self.reader = FakeReader(ANSWERS)
        self.model = model or ExtractiveChatModel()
        threshold = reader_threshold(None, None, self.settings.reader_threshold)
        self.retriever = Retriever(
            self.embedder,
            self.index,
            self.settings,
            reader=self.reader,
            reader_threshold=threshold,
            policy=policy,
        )
        self.chat = build_chat(
            conversations=self.store,
            counters=FakeCounters(),
            retriever=self.retriever,
            model=self.model,
            documents=self.documents,
            settings=self.settings,
            clock=self.clock,
            sleep=lambda s: None,
        )
        for note_id, (doc, _title, text) in NOTES.items():
            self.index.upsert(
                [
                    VectorRecord(
                        id=note_id,
                        vector=self.embedder.vector_for(text),
                        text=text,
                        owner=OWNER,
                        document_id=doc,
                        chunk_index=0,
                    )
                ]
            )
            self.documents.put_notes(
                [Note(id=note_id, document_id=doc, chunk_index=0, text=text, owner=OWNER)]
            )

    def say(self, conv: str, text: str) -> Any:
        self.clock.advance(10)
        return self.chat.turns.send(OWNER, conv, text)

    def conv(self) -> str:
        return self.chat.conversations.create(OWNER).id


# ----------------------------------------------------------------------------- the answer
def test_the_answer_is_the_sentence_holding_the_span_and_the_citation_highlights_the_span() -> None:
    rig = Rig()
    c = rig.conv()
    out = rig.say(c, "Where can I park a cargo bike?")
    assert out.guard_used is False
    assert out.message.content == (
        "Employees may park cargo bikes in the yard behind the workshop. [source: n-bikes]"
        "\n\nSources: n-bikes"
    )
    [source] = out.message.sources
    assert source.id == "n-bikes" and source.highlight == "in the yard behind the workshop"
    stored = rig.store.list_messages(OWNER, c).items[-1]
    assert source_json(stored.sources[0])["highlight"] == "in the yard behind the workshop"


def test_a_heading_never_runs_into_the_quoted_sentence() -> None:
    rig = Rig()
    out = rig.say(rig.conv(), "Where can I park a cargo bike?")
    assert "Cargo bikes Employees" not in out.message.content
    assert out.message.content.startswith("Employees may park")


def test_a_table_answer_quotes_its_row_and_highlights_the_cell_not_the_table() -> None:
    rig = Rig()
    out = rig.say(rig.conv(), "What is the rent for a half plot?")
    assert out.message.content.startswith("Plot: Half plot; Rent per year: 48 pounds [source: n-plots]")
    assert "Full plot" not in out.message.content and "90 pounds" not in out.message.content
    assert out.message.sources[0].highlight == "48 pounds"


def test_the_reader_reads_every_retrieved_note_in_one_call() -> None:
    rig = Rig()
    rig.say(rig.conv(), "Where can I park a cargo bike?")
    [(question, passages)] = rig.reader.calls
    assert question == "Where can I park a cargo bike?"
    assert len(passages) == 3  # topK notes, one batched read
    bikes = next(p for p in passages if "cargo bikes" in p)
    # what the reader reads: the note's sentences, the heading kept apart, the table rows labelled
    assert bikes.startswith("Cargo bikes. Employees may park cargo bikes in the yard behind the workshop.")
    assert "Plot: Half plot; Rent per year: 48 pounds. Plot: Full plot" in " ".join(passages)


# ----------------------------------------------------------------------------- refusals
def test_no_answer_is_refused_with_the_closest_passages_as_suggestions() -> None:
    rig = Rig()
    c = rig.conv()
    _, events = rig.chat.turns.stream(OWNER, c, "Can employees park motorbikes in the yard?")
    out = list(events)
    assert [n for n, _ in out] == ["answer_start", "refusal"]
    refusal = out[1][1]
    assert refusal["message"] == GUARD_REPLY
    closest = [s for s in refusal["suggestions"] if s.startswith("Closest passage")]
    assert closest and "Employees may park cargo bikes" in closest[0]
    assert "Rephrase your question" in refusal["suggestions"]  # the usual next steps stay
    stored = rig.store.list_messages(OWNER, c).items[-1]
    assert stored.content == GUARD_REPLY and stored.sources == []


def test_the_threshold_setting_moves_the_operating_point() -> None:
    rig = Rig({"READER_THRESHOLD": "5"})  # the fake's sure spans beat no answer by 4
    out = rig.say(rig.conv(), "Where can I park a cargo bike?")
    assert out.guard_used and out.message.content == GUARD_REPLY


def test_the_operating_point_is_the_setting_then_the_models_calibrated_value(monkeypatch: Any) -> None:
    monkeypatch.setitem(READER_THRESHOLDS, "abc123", 1.5)
    assert reader_threshold("abc123", 0.7, None) == 1.5
    assert reader_threshold("abc123", 0.7, -1.0) == -1.0
    assert reader_threshold("other", 0.7, None) == 0.7  # the manifest's
    assert reader_threshold(None, None, None) == DEFAULT_READER_THRESHOLD


# ----------------------------------------------------------------------------- follow-ups
def test_a_follow_up_is_answered_under_the_carried_query_the_reader_answers() -> None:
    rig = Rig()
    c = rig.conv()
    first = rig.say(c, "When does the library open?")
    assert "opens at 9" in first.message.content
    out = rig.say(c, "And on Sundays?")
    assert out.message.content.startswith("On Sundays it opens at noon. [source: n-library]")
    assert out.message.query == "When does the library open? And on Sundays?"
    assert out.message.sources[0].highlight == "at noon"


def test_a_message_that_changes_subject_is_searched_on_its_own() -> None:
    rig = Rig()
    c = rig.conv()
    rig.say(c, "When does the library open?")
    rig.reader.calls.clear()
    out = rig.say(c, "What time does the supermarket close?")
    assert out.guard_used and out.message.content == GUARD_REPLY
    assert [q for q, _ in rig.reader.calls] == ["What time does the supermarket close?"]  # never glued


def test_a_carried_query_the_reader_finds_no_answer_under_is_dropped() -> None:
    rig = Rig()
    c = rig.conv()
    rig.say(c, "When does the library open?")
    out = rig.say(c, "And what about its parking?")
    assert out.guard_used
    assert out.message.query == "And what about its parking?"  # the carried query was not kept


# ----------------------------------------------------------------------------- a model answering
def test_with_a_model_answering_the_reader_refuses_before_any_call() -> None:
    model = FakeChatModel(lambda req: f"Answer [source: {req.sources[0].id}]")
    rig = Rig(model=model, policy=READER_POLICY)
    out = rig.say(rig.conv(), "Can employees park motorbikes in the yard?")
    assert out.guard_used and out.message.content == GUARD_REPLY
    assert model.calls == 0


def test_with_a_model_answering_an_answerable_question_is_sent_with_its_passage() -> None:
    model = FakeChatModel(lambda req: f"In the yard [source: {req.sources[0].id}]")
    rig = Rig(model=model, policy=READER_POLICY)
    out = rig.say(rig.conv(), "What is the rent for a half plot?")
    assert model.calls == 1
    request: ModelRequest = model.requests[0]
    assert request.sources[0].id == "n-plots"  # the passage holding the answer, first
    assert "[Source id=n-plots]" in request.system
    assert out.message.sources[0].highlight == "48 pounds"


# ----------------------------------------------------------------------------- the domain
def _hit(note: str, text: str) -> Hit:
    return Hit(id=note, score=0.5, text=text, document_id="d")


def test_a_span_over_two_sentences_quotes_both_and_a_reference_back_brings_its_sentence() -> None:
    passage = passage_of(_hit("n1", "The pool is on Mill Road. It opens at seven. Towels cost one pound."))
    start = passage.text.index("seven")
    found = Found(passage, Reading(start, start + 5, 5.0, 1.0), 0)
    assert reader_answer(found) == (
        "The pool is on Mill Road. [source: n1] It opens at seven. [source: n1]\n\nSources: n1"
    )
    across = passage.text.index("Mill")
    wide = Found(passage, Reading(across, passage.text.index("seven") + 5, 5.0, 1.0), 0)
    assert wide.sentences() == ["The pool is on Mill Road.", "It opens at seven."]


def test_the_best_span_is_the_highest_margin_over_every_passage() -> None:
    passages = [passage_of(_hit("a", "One thing. Another.")), passage_of(_hit("b", "Third thing here."))]
    readings = [Reading(0, 3, 2.0, 1.0), Reading(0, 5, 4.0, 1.5)]
    best = best_found(passages, readings)
    assert best is not None and best.hit_id == "b" and best.margin == pytest.approx(2.5)
    assert best_found(passages, [Reading(-1, -1, float("-inf"), 0.0)] * 2) is None


def test_a_refused_retrieval_says_no_answer() -> None:
    rig = Rig()
    result = rig.retriever.retrieve("Can employees park motorbikes?", SearchFilter(owner=OWNER))
    assert result.guard and result.reason == NO_ANSWER and result.found is not None


# ----------------------------------------------------------------------------- where the model is
def test_the_packaged_reader_is_used_when_the_cache_has_none(tmp_path: Path) -> None:
    from ragchat.adapters.local.onnx_embedder import ModelNotPreparedError
    from ragchat.adapters.local.reader import MODEL_FILE, MODEL_NAME, TOKENIZER_FILE, find_reader

    cache, shipped = tmp_path / "cache", tmp_path / "package"
    with pytest.raises(ModelNotPreparedError, match="make reader"):
        find_reader(cache, shipped)
    (shipped / MODEL_NAME).mkdir(parents=True)
    for name in (MODEL_FILE, TOKENIZER_FILE):
        (shipped / MODEL_NAME / name).write_bytes(b"x")
    assert find_reader(cache, shipped) == shipped / MODEL_NAME
    (cache / MODEL_NAME).mkdir(parents=True)
    for name in (MODEL_FILE, TOKENIZER_FILE):
        (cache / MODEL_NAME / name).write_bytes(b"y")
    assert find_reader(cache, shipped) == cache / MODEL_NAME  # a model being tried wins


def test_the_shipped_reader_folder_is_package_data() -> None:
    import tomllib

    from ragchat.adapters.local.reader import MODEL_NAME, PACKAGED_MODELS

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]["ragchat"]
    assert f"models/{MODEL_NAME}/*" in data
    import ragchat

    assert Path(ragchat.__file__).parent / "models" == PACKAGED_MODELS


def test_the_reader_reads_the_documents_title_first_and_a_span_in_it_is_no_answer() -> None:
    passage = passage_of(_hit("n1", "Employees may park in the yard."), "cycling-policy.md")
    assert passage.text == "cycling policy\nEmployees may park in the yard."  # as trained: title line
    in_title = Reading(0, 7, 9.0, 1.0)
    in_text = Reading(passage.text.index("yard"), passage.text.index("yard") + 4, 3.0, 1.0)
    assert best_found([passage], [in_title]) is None
    found = best_found([passage], [in_text])
    assert found is not None and found.span == "yard"
    assert reader_answer(found).startswith("Employees may park in the yard. [source: n1]")
