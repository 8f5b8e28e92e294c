"""The answerability decision's passage embeddings are remembered by text: the same vectors as the
embedder gives, but a passage is embedded once while it stays in the bounded cache."""

from __future__ import annotations

from collections.abc import Sequence

from ragchat.services.retrieval import PassageVectors


class CountingEmbedder:
    model_id = "counting"
    dimension = 2

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [[float(len(t)), float(sum(map(ord, t)) % 97)] for t in texts]


def test_a_passage_is_embedded_once_and_gets_the_same_vector() -> None:
    embedder = CountingEmbedder()
    vectors = PassageVectors(embedder)  # type: ignore[arg-type]
    first = vectors(["alpha beta", "gamma"])
    again = vectors(["gamma", "alpha beta", "delta"])
    assert first == embedder.embed_documents(["alpha beta", "gamma"])
    assert again == [first[1], first[0], embedder.embed_documents(["delta"])[0]]
    # what the cache itself asked for: each passage once (the asserts above embed again on purpose)
    assert embedder.embedded[:3] == ["alpha beta", "gamma", "delta"]


def test_the_cache_is_bounded_least_recently_used_first() -> None:
    embedder = CountingEmbedder()
    vectors = PassageVectors(embedder, size=2)  # type: ignore[arg-type]
    vectors(["a", "b"])
    vectors(["a"])  # a is now the most recently used
    vectors(["c"])  # b leaves
    embedder.embedded.clear()
    vectors(["a", "c", "b"])
    assert embedder.embedded == ["b"]


def test_a_repeated_passage_in_one_call_is_embedded_once() -> None:
    embedder = CountingEmbedder()
    out = PassageVectors(embedder)(["x y", "x y"])  # type: ignore[arg-type]
    assert embedder.embedded == ["x y"] and out[0] == out[1]
