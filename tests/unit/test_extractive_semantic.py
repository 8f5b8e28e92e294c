"""The extractive answerer by meaning: a question in the user's own words quotes (and cites) the
sentence that means it, not one that merely shares a word with it; BM25 still breaks near-ties."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path

import pytest
from ragchat.adapters.local.extractive import ExtractiveChatModel
from ragchat.domain.citations import CITATION_RE, validate_citations
from ragchat.domain.extractive import (
    LEXICAL_WEIGHT,
    RELATIVE_MARGIN,
    Relevance,
    extractive_answer,
    relevance_texts,
)
from ragchat.domain.models import ChatTurn, Hit, ModelRequest
from ragchat.services.answering import Answerer
from ragchat.services.model_calls import ModelCaller
from ragchat.services.retrieval import PassageVectors

from tests.fakes import FakeEmbedder

REPO = Path(__file__).resolve().parents[2]

IT_SENTENCE = "Broken equipment at your desk is reported to the IT help desk."
ALLOWANCE = "Staff working from home receive a home-office allowance of 300 euros per year."
QUESTION = "Is there money to buy equipment for my home desk?"
HITS = [
    Hit(
        id="it-support-00000",
        score=0.61,
        document_id="it-support",
        text=f"{IT_SENTENCE} The help desk answers within one working day.",
    ),
    Hit(
        id="expense-policy-00000",
        score=0.58,
        document_id="expense-policy",
        text=f"{ALLOWANCE} Claims are filed in the expense tool.",
    ),
]
IDS = [h.id for h in HITS]


def scores(table: Mapping[str, float], default: float = 0.1) -> Relevance:
    """A fake relevance: each sentence's similarity from ``table`` (``default`` otherwise). The
    answerer reads a sentence with the one before it, so a text scores as the sentence it ends with."""
    return lambda texts: [next((v for k, v in table.items() if t.endswith(k)), default) for t in texts]


def body_and_sources(answer: str) -> tuple[str, str]:
    body, _, sources = answer.rpartition("\n\n")
    return body, sources


# ----------------------------------------------------------------------------------- the domain
def test_by_words_a_shared_word_quotes_the_wrong_document() -> None:
    body, sources = body_and_sources(extractive_answer(QUESTION, HITS, max_sentences=1))
    assert body == f"{IT_SENTENCE} [source: it-support-00000]" and sources == "Sources: it-support-00000"


def test_by_meaning_the_paraphrased_question_cites_the_document_that_answers_it() -> None:
    relevance = scores({ALLOWANCE: 0.62, IT_SENTENCE: 0.30})
    answer = extractive_answer(QUESTION, HITS, relevance=relevance)
    body, sources = body_and_sources(answer)
    assert body == f"{ALLOWANCE} [source: expense-policy-00000]"
    assert sources == "Sources: expense-policy-00000"  # the IT sentence is far below the margin


def test_a_second_document_is_cited_only_when_it_clears_the_margin() -> None:
    # The IT sentence has the most BM25, so it scores similarity + LEXICAL_WEIGHT; the allowance
    # sentence 0.62 plus at most LEXICAL_WEIGHT (it shares only "home").
    close = 0.62 - RELATIVE_MARGIN + 0.01  # within the margin whatever the allowance's BM25
    far = 0.62 - RELATIVE_MARGIN - LEXICAL_WEIGHT - 0.01  # below it whatever the allowance's BM25
    near = extractive_answer(QUESTION, HITS, relevance=scores({ALLOWANCE: 0.62, IT_SENTENCE: close}))
    assert body_and_sources(near)[1] == "Sources: it-support-00000, expense-policy-00000"
    distant = extractive_answer(QUESTION, HITS, relevance=scores({ALLOWANCE: 0.62, IT_SENTENCE: far}))
    assert body_and_sources(distant)[1] == "Sources: expense-policy-00000"


def test_bm25_breaks_a_near_tie_the_exact_error_code_wins() -> None:
    exact = "Error E1042 means the disk of the build agent is full."
    vague = "Error messages of the build agent are listed in the appendix."
    hits = [  # the vague sentence is in the better-ranked note
        Hit(id="errors-00000", score=0.7, text=vague, document_id="errors"),
        Hit(id="agent-00000", score=0.6, text=exact, document_id="agent"),
    ]
    answer = extractive_answer(
        "What does error E1042 mean?", hits, max_sentences=1, relevance=scores({exact: 0.5, vague: 0.5})
    )
    assert answer == f"{exact} [source: agent-00000]\n\nSources: agent-00000"


def test_a_question_sharing_no_word_is_still_answered_by_meaning() -> None:
    pets = "Pets are welcome in the office on Fridays."
    hits = [Hit(id="office-00000", score=0.6, text=f"Work starts at nine. {pets}")]
    answer = extractive_answer("Can I bring a dog along?", hits, relevance=scores({pets: 0.52}, 0.2))
    assert answer == f"{pets} [source: office-00000]\n\nSources: office-00000"


def test_by_meaning_output_passes_citation_validation_unchanged() -> None:
    relevance = scores({ALLOWANCE: 0.62, IT_SENTENCE: 0.6}, default=0.58)
    for question in [QUESTION, "help desk hours", "unrelated zebra question"]:
        answer = extractive_answer(question, HITS, relevance=relevance)
        result = validate_citations(answer, IDS)
        assert result.text == answer and result.removed == [] and result.valid_ids
        assert 1 <= len(CITATION_RE.findall(body_and_sources(answer)[0])) <= 3


def test_by_meaning_keeps_reading_order_and_skips_near_duplicates() -> None:
    approve = "First the refund is approved by a manager."
    paid = "Then the refund is paid to the card."
    hits = [  # retrieval ranked the second chunk first; the first chunk repeats itself
        Hit(id="doc-00001", score=0.9, text=f"{paid} Shops close at six.", document_id="doc", chunk_index=1),
        Hit(id="doc-00000", score=0.8, text=f"{approve} {approve}", document_id="doc", chunk_index=0),
        Hit(id="other-00000", score=0.7, text=f"{approve.upper()}", document_id="other"),
    ]
    relevance = scores({paid: 0.70, approve: 0.66, approve.upper(): 0.66})
    answer = extractive_answer("How do I get my money back?", hits, relevance=relevance)
    body, sources = body_and_sources(answer)
    assert body == f"{approve} [source: doc-00000] {paid} [source: doc-00001]"
    assert sources == "Sources: doc-00000, doc-00001"


def test_a_relevance_giving_the_wrong_number_of_scores_is_an_error() -> None:
    with pytest.raises(ValueError, match="scores"):
        extractive_answer(QUESTION, HITS, relevance=lambda sentences: [0.5])


# ----------------------------------------------------------------------------------- the model
def _request(question: str = QUESTION, hits: list[Hit] | None = None) -> ModelRequest:
    hits = HITS if hits is None else hits
    return ModelRequest(system="", messages=[ChatTurn("user", question)], sources=hits, question=question)


def test_the_model_scores_sentences_with_the_shared_vectors_and_one_question_embedding() -> None:
    embedder = FakeEmbedder(dimension=3)
    embedder.vectors = {
        QUESTION: [1.0, 0.0, 0.0],
        ALLOWANCE: [0.8, 0.6, 0.0],  # cosine 0.8
        IT_SENTENCE: [0.0, 0.0, 1.0],  # cosine 0
        "The help desk answers within one working day.": [0.0, 1.0, 0.0],
        "Claims are filed in the expense tool.": [0.3, 0.0, 1.0],
    }
    vectors = PassageVectors(embedder)
    model = ExtractiveChatModel(vectors, query_embedder=embedder)
    text = model.complete(_request()).text
    assert text.startswith(f"{ALLOWANCE} [source: expense-policy-00000]") and "it-support" not in text
    assert embedder.query_calls == 1 and embedder.document_calls == 1
    assert "".join(model.stream(_request())) == text
    assert embedder.document_calls == 1  # the sentences came from the cache the second time


def test_no_sources_embed_nothing() -> None:
    embedder = FakeEmbedder()
    model = ExtractiveChatModel(PassageVectors(embedder), query_embedder=embedder)
    model.complete(_request(hits=[]))
    assert embedder.calls == 0


def test_embedding_failing_falls_back_to_bm25_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    embedder = FakeEmbedder()
    embedder.fail_with = RuntimeError("model file unreadable")
    model = ExtractiveChatModel(PassageVectors(embedder), query_embedder=embedder)
    with caplog.at_level(logging.WARNING, logger="ragchat.extractive"):
        completion = model.complete(_request())
    assert completion.text == extractive_answer(QUESTION, HITS)
    assert "model file unreadable" in caplog.text and "BM25" in caplog.text


def test_vectors_and_question_embedder_go_together() -> None:
    with pytest.raises(ValueError, match="together"):
        ExtractiveChatModel(PassageVectors(FakeEmbedder()))


# ------------------------------------------------------------------------- the real MiniLM model
def _models_path() -> Path | None:
    from ragchat.adapters.local.onnx_embedder import model_dir
    from ragchat.config import load_settings

    candidates = []
    with contextlib.suppress(Exception):  # an unrelated bad variable: fall back to the repo cache
        candidates.append(load_settings().models_path)
    candidates.append(REPO / ".ragchat" / "models")
    return next((p for p in candidates if (model_dir(p) / "model.onnx").is_file()), None)


MODELS = _models_path()


@pytest.mark.skipif(MODELS is None, reason="MiniLM ONNX model not prepared: run `make model`")
def test_with_minilm_a_question_in_other_words_cites_the_right_document() -> None:
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

    assert MODELS is not None
    office = Hit(  # ranked first, and shares "work" and "bring" with the question
        id="office-guide-00000",
        score=0.6,
        document_id="office-guide",
        text="Work starts at nine. The kitchen is on the second floor; bring your own mug.",
    )
    pets = Hit(
        id="pet-policy-00000",
        score=0.55,
        document_id="pet-policy",
        text="Pets are welcome in the office on Fridays. Animals must stay on a leash in shared areas.",
    )
    request = _request("Can I bring my dog to work?", [office, pets])
    by_words = ExtractiveChatModel().complete(request).text
    assert by_words.endswith("Sources: office-guide-00000")

    embedder = OnnxMiniLMEmbedder.from_cache(MODELS, threads=1)
    by_meaning = ExtractiveChatModel(PassageVectors(embedder), query_embedder=embedder).complete(request).text
    assert by_meaning.startswith("Pets are welcome in the office on Fridays. [source: pet-policy-00000]")
    assert by_meaning.endswith("Sources: pet-policy-00000")


def test_an_answer_compares_a_bounded_number_of_sentences_by_meaning() -> None:
    from ragchat.domain.extractive import MAX_SCORED_SENTENCES

    # ten notes of five sentences each; the question shares a word only with the last note
    hits = [
        Hit(
            id=f"n{i}",
            score=0.9 - i / 100,
            document_id=f"d{i}",
            text=" ".join(f"Note {i} says thing number {j}." for j in range(5)),
        )
        for i in range(9)
    ]
    hits.append(Hit(id="n9", score=0.5, document_id="d9", text="Parking permits are issued by reception."))
    seen: list[list[str]] = []

    def relevance(sentences: list[str]) -> list[float]:
        seen.append(sentences)
        return [0.9 if "Parking" in s else 0.2 for s in sentences]

    answer = extractive_answer("Where do I get a parking permit?", hits, relevance=relevance)
    [texts] = seen
    sentences, in_context = texts[:MAX_SCORED_SENTENCES], texts[MAX_SCORED_SENTENCES:]
    assert len(sentences) == MAX_SCORED_SENTENCES < 46  # a bounded number
    assert sentences[0] == "Parking permits are issued by reception."  # the word match is compared first
    assert sentences[1:4] == [f"Note 0 says thing number {j}." for j in range(3)]  # then retrieval order
    assert in_context == []  # no sentence here refers back to the one before it
    assert "[source: n9]" in answer


def test_a_sentence_is_read_with_the_one_before_it() -> None:
    named = "The lighthouse of Alexandria stood on the island of Pharos."
    height = "It was about one hundred metres tall."
    hits = [Hit(id="pharos-00000", score=0.7, text=f"{named} {height} Ships used it at night.")]
    seen: list[str] = []

    def relevance(texts: list[str]) -> list[float]:  # only the height, in context, answers
        seen.extend(texts)
        return [
            0.8 if "Alexandria" in t and "tall" in t else 0.75 if "Alexandria" in t else 0.1 for t in texts
        ]

    answer = extractive_answer("How tall was the lighthouse of Alexandria?", hits, relevance=relevance)
    assert f"{named} {height}" in seen  # "It was … tall" alone names nothing
    assert height in body_and_sources(answer)[0]


def test_a_request_carrying_the_question_vector_does_not_embed_the_question_again() -> None:
    embedder = FakeEmbedder()
    model = ExtractiveChatModel(PassageVectors(embedder), query_embedder=embedder)
    request = _request()
    request.question_vector = embedder.vector_for("home office allowance money")
    model.complete(request)
    assert embedder.query_calls == 0 and QUESTION not in embedder.embedded_texts


def test_a_question_asked_by_meaning_is_embedded_once() -> None:
    from ragchat.config import load_settings
    from ragchat.domain.models import VectorRecord
    from ragchat.services.answering import AskService
    from ragchat.services.retrieval import Retriever

    from tests.fakes import FakeVectorIndex

    embedder = FakeEmbedder()
    index = FakeVectorIndex(dimension=embedder.dimension)
    for hit in HITS:
        index.upsert(
            [VectorRecord(hit.id, embedder.vector_for(hit.text), hit.text, "alice", hit.document_id, 0)]
        )
    settings = load_settings({"RETRIEVAL_MODE": "vector", "MIN_SIMILARITY": "-1"})
    vectors = PassageVectors(embedder)
    retriever = Retriever(embedder, index, settings, passage_vectors=vectors)
    model = ExtractiveChatModel(vectors, query_embedder=embedder)
    ask = AskService(retriever, Answerer(ModelCaller(model), settings), settings)
    result = ask.ask("alice", "home desk equipment money")
    assert not result.guard_used and result.sources
    assert embedder.query_calls == 1  # retrieval's vector served the answerer too


def test_a_table_row_is_compared_by_meaning_with_its_documents_title() -> None:
    # a row names neither the place nor what its numbers belong to; the introduction that names
    # the place won "How much is three hours of parking at St Anne's?" before
    hits = [
        Hit(
            id="parking-00000",
            score=0.8,
            document_id="doc-parking",
            text=(
                "St Anne's Hospital has three car parks.\n\n| Length of stay | Charge |\n|---|---|\n"
                "| Up to 4 hours | 6 pounds |\n| All day | 12 pounds |"
            ),
        )
    ]
    seen: list[str] = []

    def relevance(texts: list[str]) -> list[float]:
        seen.extend(texts)
        titled_row = "St Anne's parking: Length of stay: Up to 4 hours"
        return [0.7 if t.startswith(titled_row) else 0.4 for t in texts]

    body, _ = body_and_sources(
        extractive_answer(
            "How much is three hours of parking at St Anne's?",
            hits,
            relevance=relevance,
            titles={"doc-parking": "St Anne's parking.md"},
        )
    )
    assert body.startswith("Length of stay: Up to 4 hours; Charge: 6 pounds [source: parking-00000]")
    assert "St Anne's Hospital has three car parks." in seen  # prose is compared as it is
    # without the titles the row is compared bare, and the introduction wins on shared words
    question = "How much is three hours of parking at St Anne's?"
    untitled = extractive_answer(question, hits, relevance=relevance)
    assert untitled.startswith("St Anne's Hospital has three car parks.")
    assert relevance_texts(hits[0].text, "St Anne's parking.md") == [
        "St Anne's Hospital has three car parks.",
        "St Anne's parking: Length of stay: Up to 4 hours; Charge: 6 pounds",
        "St Anne's parking: Length of stay: All day; Charge: 12 pounds",
    ]
