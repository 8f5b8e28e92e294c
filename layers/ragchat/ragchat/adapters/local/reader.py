"""The reader: an extractive question-answering model trained here from all-MiniLM-L6-v2 on SQuAD 2.0
and MTRAG (docs/reader.md, ``make reader``). It reads the question and a passage together and finds
the span of the passage that answers it, or says there is none: a start/end head over the passage's
tokens, and a no-answer score at ``[CLS]`` (SQuAD 2.0's convention: the null span).

``ragchat.ports.Reader`` over the int8 ONNX model in ``<models>/ragchat-reader/`` (onnxruntime +
tokenizers; imported when a reader is built, never at import time). Long passages are read in
windows of ``MAX_TOKENS`` tokens with a stride, as trained; a passage's reading is its best span over
its windows and its lowest no-answer score.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path

from ragchat.adapters.local.onnx_embedder import ModelNotPreparedError
from ragchat.domain.reading import Reading

MODEL_NAME = "ragchat-reader"
MODEL_FILE = "model-int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "manifest.json"  # written by bench/train_reader.py: sha256, threshold, figures
#: the reader shipped inside the package (package data), read when the models cache has none
PACKAGED_MODELS = Path(__file__).resolve().parents[2] / "models"
MAX_TOKENS = 256  # as trained: question + passage window
STRIDE = 96  # tokens shared by two consecutive windows of a long passage
MAX_QUESTION_TOKENS = 64
MAX_ANSWER_TOKENS = 40  # longest span considered
BATCH = 8


def reader_dir(models_path: Path) -> Path:
    return Path(models_path) / MODEL_NAME


def _missing(folder: Path) -> list[str]:
    return [name for name in (MODEL_FILE, TOKENIZER_FILE) if not (folder / name).is_file()]


def find_reader(models_path: Path, packaged: Path | None = None) -> Path:
    """The reader's folder: ``<models>/ragchat-reader`` when it holds a model (``make reader``, a
    model being tried), else the copy shipped in the package; ``ModelNotPreparedError`` (naming both)
    when neither has one."""
    cache = reader_dir(models_path)
    if not _missing(cache):
        return cache
    shipped = reader_dir(packaged or PACKAGED_MODELS)
    if not _missing(shipped):
        return shipped
    raise ModelNotPreparedError(
        f"the reader model is not prepared in {cache} ({', '.join(_missing(cache))} missing) and none "
        f"is shipped in {shipped}: run `make reader` in the ragchat repository, or set READER=off"
    )


#: one model input: (passage index, input ids, character offsets, first passage token)
Window = tuple[int, list[int], list[tuple[int, int]], int]


def make_windows(tokenizer, question: str, passages: Sequence[str]) -> list[Window]:  # type: ignore[no-untyped-def]
    """``[CLS] question [SEP] window [SEP]`` per window of each passage: at most ``MAX_TOKENS``
    tokens, ``STRIDE`` tokens shared by consecutive windows, the question cut to
    ``MAX_QUESTION_TOKENS``. The training script builds its inputs with this very function."""
    cls = tokenizer.token_to_id("[CLS]")
    sep = tokenizer.token_to_id("[SEP]")
    q = tokenizer.encode(question, add_special_tokens=False)
    encs = tokenizer.encode_batch(list(passages), add_special_tokens=False)
    head = [cls, *q.ids[:MAX_QUESTION_TOKENS], sep]
    room = MAX_TOKENS - len(head) - 1
    out: list[Window] = []
    for owner, enc in enumerate(encs):
        ids, offsets = enc.ids, enc.offsets
        lo = 0
        while True:
            hi = min(len(ids), lo + room)
            window_offsets = [(0, 0)] * len(head) + list(offsets[lo:hi]) + [(0, 0)]
            out.append((owner, [*head, *ids[lo:hi], sep], window_offsets, len(head)))
            if hi >= len(ids):
                break
            lo = max(lo + 1, hi - STRIDE)
    return out


def model_inputs(rows: Sequence[Sequence[int]], sep: int):  # type: ignore[no-untyped-def]
    """Padded ``input_ids``, ``attention_mask`` and ``token_type_ids`` (numpy int64) for windows."""
    import numpy as np

    width = max(len(r) for r in rows)
    feed = {
        n: np.zeros((len(rows), width), dtype=np.int64)
        for n in ("input_ids", "attention_mask", "token_type_ids")
    }
    for row, ids in enumerate(rows):
        feed["input_ids"][row, : len(ids)] = ids
        feed["attention_mask"][row, : len(ids)] = 1
        first_sep = list(ids).index(sep)
        feed["token_type_ids"][row, first_sep + 1 : len(ids)] = 1
    return feed


class OnnxReader:
    """``ragchat.ports.Reader``. Thread-safe (the tokenizer behind a lock; an onnxruntime session
    runs concurrent requests)."""

    def __init__(self, model_path: Path, tokenizer_path: Path, *, threads: int = 1) -> None:
        import json

        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        self._lock = threading.Lock()
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        sep = tokenizer.token_to_id("[SEP]")
        if sep is None:
            raise ModelNotPreparedError(f"{tokenizer_path} has no [SEP] token: not the reader's tokenizer")
        self._sep: int = sep
        self.folder = Path(model_path).parent
        manifest_path = self.folder / MANIFEST_FILE
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = {}
        manifest = manifest if isinstance(manifest, dict) else {}
        #: the model file's SHA-256 as its manifest states it (``None`` without a manifest)
        self.sha256: str | None = manifest.get("sha256") if isinstance(manifest.get("sha256"), str) else None
        threshold = manifest.get("threshold")
        #: the operating point the training script chose on its dev articles (``None``: not stated)
        self.threshold: float | None = (
            float(threshold)
            if isinstance(threshold, int | float) and not isinstance(threshold, bool)
            else None
        )

    @classmethod
    def from_cache(cls, models_path: Path, *, packaged: Path | None = None, **kwargs: int) -> OnnxReader:
        """The reader of the models cache, else the one shipped in the package (:func:`find_reader`)."""
        folder = find_reader(models_path, packaged)
        return cls(folder / MODEL_FILE, folder / TOKENIZER_FILE, **kwargs)

    # -- the port ----------------------------------------------------------------------------------

    def read(self, question: str, passages: Sequence[str]) -> list[Reading]:
        """One reading per passage, in order: its best answer span (character offsets into the
        passage) and that span's score against the passage's no-answer score."""
        windows = self.windows(question, passages)
        best: list[Reading | None] = [None] * len(passages)
        nulls = [math.inf] * len(passages)
        for i in range(0, len(windows), BATCH):
            chunk = windows[i : i + BATCH]
            starts, ends = self.logits([w[1] for w in chunk])
            for (owner, ids, offsets, first), s, e in zip(chunk, starts, ends, strict=True):
                null = float(s[0] + e[0])
                nulls[owner] = min(nulls[owner], null)
                span = _best_span(s, e, first, len(ids) - 1)
                if span is None:
                    continue
                a, b, score = span
                current = best[owner]
                if current is None or score > current.span_score:
                    best[owner] = Reading(offsets[a][0], offsets[b][1], score, null)
        out: list[Reading] = []
        for owner, reading in enumerate(best):
            null = nulls[owner] if nulls[owner] != math.inf else 0.0
            if reading is None:
                out.append(Reading(-1, -1, -math.inf, null))
            else:
                out.append(Reading(reading.start, reading.end, reading.span_score, null))
        return out

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        """σ(best span − no answer) per passage: a probability-like "the passage answers it"."""
        return [r.probability for r in self.read(question, passages)]

    # -- the model ---------------------------------------------------------------------------------

    @property
    def tokenizer(self):  # type: ignore[no-untyped-def]
        return self._tokenizer

    def windows(self, question: str, passages: Sequence[str]) -> list[Window]:
        with self._lock:
            return make_windows(self._tokenizer, question, passages)

    def logits(self, rows: Sequence[Sequence[int]]):  # type: ignore[no-untyped-def]
        """Start and end logits (numpy, batch × tokens) of windows' input ids."""
        starts, ends = self._session.run(["start_logits", "end_logits"], model_inputs(rows, self._sep))
        return starts, ends


def _best_span(starts, ends, first: int, last: int) -> tuple[int, int, float] | None:  # type: ignore[no-untyped-def]
    """The best ``(start, end, score)`` token span inside ``[first, last)`` (the passage's tokens),
    ``end - start < MAX_ANSWER_TOKENS``; ``None`` for an empty window."""
    import numpy as np

    if last <= first:
        return None
    s = np.asarray(starts[first:last], dtype=np.float64)
    e = np.asarray(ends[first:last], dtype=np.float64)
    n = len(s)
    scores = s[:, None] + e[None, :]
    band = np.triu(np.ones((n, n), dtype=bool)) & ~np.triu(np.ones((n, n), dtype=bool), MAX_ANSWER_TOKENS)
    scores = np.where(band, scores, -np.inf)
    flat = int(np.argmax(scores))
    a, b = divmod(flat, n)
    return first + a, first + b, float(scores[a, b])
