"""Sources that say where (issue 10, docs/api.md, docs/retrieval.md): every surface carries ``{id,
documentId, title, page?, text}``; title and page come from one batched read of the cited notes and
their documents."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from ragchat.api.schemas import conversation_export_json, source_json
from ragchat.cli.ask import print_answer
from ragchat.cli.client import Answer, Source, sources_of
from ragchat.domain.export import export_markdown
from ragchat.domain.models import Conversation, Document, Message, Note, SourceRef, source_from_json
from ragchat.services.answering import Answerer, AskService
from ragchat.services.model_calls import ModelCaller
from ragchat.services.sources import locate_sources

from tests.fakes import FakeChatModel, FakeClock, FakeDocumentStore
from tests.unit.test_chat_service import OWNER, Rig


def _doc(doc_id: str = "d1", title: str = "Sky handbook") -> Document:
    return Document(
        id=doc_id, owner=OWNER, title=title, content_type="application/pdf", source="api", body_key="k"
    )


def _rig() -> Rig:
    return Rig(model=FakeChatModel("Blue [source: n-sky]."))


def _page_notes(rig: Rig, page: int = 3) -> None:
    """Give the rig's ``n-sky`` note a document with a title and a PDF page, as ingestion stores."""
    rig.documents.create_document(_doc())
    [note] = rig.documents.get_notes(OWNER, ["n-sky"])
    note.metadata = {"page": page}
    rig.documents.put_notes([note])


