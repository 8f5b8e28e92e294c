"""The answerability guard's two policies (issue 36 item 1): with Claude (a model that reads) the guard
refuses only what is clearly unrelated — every off-topic question still refused before any model
call — and lets borderline evidence through; the extractive answerer keeps its calibrated decision.
Also the source lines' document titles (item 2) and the stored coefficients' form."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ragchat.config import load_settings
from ragchat.domain.answerability import (
    CALIBRATED,
    EXTRACTIVE_POLICY,
    READER_POLICY,
    UNKNOWN_WORDS,
    Coefficients,
    Signals,
    decide_for,
    fit_reader_cutoff,
    probability,
)
from ragchat.domain.models import Hit, VectorRecord
from ragchat.domain.prompts import GUARD_REPLY, SYSTEM_PROMPT_TEMPLATE, build_sources_block
from ragchat.services.answering import Answerer, AskService
from ragchat.services.model_calls import ModelCaller
from ragchat.services.retrieval import Retriever

from tests.fakes import FakeChatModel, FakeEmbedder, FakeVectorIndex

OWNER = "alice"
FERRY = "Dogs and other pets may travel on the ferry deck if kept on a short lead."
MINILM = CALIBRATED["all-MiniLM-L6-v2"]


def _ask(policy: str, **similarity: float) -> tuple[AskService, FakeChatModel]:
    settings = load_settings({"MIN_SIMILARITY": "0.35", "RETRIEVAL_MODE": "vector"})
    embedder = FakeEmbedder()
    index = FakeVectorIndex(dimension=embedder.dimension)
    for note, text, doc in (
        ("n-ferry", FERRY, "d-ferry"),
        ("n-cafe", "The harbour cafe sells sandwiches and hot drinks until six.", "d-cafe"),
    ):
        index.upsert([VectorRecord(note, embedder.vector_for(text), text, OWNER, doc, 0)])
    for note, score in similarity.items():  # scripted cosine similarities
        index.scores[note.replace("_", "-")] = score
    model = FakeChatModel(lambda r: f"From the notes [source: {r.sources[0].id}]")
    retriever = Retriever(embedder, index, settings, policy=policy)
    return AskService(retriever, Answerer(ModelCaller(model), settings), settings), model


@pytest.mark.parametrize("policy", [READER_POLICY, EXTRACTIVE_POLICY])
def test_an_off_topic_question_is_refused_before_any_model_call_in_both_modes(policy: str) -> None:
    ask, model = _ask(policy, n_ferry=0.12, n_cafe=0.1)
    out = ask.ask(OWNER, "Who won the snooker final yesterday?")
    assert out.answer == GUARD_REPLY and out.guard_used
    assert model.calls == 0


def test_a_borderline_paraphrase_reaches_claude_but_the_extractive_answerer_refuses_it() -> None:
    question = "Can I bring my spaniel onto the ferry?"
    # a paraphrase: low similarity, the subject's word ("ferry") shared
    claude, model = _ask(READER_POLICY, n_ferry=0.2, n_cafe=0.1)
    out = claude.ask(OWNER, question)
    assert not out.guard_used and model.calls == 1
    assert "[Source id=n-ferry]" in model.requests[0].system
    assert [s.id for s in out.sources] == ["n-ferry"]

    extractive, model = _ask(EXTRACTIVE_POLICY, n_ferry=0.2, n_cafe=0.1)
    out = extractive.ask(OWNER, question)
    assert out.guard_used and out.answer == GUARD_REPLY and model.calls == 0


def _signals(passage: float, sentence_coverage: float, coverage: float = 0.5) -> Signals:
    return Signals(
        top=passage, passage=passage, coverage=coverage, sentence_coverage=sentence_coverage, margin=0.0
    )


def test_calibrated_reader_cutoff_sits_below_the_extractive_one() -> None:
    borderline = _signals(0.33, 0.25)
    p = probability(borderline, MINILM, 0.40)
    assert MINILM.reader_cutoff is not None and MINILM.reader_cutoff <= p < MINILM.cutoff
    assert decide_for(READER_POLICY, borderline, 0.40, MINILM).answer
    assert not decide_for(EXTRACTIVE_POLICY, borderline, 0.40, MINILM).answer
    unrelated = _signals(0.15, 0.0, coverage=0.0)
    assert not decide_for(READER_POLICY, unrelated, 0.40, MINILM).answer


def test_uncalibrated_reader_policy_reads_words_and_rank_agreement_not_the_cosine_scale() -> None:
    # any cosine scale: a Titan-like 0.05 top similarity with the question's words found is let through
    found = Signals(top=0.05, passage=None, coverage=0.34, sentence_coverage=0.34, margin=0.0, agreement=1)
    assert decide_for(READER_POLICY, found, 0.35, None).answer
    assert not decide_for(EXTRACTIVE_POLICY, found, 0.35, None).answer  # the seeds' top-1 rule
    # none of its words, top chunks from different documents: refused, however high the cosine
    none = Signals(top=0.9, passage=None, coverage=0.0, sentence_coverage=0.0, margin=0.0, agreement=1)
    assert not decide_for(READER_POLICY, none, 0.35, None).answer
    agreed = Signals(top=0.9, passage=None, coverage=0.0, sentence_coverage=0.0, margin=0.0, agreement=3)
    assert decide_for(READER_POLICY, agreed, 0.35, None).answer


def test_reader_cutoff_refuses_every_off_topic_dev_question_and_lets_the_rest_through() -> None:
    assert fit_reader_cutoff([0.173, 0.5, 0.9], [0.05, 0.128], 0.45) == 0.16
    assert fit_reader_cutoff([0.9], [0.6], 0.45) == 0.45  # never above the extractive cutoff


def test_coefficients_round_trip_through_their_stored_form() -> None:
    c = Coefficients(0.4, -0.4, {"passage": 9.3, "sentence_coverage": 0.5}, 0.45, 0.16)
    assert Coefficients.from_json(c.as_json()) == c
    with pytest.raises(ValueError, match="not answerability coefficients"):
        Coefficients.from_json({"threshold": 0.4})


def test_each_source_line_names_its_document_next_to_the_id() -> None:
    hits = [
        Hit("n1", 0.9, "Open  9 to 5.", document_id="d1"),
        Hit("n2", 0.8, "Open 10 to 6.", document_id="d2"),
        Hit("n3", 0.7, "No title known.", document_id="d3"),
    ]
    block = build_sources_block(hits, titles={"d1": "Boulder store (hours)", "d2": "Denver store"})
    assert block.splitlines() == [
        "[Source id=n1] (document: Boulder store [hours]) Open 9 to 5.",
        "[Source id=n2] (document: Denver store) Open 10 to 6.",
        "[Source id=n3] No title known.",
    ]


def test_claude_sees_titles_but_citations_are_still_validated_against_retrieved_ids_only() -> None:
    settings = load_settings({"MIN_SIMILARITY": "0.35", "RETRIEVAL_MODE": "vector"})
    embedder = FakeEmbedder()
    index = FakeVectorIndex(dimension=embedder.dimension)
    text = "The Boulder store opens at nine on weekdays."
    index.upsert([VectorRecord("n-b", embedder.vector_for(text), text, OWNER, "d-b", 0)])

    def titles(owner: str, ids: object) -> dict[str, str]:
        return {"d-b": "Boulder store hours"} if owner == OWNER else {}

    model = FakeChatModel("Nine [source: n-b] [source: n-x]")
    retriever = Retriever(
        embedder,
        index,
        settings,
        policy=READER_POLICY,
        titles=titles,
        answer_titles=True,  # type: ignore[arg-type]
    )
    out = AskService(retriever, Answerer(ModelCaller(model), settings), settings).ask(
        OWNER, "When does the Boulder store open?"
    )
    system = model.requests[0].system
    assert "[Source id=n-b] (document: Boulder store hours) The Boulder store opens" in system
    head, tail = SYSTEM_PROMPT_TEMPLATE.split("{{sources_block}}")
    assert system.startswith(head) and system.endswith(tail)  # the spec's text, unchanged
    assert [s.id for s in out.sources] == ["n-b"]
    assert "[source: n-x]" not in out.answer  # not retrieved: removed, whatever the titles said


def test_borderline_evidence_is_refused_for_claude_when_most_question_words_are_not_the_notes() -> None:
    borderline = _signals(0.33, 0.25)
    p = probability(borderline, MINILM, 0.40)
    assert MINILM.reader_cutoff is not None and MINILM.reader_cutoff <= p < MINILM.cutoff
    unrelated = replace(borderline, unknown_words=1.0)  # "Which bike should I buy for commuting?"
    decision = decide_for(READER_POLICY, unrelated, 0.40, MINILM)
    assert not decision.answer and decision.reason == UNKNOWN_WORDS
    # a paraphrase with some words of its own (2 of 3 unknown to the notes) is still read by Claude
    assert decide_for(READER_POLICY, replace(borderline, unknown_words=2 / 3), 0.40, MINILM).answer
    # above the extractive cutoff nothing changes: the evidence answers in both modes
    strong = replace(_signals(0.6, 0.5), unknown_words=1.0)
    assert decide_for(READER_POLICY, strong, 0.40, MINILM).answer
    assert decide_for(EXTRACTIVE_POLICY, strong, 0.40, MINILM).answer


class ScriptedPassages:
    """Passage similarities as scripted (the calibrated decision's ``passage`` signal)."""

    def __init__(self, similarity: float) -> None:
        self.similarity = similarity

    def similarities(self, query, texts, chunk_ids=(), owners=None):  # type: ignore[no-untyped-def]
        return [self.similarity for _ in texts]


CLUB = {
    "n-rides": "Club rides leave the market square at 8:30 every Sunday morning.",
    "n-helmets": "Helmets are required on all club rides; riders carry a spare inner tube.",
    "n-lights": "Front and rear lights are required on winter evening rides.",
}


def _claude_on_borderline_evidence(**env: str) -> tuple[AskService, FakeChatModel]:
    settings = load_settings({"MIN_SIMILARITY": "0.40", "RETRIEVAL_MODE": "vector", **env})
    embedder = FakeEmbedder()
    index = FakeVectorIndex(dimension=embedder.dimension)
    for note, text in CLUB.items():
        index.upsert([VectorRecord(note, embedder.vector_for(text), text, OWNER, note, 0)])
        index.scores[note] = 0.3
    model = FakeChatModel(lambda r: f"From the notes [source: {r.sources[0].id}]")
    retriever = Retriever(
        embedder,
        index,
        settings,
        policy=READER_POLICY,
        calibration=MINILM,
        passage_vectors=ScriptedPassages(0.33),  # type: ignore[arg-type]
    )
    return AskService(retriever, Answerer(ModelCaller(model), settings), settings), model


def test_claude_is_not_asked_a_borderline_question_whose_words_no_note_uses() -> None:
    ask, model = _claude_on_borderline_evidence()
    out = ask.ask(OWNER, "Which bike should I buy for commuting?")  # bike, buy, commuting: in no note
    assert out.guard_used and out.answer == GUARD_REPLY
    assert model.calls == 0
    # the same borderline evidence for a question in the notes' own words reaches Claude
    out = ask.ask(OWNER, "Which club ride should I join on Sunday?")
    assert not out.guard_used and model.calls == 1


def test_on_s3_vectors_too_the_borderline_question_whose_words_no_note_uses_is_refused() -> None:
    # S3 Vectors searches by keyword as well (queryTexts on an ENHANCED index): the same word check
    ask, model = _claude_on_borderline_evidence(RAGCHAT_VECTOR_INDEX="s3vectors", S3VECTORS_BUCKET="b")
    out = ask.ask(OWNER, "Which bike should I buy for commuting?")
    assert out.guard_used and out.answer == GUARD_REPLY
    assert model.calls == 0
