"""Evidence vectors pooled from a chunk's own forward pass (``EVIDENCE_VECTORS=pooled``).

MiniLM's sentence vector is the mean of its token vectors. Run once over a chunk (its title words, a
newline, its text), the encoder gives a vector per token; the vector of a sentence, or of a
title-prefixed passage of two sentences, is then the normalised mean of the token vectors that
fall inside those words' character spans in the chunk. One model call per chunk gives all of its
evidence vectors, instead of one call per text (~9 texts of 20–90 tokens each per SciFact chunk).

The token vectors are contextual (each token has seen the whole chunk), so these vectors are not
the ones the same texts get alone: their effect on answers is measured by
``bench/bench_grounding.py`` (docs/benchmarks.md). A text whose words are not all found in the
chunk's tokens (cut by the 256-token truncation, or words the chunk does not contain) gets ``None``:
the caller embeds it alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

_WORD = re.compile(r"\w+")
#: chunks whose token vectors are held at once (256 x 384 float32 each at most)
STATES_AT_ONCE = 64


class _Words:
    """The words of a text (lower-cased) with their character spans, indexed by word."""

    def __init__(self, text: str) -> None:
        found = list(_WORD.finditer(text))
        self.words = [m.group(0).lower() for m in found]
        self.spans = [m.span() for m in found]
        self.at: dict[str, list[int]] = {}
        for i, w in enumerate(self.words):
            self.at.setdefault(w, []).append(i)

    def runs(self, text: str) -> list[tuple[int, int]] | None:
        """Character spans covering ``text``'s words as the fewest longest runs of consecutive words
        of this text (a title-prefixed passage: the header's title words, then its sentences);
        ``None`` when a word is not here."""
        wanted = [m.group(0).lower() for m in _WORD.finditer(text)]
        out: list[tuple[int, int]] = []
        i = 0
        while i < len(wanted):
            best, length = -1, 0
            for j in self.at.get(wanted[i], ()):
                k = 1
                while i + k < len(wanted) and j + k < len(self.words) and self.words[j + k] == wanted[i + k]:
                    k += 1
                if k > length:
                    best, length = j, k
            if best < 0:
                return None
            out.append((self.spans[best][0], self.spans[best + length - 1][1]))
            i += length
        return out


def pooled_vectors(
    offsets: npt.NDArray[np.int64], hidden: npt.NDArray[np.float32], passage: str, texts: Sequence[str]
) -> list[list[float] | None]:
    """Each of ``texts`` as the normalised mean of ``hidden``'s token vectors inside its words'
    spans in ``passage`` (``offsets``: each token's character span; special tokens are (0, 0))."""
    import numpy as np

    words = _Words(passage)
    real = np.flatnonzero(offsets[:, 1] > offsets[:, 0])  # in order: WordPiece offsets only grow
    starts, ends = offsets[real, 0], offsets[real, 1]
    covered = int(ends[-1]) if len(ends) else 0  # the pass saw the text up to here (truncation)
    sums = np.zeros((len(real) + 1, hidden.shape[1]), dtype=np.float64)
    np.cumsum(hidden[real], axis=0, out=sums[1:])
    out: list[list[float] | None] = []
    for text in texts:
        runs = words.runs(text)
        total, count = np.zeros(hidden.shape[1], dtype=np.float64), 0
        for start, end in runs or ():
            lo = int(np.searchsorted(starts, start, "left"))
            hi = int(np.searchsorted(ends, end, "right"))  # tokens lo..hi-1 lie inside the run
            if end > covered or hi <= lo:
                count = 0
                break
            total += sums[hi] - sums[lo]
            count += hi - lo
        norm = float(np.linalg.norm(total)) if count else 0.0
        # a word the chunk lacks, or past the truncation: the caller embeds the text alone
        out.append((total / norm).astype(np.float32).tolist() if norm > 0 else None)
    return out


def token_states(
    embedder: OnnxMiniLMEmbedder, passages: Sequence[str]
) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
    """Per passage: the tokens' character offsets and their vectors (the encoder's last hidden
    state), in the embedder's length-sorted batches."""
    import numpy as np

    with embedder._tokenizer_lock:
        encodings = embedder._tokenizer.encode_batch(list(passages), add_special_tokens=True)
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
    order = np.argsort(lengths, kind="stable")
    out: list[Any] = [None] * len(passages)
    for rows in embedder._batches(order, lengths):
        width = int(lengths[rows].max())
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, index in enumerate(rows):
            n = len(encodings[index].ids)
            ids[r, :n] = encodings[index].ids
            mask[r, :n] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in embedder._input_names:
            feed["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = embedder._session.run([embedder._output_name], feed)
        for r, index in enumerate(rows):
            n = len(encodings[index].ids)
            offsets = np.asarray(encodings[index].offsets, dtype=np.int64).reshape(-1, 2)
            out[int(index)] = (offsets, np.asarray(hidden[r, :n], dtype=np.float32))
    return out


def chunks_and_pooled(
    embedder: OnnxMiniLMEmbedder, chunks: Sequence[tuple[str, Sequence[str]]]
) -> list[tuple[list[float], list[list[float] | None]]]:
    """One model pass over each chunk's text as embedded: its own vector (the mean of all its token
    vectors, normalised: what ``embed_documents`` gives) and its evidence texts' pooled vectors."""
    import numpy as np

    out: list[tuple[list[float], list[list[float] | None]]] = []
    for start in range(0, len(chunks), STATES_AT_ONCE):  # token vectors: ~0.4 MB per chunk
        part = chunks[start : start + STATES_AT_ONCE]
        states = token_states(embedder, [text for text, _ in part])
        for (text, wanted), (offsets, hidden) in zip(part, states, strict=True):
            mean = hidden.mean(axis=0)
            vector = (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32).tolist()
            out.append((vector, pooled_vectors(offsets, hidden, text, wanted) if wanted else []))
    return out
