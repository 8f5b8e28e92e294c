"""The reader: a cross-encoder judge trained here from all-MiniLM-L6-v2 on SQuAD 2.0 (docs/reader.md,
``make reader``). It reads the question and a passage together and answers the probability that the
passage holds the answer, the one thing similarity cannot tell ("answered here" from "about this,
but not answered").

``ragchat.ports.Reader`` over the int8 ONNX model in ``<models>/ragchat-reader/`` (onnxruntime +
tokenizers; imported when a reader is built, never at import time).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path

from ragchat.adapters.local.onnx_embedder import ModelNotPreparedError

MODEL_NAME = "ragchat-reader"
MODEL_FILE = "model-int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
MAX_TOKENS = 128  # as trained (question + passage; the passage is truncated first)
BATCH = 16


def reader_dir(models_path: Path) -> Path:
    return Path(models_path) / MODEL_NAME


class OnnxReader:
    """``ragchat.ports.Reader``: σ(logit) of ``question [SEP] passage`` per passage. Thread-safe
    (the tokenizer behind a lock; an onnxruntime session runs concurrent requests)."""

    def __init__(self, model_path: Path, tokenizer_path: Path, *, threads: int = 1) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS, strategy="only_second")
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

    @classmethod
    def from_cache(cls, models_path: Path, **kwargs: int) -> OnnxReader:
        folder = reader_dir(models_path)
        missing = [name for name in (MODEL_FILE, TOKENIZER_FILE) if not (folder / name).is_file()]
        if missing:
            raise ModelNotPreparedError(
                f"the reader model is not prepared in {folder} ({', '.join(missing)} missing): run "
                "`make reader` in the ragchat repository, or set READER=off"
            )
        return cls(folder / MODEL_FILE, folder / TOKENIZER_FILE, **kwargs)

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        """P(the passage holds the answer to ``question``), one per passage, in order."""
        out: list[float] = []
        for i in range(0, len(passages), BATCH):
            out.extend(self._batch(question, passages[i : i + BATCH]))
        return out

    def _batch(self, question: str, passages: Sequence[str]) -> list[float]:
        import numpy as np

        with self._lock:
            encs = self._tokenizer.encode_batch([(question, p) for p in passages])
        width = max(len(e.ids) for e in encs)
        feed = {
            n: np.zeros((len(encs), width), dtype=np.int64)
            for n in ("input_ids", "attention_mask", "token_type_ids")
        }
        for row, e in enumerate(encs):
            feed["input_ids"][row, : len(e.ids)] = e.ids
            feed["attention_mask"][row, : len(e.ids)] = e.attention_mask
            feed["token_type_ids"][row, : len(e.ids)] = e.type_ids
        (logits,) = self._session.run(["logits"], feed)
        return [1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, float(z))))) for z in logits[:, 0]]
