"""Evidence vectors embedded after ingestion, so a question embeds only itself.

With the defaults a question reads more than its hits' vectors: the calibrated decision embeds the
top chunks' title-prefixed two-sentence passages (``ragchat.domain.answerability``) and the answer by
meaning embeds the hits' sentences (``ragchat.domain.extractive``). Done at question time that is
~340 ms of MiniLM per SciFact question on 2 cores whenever the chunks are new (bench/results/). Both
depend only on a chunk's text and its document's title, so once a document is READY the local
ingestion worker embeds them when it has nothing else to do (:class:`EvidenceWarmer`, a document at a
time, in batches, yielding to new uploads) and keeps them in the ``EvidenceStore``, read by chunk at
question time (:class:`~ragchat.services.retrieval.PassageVectors`). A question that reaches a
chunk not warmed yet (its document just READY, or renamed) embeds the missing texts itself and stores
them under the chunk, as ``on_demand`` does below: an answer at READY is the answer once warmed (no
top-1-and-words fallback while evidence is missing; that rule is kept only for
``ANSWERABILITY=similarity``, which reads no evidence).

A document of at most ``EVIDENCE_INLINE_CHUNKS`` chunks (a note, a short file) gets its evidence
in its own ingestion call, before READY (:class:`InlineEvidence`): its first question embeds only itself.

With ``EVIDENCE_WARMING=on_demand`` there is no warmer: nothing is embedded for chunks nobody asks
about. A question embeds the missing texts of the chunks it reaches and stores them under their chunk
(:class:`~ragchat.services.retrieval.PassageVectors`, ``owners``), then answers with them as stored,
the vectors a warmed chunk gives; the next question on those chunks embeds only itself.

With ``EVIDENCE_VECTORS=pooled_sentences`` (or ``pooled``) the sentences (and the passages) are not
embedded one by one: :class:`IngestEvidence` pools them from the chunk's own model pass during
ingestion (``ragchat.adapters.local.span_vectors``) and stores them before READY; the warmer then
embeds only what is left (the passages, texts past the chunk's truncation).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.answerability import evidence_passages
from ragchat.domain.citations import strip_citations
from ragchat.domain.context import embedding_text, title_words
from ragchat.domain.extractive import relevance_texts
from ragchat.domain.models import DocumentStatus

if TYPE_CHECKING:
    from ragchat.domain.models import Note
    from ragchat.ports import DocumentStore, Embedder, EvidenceStore

logger = Logger(service="ragchat", child=True)

#: texts per embedder call (the worker checks for new uploads between calls)
WARM_BATCH = 128
#: chunks per pooled model call (``EVIDENCE_VECTORS=pooled``)
POOL_CHUNKS = 16

#: ``[(chunk's text as embedded, [evidence texts])] → per chunk, per text: its pooled vector or None``
Pool = Callable[[list[tuple[str, list[str]]]], list[list[list[float] | None]]]
#: the same, with each chunk's own vector from that pass: ``→ [(chunk vector, [pooled or None])]``
PoolPass = Callable[[list[tuple[str, list[str]]]], list[tuple[list[float], list[list[float] | None]]]]
#: pooled evidence kept between a batch's model pass and its notes' write (entries, by chunk text)
_PENDING = 4096
_NOTES_PAGE = 100


def chunk_evidence_texts(text: str, title: str | None, *, passages: bool, sentences: bool) -> list[str]:
    """What a question may embed for a chunk of ``text`` in a document titled ``title``: the
    decision's passages and the answer's sentences, each once, in order."""
    plain = strip_citations(text)
    out: list[str] = []
    if passages:
        out += evidence_passages([plain], limit=1 << 30, titles=[title])
    if sentences:
        out += relevance_texts(text, title)
    return list(dict.fromkeys(out))


class EvidenceWarmer:
    """Embeds and stores a READY document's evidence texts (``passages``: the decision's, needed when
    the embedding model is calibrated; ``sentences``: the answer by meaning's)."""

    def __init__(
        self,
        documents: DocumentStore,
        store: EvidenceStore,
        embedder: Embedder,
        *,
        passages: bool,
        sentences: bool,
        batch: int = WARM_BATCH,
        pool: Pool | None = None,
    ) -> None:
        """``pool``: evidence vectors pooled from one model pass over each chunk
        (``EVIDENCE_VECTORS=pooled``); the texts it cannot pool are embedded alone."""
        self.documents = documents
        self.store = store
        self.embedder = embedder
        self.passages = passages
        self.sentences = sentences
        self.batch = max(1, int(batch))
        self.pool = pool

    def pending(self) -> list[tuple[str, str]]:
        """Documents to warm (READY without current evidence): for a server that starts."""
        return self.store.unwarmed() if (self.passages or self.sentences) else []

    def __call__(
        self, owner: str, document_id: str, should_yield: Callable[[], bool] = lambda: False
    ) -> bool:
        """Warm one document; ``False`` when it stopped early because ``should_yield()`` said so
        (call again later: what is stored stays). A document gone or not READY is done."""
        doc = self.documents.get_document(owner, document_id)
        if doc is None or doc.status != DocumentStatus.READY or not (self.passages or self.sentences):
            return True
        started, embedded = time.perf_counter(), 0
        cursor: str | None = None
        while True:
            page = self.documents.list_notes(owner, document_id=document_id, limit=_NOTES_PAGE, cursor=cursor)
            embedded += self._warm_notes(page.items, doc.title, should_yield)
            if should_yield():
                return False
            cursor = page.cursor
            if not cursor:
                break
        self.store.mark(owner, document_id, doc.version, doc.title)
        logger.info(
            "evidence.warmed",
            extra={
                "documentId": document_id,
                "texts": embedded,
                "ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )
        return True

    def _warm_notes(self, notes: list[Note], title: str, should_yield: Callable[[], bool]) -> int:
        """Embed and store the notes' texts not stored yet; returns how many were embedded."""
        wanted = {
            n.id: chunk_evidence_texts(n.text, title, passages=self.passages, sentences=self.sentences)
            for n in notes
        }
        known = self.store.vectors_of(list(wanted), [t for texts in wanted.values() for t in texts])
        missing = [(chunk, t) for chunk, texts in wanted.items() for t in texts if t not in known]
        if self.pool is not None:
            return self._pool_notes(notes, title, missing, should_yield)
        embedded = 0
        for start in range(0, len(missing), self.batch):
            part = missing[start : start + self.batch]
            texts = list(dict.fromkeys(t for _, t in part))  # a text two chunks share: embedded once
            vectors = dict(zip(texts, self.embedder.embed_documents(texts), strict=True))
            embedded += len(texts)
            rows: dict[str, list[tuple[str, list[float]]]] = {}
            for chunk, text in part:
                rows.setdefault(chunk, []).append((text, vectors[text]))
            self.store.put(rows)
            if should_yield() and start + self.batch < len(missing):
                break
        return embedded

    def _pool_notes(
        self,
        notes: list[Note],
        title: str,
        missing: list[tuple[str, str]],
        should_yield: Callable[[], bool],
    ) -> int:
        """``missing`` pooled from one pass over each chunk (``POOL_CHUNKS`` chunks per call); the
        texts that cannot be pooled are embedded alone. Returns how many model inputs were run."""
        assert self.pool is not None
        by_chunk: dict[str, list[str]] = {}
        for chunk, text in missing:
            by_chunk.setdefault(chunk, []).append(text)
        texts_of = {n.id: n.text for n in notes}
        chunks = [c for c in by_chunk if c in texts_of]
        header = title_words(title)
        ran = 0
        for start in range(0, len(chunks), POOL_CHUNKS):
            part = chunks[start : start + POOL_CHUNKS]
            pooled = self.pool([(embedding_text(header, texts_of[c]), by_chunk[c]) for c in part])
            ran += len(part)
            rows: dict[str, list[tuple[str, list[float]]]] = {}
            alone: list[tuple[str, str]] = []
            for chunk, vectors in zip(part, pooled, strict=True):
                for text, vector in zip(by_chunk[chunk], vectors, strict=True):
                    if vector is None:
                        alone.append((chunk, text))
                    else:
                        rows.setdefault(chunk, []).append((text, vector))
            if alone:
                unique = list(dict.fromkeys(t for _, t in alone))
                vectors_alone = dict(zip(unique, self.embedder.embed_documents(unique), strict=True))
                ran += len(unique)
                for chunk, text in alone:
                    rows.setdefault(chunk, []).append((text, vectors_alone[text]))
            self.store.put(rows)
            if should_yield() and start + POOL_CHUNKS < len(chunks):
                break
        return ran


class _HeldEvidence:
    """Evidence vectors made in a batch's model pass, held by chunk text until :meth:`put` stores
    them under the notes written for those chunks."""

    def __init__(self, store: EvidenceStore, *, passages: bool, sentences: bool) -> None:
        self.store = store
        self.passages = passages
        self.sentences = sentences
        self._pending: OrderedDict[str, list[tuple[str, list[float]]]] = OrderedDict()
        self._lock = threading.Lock()

    def _wanted(self, chunk_texts: Sequence[str], titles: Sequence[str]) -> list[list[str]]:
        return [
            chunk_evidence_texts(text, title, passages=self.passages, sentences=self.sentences)
            for text, title in zip(chunk_texts, titles, strict=True)
        ]

    def _hold(self, text: str, vectors: list[tuple[str, list[float]]]) -> None:
        with self._lock:
            self._pending[text] = vectors
            self._pending.move_to_end(text)
            while len(self._pending) > _PENDING:  # a batch that failed before its write
                self._pending.popitem(last=False)

    def put(self, note_ids: Sequence[str], texts: Sequence[str]) -> None:
        """Store the evidence of the chunks just written (``texts``: as embedded)."""
        rows: dict[str, list[tuple[str, list[float]]]] = {}
        with self._lock:
            for note_id, text in zip(note_ids, texts, strict=True):
                found = self._pending.pop(text, None)
                if found:
                    rows[note_id] = found
        if rows:
            self.store.put(rows)


class IngestEvidence(_HeldEvidence):
    """Evidence vectors pooled from the ingestion's own model pass (``EVIDENCE_VECTORS=pooled``,
    local): the pass that embeds a batch's chunks also gives their passages' and sentences' vectors,
    which are stored with the chunks' vectors, before the document is READY. The texts that cannot
    be pooled (past the chunk's 256-token truncation) are left to :class:`EvidenceWarmer`, after
    READY: embedding them here would delay READY."""

    def __init__(self, pool: PoolPass, store: EvidenceStore, *, passages: bool, sentences: bool) -> None:
        super().__init__(store, passages=passages, sentences=sentences)
        self.pool = pool

    def embed(
        self,
        texts: list[str],
        chunk_texts: Sequence[str],
        titles: Sequence[str],
        call_chunks: int | None = None,
    ) -> list[list[float]]:
        """The chunks' vectors (``texts``: as embedded); their pooled evidence waits for :meth:`put`.
        Pooling costs a mean per text, so every chunk's is kept (``call_chunks`` is not read)."""
        want = self._wanted(chunk_texts, titles)
        out = self.pool(list(zip(texts, want, strict=True)))
        for text, w, (_, pooled) in zip(texts, want, out, strict=True):
            self._hold(text, [(t, v) for t, v in zip(w, pooled, strict=True) if v is not None])
        return [vector for vector, _ in out]


class InlineEvidence(_HeldEvidence):
    """Evidence vectors of small documents embedded alone (``EVIDENCE_VECTORS=embedded``, the
    default), in the same embedder call as their chunks, and stored with them before READY (issue
    31). A note or a short file is then asked at READY with every vector a question reads already
    stored: its first answer costs what later ones do, and the warmer finds nothing left to do. A
    call of more than ``max_chunks`` chunks (``EVIDENCE_INLINE_CHUNKS``: all the documents ingested in
    the same call count together, so a bulk load is not slowed) is READY without them, so READY stays
    fast; a question embeds what it reaches and the warmer the rest. The vectors are
    the ones the warmer or a question would store (the same texts, embedded alone; the embedder pads
    per length bucket, so sharing a call changes nothing)."""

    def __init__(
        self, embedder: Embedder, store: EvidenceStore, *, passages: bool, sentences: bool, max_chunks: int
    ) -> None:
        super().__init__(store, passages=passages, sentences=sentences)
        self.embedder = embedder
        self.max_chunks = max_chunks

    def embed(
        self,
        texts: list[str],
        chunk_texts: Sequence[str],
        titles: Sequence[str],
        call_chunks: int | None = None,
    ) -> list[list[float]]:
        """The chunks' vectors (``texts``: as embedded), from one embedder call that also embeds
        their evidence when the documents of this call total ``call_chunks`` ≤ ``max_chunks``
        (unknown: not); that evidence waits for :meth:`put`."""
        if call_chunks is None or call_chunks > self.max_chunks:
            return self.embedder.embed_documents(texts)
        want = self._wanted(chunk_texts, titles)
        extra = list(dict.fromkeys(t for w in want for t in w))
        vectors = self.embedder.embed_documents([*texts, *extra])
        if len(vectors) != len(texts) + len(extra):
            raise RuntimeError(f"Embedder returned {len(vectors)} vectors for {len(texts) + len(extra)}")
        found = dict(zip(extra, vectors[len(texts) :], strict=True))
        for text, w in zip(texts, want, strict=True):
            self._hold(text, [(t, found[t]) for t in w])
        return list(vectors[: len(texts)])
