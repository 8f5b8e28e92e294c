"""In-memory ``Embedder`` (hashed bag of words) and ``VectorIndex`` (exact cosine, RRF hybrid); the index
is registered in the vector index contract suite."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import threading
from collections.abc import Sequence

from ragchat.domain.errors import TransientError
from ragchat.domain.models import (
    Hit,
    SearchFilter,
    VectorRecord,
)

_WORD = re.compile(r"[A-Za-z0-9]+")


# ------------------------------------------------------------------------------------------- embedder
def unit(vector: Sequence[float]) -> list[float]:
    """Scale to unit length (zero vectors stay zero)."""
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [0.0 for _ in vector]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if not na or not nb:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=False)) / (na * nb)


class FakeEmbedder:
    """Deterministic bag-of-words embedder: each lower-cased word is hashed to a dimension, so texts
    sharing words are similar and identical texts have similarity 1.0.

    Knobs: ``vectors`` maps an exact text to a fixed vector (normalised); ``fail_with`` is raised by
    every call while set; ``calls``/``query_calls``/``document_calls`` count calls;
    ``embedded_texts`` records what was embedded."""

    def __init__(self, dimension: int = 64, model_id: str = "fake-embedder") -> None:
        self.dimension = dimension
        self.model_id = model_id
        self.vectors: dict[str, list[float]] = {}
        self.fail_with: BaseException | None = None
        self.query_calls = 0
        self.document_calls = 0
        self.embedded_texts: list[str] = []

    @property
    def calls(self) -> int:
        return self.query_calls + self.document_calls

    def vector_for(self, text: str) -> list[float]:
        if text in self.vectors:
            return unit(self.vectors[text])
        vec = [0.0] * self.dimension
        for word in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            vec[h % self.dimension] += 1.0
        if not any(vec):
            vec[0] = 1.0
        return unit(vec)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.document_calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        self.embedded_texts.extend(texts)
        return [self.vector_for(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        self.embedded_texts.append(text)
        return self.vector_for(text)


# --------------------------------------------------------------------------------------- vector index
class FakeVectorIndex:
    """``VectorIndex`` in memory: exact cosine search; ``hybrid_search`` fuses a word-overlap keyword
    ranking with the vector ranking by reciprocal rank fusion (k=60).

    Knobs: ``fail_searches`` — number of upcoming ``search``/``hybrid_search`` calls that raise
    ``TransientError``; ``search_calls`` records ``(k, filter)`` per call; ``hybrid_calls`` counts
    hybrid searches; ``scores`` overrides the score of given ids (to script exact similarities)."""

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension
        self.records: dict[str, VectorRecord] = {}
        self.fail_searches = 0
        self.search_calls: list[tuple[int, SearchFilter]] = []
        self.hybrid_calls = 0
        self.scores: dict[str, float] = {}
        self._lock = threading.RLock()

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        with self._lock:
            for r in records:  # all or nothing: check every vector before storing any
                if len(r.vector) != self.dimension:
                    raise ValueError(
                        f"vector {r.id} has dimension {len(r.vector)}, expected {self.dimension}"
                    )
            for r in records:
                self.records[r.id] = dataclasses.replace(r, vector=list(r.vector))

    def _candidates(self, flt: SearchFilter) -> list[VectorRecord]:
        return [
            r
            for r in self.records.values()
            if r.owner in flt.partitions
            and r.enabled
            and (flt.collection is None or r.collection == flt.collection)
            and (flt.document_id is None or r.document_id == flt.document_id)
        ]

    def _check_query(self, vector: Sequence[float]) -> None:
        if len(vector) != self.dimension:
            raise ValueError(f"query vector has dimension {len(vector)}, expected {self.dimension}")

    def _maybe_fail(self) -> None:
        if self.fail_searches > 0:
            self.fail_searches -= 1
            raise TransientError("vector index temporarily unavailable")

    @staticmethod
    def _hit(r: VectorRecord, score: float, similarity: float) -> Hit:
        return Hit(
            id=r.id,
            score=score,
            text=r.text,
            document_id=r.document_id,
            chunk_index=r.chunk_index,
            collection=r.collection,
            similarity=similarity,
            owner=r.owner,
        )

    def _similarity(self, vector: Sequence[float], r: VectorRecord) -> float:
        return self.scores.get(r.id, _cosine(vector, r.vector))

    def _vector_ranked(self, vector: Sequence[float], flt: SearchFilter) -> list[Hit]:
        hits = []
        for r in self._candidates(flt):
            sim = self._similarity(vector, r)
            hits.append(self._hit(r, sim, sim))
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits

    def search(self, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        with self._lock:
            self.search_calls.append((k, flt))
            self._maybe_fail()
            self._check_query(vector)
            return self._vector_ranked(vector, flt)[:k]

    def hybrid_search(self, text: str, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        with self._lock:
            self.search_calls.append((k, flt))
            self.hybrid_calls += 1
            self._maybe_fail()
            self._check_query(vector)
            vec = self._vector_ranked(vector, flt)
            words = set(_WORD.findall(text.lower()))
            kw = [(len(words & set(_WORD.findall(r.text.lower()))), r) for r in self._candidates(flt)]
            kw = [(s, r) for s, r in kw if s > 0]
            kw.sort(key=lambda sr: (-sr[0], sr[1].id))
            fused: dict[str, float] = {}
            for rank, h in enumerate(vec):
                fused[h.id] = fused.get(h.id, 0.0) + 1.0 / (60 + rank + 1)
            for rank, (_, r) in enumerate(kw):
                fused[r.id] = fused.get(r.id, 0.0) + 1.0 / (60 + rank + 1)
            out = [
                self._hit(self.records[i], s, self._similarity(vector, self.records[i]))
                for i, s in fused.items()
            ]
            out.sort(key=lambda h: (-h.score, h.id))
            return out[:k]

    def delete(self, ids: Sequence[str], *, settled: bool = False) -> None:
        with self._lock:
            for i in ids:
                self.records.pop(i, None)

    def delete_document(self, owner: str, document_id: str, *, tags: Sequence[str] = ()) -> int:
        with self._lock:
            ids = [r.id for r in self.records.values() if r.owner == owner and r.document_id == document_id]
            for i in ids:
                del self.records[i]
            return len(ids)

    def set_enabled(
        self,
        owner: str,
        document_id: str,
        enabled: bool,
        *,
        chunk_count: int | None = None,
        tags: Sequence[str] = (),
        chunks: tuple[int, int] | None = None,
    ) -> None:
        lo, hi = chunks if chunks is not None else (0, None)
        with self._lock:
            for r in self.records.values():
                in_range = r.chunk_index >= lo and (hi is None or r.chunk_index < hi)
                if r.owner == owner and r.document_id == document_id and in_range:
                    r.enabled = enabled

    def count(self, owner: str) -> int:
        with self._lock:
            return sum(1 for r in self.records.values() if r.owner == owner and r.enabled)