class CountingDocuments:
    """The fake document store, counting calls (each one is a store round trip)."""

    def __init__(self, inner: FakeDocumentStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return fn(*args, **kwargs)

        return call


# ----------------------------------------------------------------------------- the one shape
def test_source_json_is_the_spec_shape_and_page_only_when_known() -> None:
    full = SourceRef("n1", "text", document_id="d1", title="Handbook", page=2)
    assert source_json(full) == {
        "id": "n1",
        "documentId": "d1",
        "title": "Handbook",
        "page": 2,
        "text": "text",
    }
    assert source_json(SourceRef("n2", "t")) == {"id": "n2", "documentId": None, "title": None, "text": "t"}
    assert source_from_json(source_json(full)) == full


def test_stored_messages_from_before_still_load() -> None:
    assert source_from_json({"id": "n1", "text": "old"}) == SourceRef("n1", "old")
    assert source_from_json({"id": "n1", "text": "x", "page": True}).page is None


# ----------------------------------------------------------------------------- where they come from
def test_locate_sources_reads_title_and_page_in_one_call() -> None:
    docs = FakeDocumentStore(clock=FakeClock())
    docs.create_document(_doc())
    docs.put_notes(
        [
            Note(id="n1", document_id="d1", chunk_index=0, text="a", owner=OWNER, metadata={"page": 4}),
            Note(id="n2", document_id=None, chunk_index=0, text="b", owner=OWNER),  # a legacy note
        ]
    )
    counting = CountingDocuments(docs)
    got = locate_sources(counting, OWNER, [SourceRef("n1", "a", document_id="d1"), SourceRef("n2", "b")])  # type: ignore[arg-type]
    assert got == [SourceRef("n1", "a", "d1", "Sky handbook", 4), SourceRef("n2", "b")]
    assert counting.calls == Counter({"get_notes_and_documents": 1})
    assert locate_sources(counting, OWNER, []) == []  # type: ignore[arg-type]
    assert counting.calls["get_notes_and_documents"] == 1  # nothing cited: nothing read


def test_a_failed_read_keeps_the_sources_without_title() -> None:
    class Broken:
        def get_notes_and_documents(self, *args: Any) -> Any:
            raise TimeoutError("store down")

    src = [SourceRef("n1", "a", document_id="d1")]
    assert locate_sources(Broken(), OWNER, src) == src  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- chat turns
def test_chat_answer_stored_message_and_export_carry_title_and_page() -> None:
    rig = _rig()
    _page_notes(rig)
    c = rig.conv()
    result = rig.say(c, "Why is the sky blue?")
    want = SourceRef(
        "n-sky", "The sky appears blue because of Rayleigh scattering of sunlight.", "d1", "Sky handbook", 3
    )
    assert result.message.sources == [want]
    stored = rig.store.list_messages(OWNER, c).items[-1]
    assert stored.sources == [want]
    conv = rig.chat.conversations.get(OWNER, c)
    exported = conversation_export_json(conv, rig.store.list_messages(OWNER, c).items)
    assert exported["messages"][-1]["sources"][0]["title"] == "Sky handbook"
    assert exported["messages"][-1]["sources"][0]["page"] == 3
    md = export_markdown(conv, rig.store.list_messages(OWNER, c).items)
    assert "[^1]: Sky handbook, p. 3 — “The sky appears blue" in md


def test_a_renamed_document_shows_its_new_title_in_new_answers() -> None:
    rig = _rig()
    _page_notes(rig)
    c = rig.conv()
    assert rig.say(c, "Why is the sky blue?").message.sources[0].title == "Sky handbook"
    rig.documents.update_document(OWNER, "d1", {"title": "Atmosphere guide"})
    assert rig.say(c, "Why is the sky blue?").message.sources[0].title == "Atmosphere guide"


def test_round_trips_one_batched_read_only_when_the_answer_cites_something() -> None:
    rig = _rig()
    _page_notes(rig)
    counting = CountingDocuments(rig.documents)
    rig.chat.turns.p.documents = counting  # type: ignore[assignment]
    c = rig.conv()
    rig.say(c, "Why is the sky blue?")
    assert counting.calls == Counter({"get_notes_and_documents": 1})
    assert rig.say(c, "quantum chromodynamics lattice").guard_used  # no sources: no note read, only
    # the list of the newest documents, for any still being indexed (the refusal would say so)
    assert counting.calls == Counter({"get_notes_and_documents": 1, "list_documents": 1})


def test_sse_sources_event_carries_title_and_page() -> None:
    rig = _rig()
    _page_notes(rig, page=7)
    c = rig.conv()
    _, evs = rig.chat.turns.stream(OWNER, c, "Why is the sky blue?")
    sources = next(data for name, data in evs if name == "sources")["sources"]
    assert sources[0] | {"text": ""} == {
        "id": "n-sky", "documentId": "d1", "title": "Sky handbook", "page": 7, "text": ""
    }  # fmt: skip


# ----------------------------------------------------------------------------- one-shot and CLI
def test_one_shot_answer_carries_title_and_page() -> None:
    rig = _rig()
    _page_notes(rig)
    answerer = Answerer(ModelCaller(rig.model), rig.settings)
    ask = AskService(rig.chat.turns.p.retriever, answerer, rig.settings, documents=rig.documents)
    result = ask.ask(OWNER, "Why is the sky blue?")
    assert [(s.id, s.title, s.page) for s in result.sources] == [("n-sky", "Sky handbook", 3)]


def test_cli_prints_title_and_page(capsys: pytest.CaptureFixture[str]) -> None:
    raw = [{"id": "n1", "documentId": "d1", "title": "Handbook", "page": 2, "text": "Blue light."}]
    sources = sources_of(raw)
    assert sources == [Source("n1", "Blue light.", "Handbook", 2)]
    print_answer(Answer("The sky is blue. [source: n1]\n\nSources: n1", sources, False, {}))
    print_answer(Answer("Old.", sources_of([{"id": "n2", "text": "x"}]), False, {}))
    out = capsys.readouterr().out
    assert "The sky is blue. [1]\n" in out
    assert "[1] Handbook, p. 2\n" in out and "Blue light." in out
    assert "[1] n2\n" in out  # an old source without a title: its id


def test_markdown_export_of_older_messages_without_title() -> None:
    conv = Conversation(id="c1", owner=OWNER, title="T")
    msg = Message(id="m1", conversation_id="c1", owner=OWNER, role="assistant", content="A",
                  sources=[SourceRef("n1", "old text")])  # fmt: skip
    assert "[^1]: `n1` — “old text”" in export_markdown(conv, [msg])
    assert json.loads(json.dumps(conversation_export_json(conv, [msg])))["messages"][0]["sources"] == [
        {"id": "n1", "documentId": None, "title": None, "text": "old text"}
    ]
