"""The extractive answerer: a ``ChatModel`` with no LLM behind it (docs/retrieval.md, seed 004).

It answers from the retrieved notes alone: the best sentences of the top qualifying chunks (at most
three), each followed by its ``[source: id]``, then the ``Sources:`` line. Deterministic. Used
locally when no Claude key is configured. With the extractive reader (``READER=on``, docs/reader.md)
the request carries the reader's best span, and the answer is the sentence(s) holding it
(:func:`ragchat.domain.read_answers.reader_answer`).

Given sentence vectors (``relevance_vectors``: unit vectors by text, e.g. the retriever's
``PassageVectors`` cache) and the embedder of the question (``query_embedder``), it picks sentences
by meaning — cosine similarity to the question, BM25 breaking near-ties
(:mod:`ragchat.domain.extractive`). When embedding fails that answer falls back to BM25 alone (a
warning is logged); an answer never fails because of it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol

from ragchat.domain.models import Completion, Hit, ModelRequest

logger = logging.getLogger("ragchat.extractive")

_PIECES = re.compile(r"\S+\s*")
WORDS_PER_DELTA = 6


class TextVectors(Protocol):
    """Similarities of a question's unit vector to texts' vectors, one per text, in order
    (``ragchat.services.retrieval.PassageVectors``); ``chunk_ids``: the chunks the texts come from
    (where precomputed vectors are looked up); ``owners``: gives the chunk each text comes from (where
    a text embedded on the question is stored; called only when one is)."""

    def similarities(
        self,
        query: Sequence[float],
        texts: Sequence[str],
        chunk_ids: Sequence[str] = (),
        owners: Callable[[], Mapping[str, str]] | None = None,
    ) -> list[float]: ...


class QueryEmbedder(Protocol):
    """The part of the ``Embedder`` port that embeds a question (a unit vector)."""

    def embed_query(self, text: str) -> list[float]: ...


class ExtractiveChatModel:
    model_id = "extractive"

    def __init__(
        self, relevance_vectors: TextVectors | None = None, *, query_embedder: QueryEmbedder | None = None
    ) -> None:
        if (relevance_vectors is None) != (query_embedder is None):
            raise ValueError("relevance_vectors and query_embedder go together")
        self.relevance_vectors = relevance_vectors
        self.query_embedder = query_embedder

    def complete(self, request: ModelRequest) -> Completion:
        from ragchat.domain.extractive import extractive_answer

        if request.found is not None:  # READER=on: the sentence(s) holding the reader's span
            from ragchat.domain.read_answers import Found, reader_answer

            assert isinstance(request.found, Found)
            return Completion(text=reader_answer(request.found), model=self.model_id)
        question, hits, titles = request.question, request.sources, request.source_titles or {}
        if self.relevance_vectors is not None:
            try:
                relevance = self._relevance(question, request.question_vector, hits, titles)
                text = extractive_answer(question, hits, relevance=relevance, titles=titles)
                return Completion(text=text, model=self.model_id)
            except Exception as exc:  # by meaning is a refinement: BM25 still answers
                reason = f"{type(exc).__name__}: {exc}"
                logger.warning("extractive: sentence relevance failed (%s); BM25 only", reason)
        return Completion(text=extractive_answer(question, hits), model=self.model_id)

    def _relevance(
        self, question: str, vector: list[float] | None, hits: Sequence[Hit], titles: Mapping[str, str]
    ) -> _Relevance:
        from ragchat.domain.extractive import relevance_texts

        assert self.relevance_vectors is not None and self.query_embedder is not None

        def owners() -> dict[str, str]:  # the first hit a sentence comes from
            found: dict[str, str] = {}
            for hit in hits:
                for text in relevance_texts(hit.text, titles.get(hit.document_id or "")):
                    found.setdefault(text, hit.id)
            return found

        chunk_ids = [h.id for h in hits]
        return _Relevance(question, vector, self.relevance_vectors, self.query_embedder, chunk_ids, owners)

    def stream(self, request: ModelRequest) -> Iterator[str]:
        """The same answer, in deltas of a few words (their concatenation is the answer)."""
        text = self.complete(request).text
        pieces = _PIECES.findall(text)
        lead = text[: len(text) - len(text.lstrip())]
        if lead:
            yield lead
        for i in range(0, len(pieces), WORDS_PER_DELTA):
            yield "".join(pieces[i : i + WORDS_PER_DELTA])


class _Relevance:
    """Cosine similarity of each sentence to the question (dot product of unit vectors). The
    question's vector is retrieval's when the request carries it; otherwise the question is embedded,
    and only when sentences are scored (an answer without sentences embeds nothing)."""

    def __init__(
        self,
        question: str,
        vector: list[float] | None,
        vectors: TextVectors,
        embedder: QueryEmbedder,
        chunk_ids: list[str],
        owners: Callable[[], Mapping[str, str]],
    ) -> None:
        self._question = question
        self._query = vector
        self._vectors = vectors
        self._embedder = embedder
        self._chunk_ids = chunk_ids
        self._owners = owners

    def __call__(self, sentences: list[str]) -> list[float]:
        query = self._query if self._query is not None else self._embedder.embed_query(self._question)
        return self._vectors.similarities(query, sentences, self._chunk_ids, self._owners)
