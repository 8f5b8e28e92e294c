"""Local sentence embedder: all-MiniLM-L6-v2 exported to ONNX, run with onnxruntime + tokenizers.

Reproduces sentence-transformers' pipeline for this model without torch: WordPiece tokenisation
truncated to 256 tokens, the 6-layer encoder, mean pooling over the attention mask, L2
normalisation. The model files are prepared once by ``make model``
(``python -m ragchat.adapters.local.model_prep``); this module only reads them.

Importing this module is cheap: onnxruntime, tokenizers and numpy are imported when an embedder is
built.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragchat.domain.errors import RagchatError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MODEL_ID = "all-MiniLM-L6-v2"
DIMENSION = 384
MAX_TOKENS = 256
DEFAULT_BATCH_SIZE = 64
# Padded tokens per onnxruntime call: long passages go 8 at a time, short queries up to 64 at a time.
# Measured on SciFact abstracts: batches of 8 x 256 tokens are faster than 32 x 256 and hold far less
# memory (attention scores grow with batch x length^2).
DEFAULT_TOKEN_BUDGET = 2048
MODEL_FILE = "model.onnx"
#: The same model with int8 weights (onnxruntime dynamic quantization, made by ``make install``).
INT8_MODEL_FILE = "model-int8.onnx"
MODEL_FILES = {"int8": INT8_MODEL_FILE, "fp32": MODEL_FILE}
TOKENIZER_FILE = "tokenizer.json"


#: The one command that prepares the model (into ``Settings.models_path``).
PREPARE_COMMAND = "make install"


class ModelNotPreparedError(RagchatError, RuntimeError):
    """The exported model is missing; the one-line message says the command that prepares it. The
    CLI prints it as is; the API answers 503 with it."""

    status = 503


def model_dir(models_path: Path) -> Path:
    """Where the prepared model lives under the models cache (``Settings.models_path``)."""
    return Path(models_path) / MODEL_ID


class OnnxMiniLMEmbedder:
    """``ragchat.ports.Embedder`` for all-MiniLM-L6-v2 (384-d, unit-length vectors).

    Safe to call from several threads at once: tokenisation is guarded by a lock and an
    onnxruntime session runs concurrent requests.
    """

    model_id: str = MODEL_ID
    dimension: int = DIMENSION
    precision: str = "fp32"  # which file ``from_cache`` loaded ("int8" or "fp32")

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        *,
        threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        max_tokens: int = MAX_TOKENS,
    ) -> None:
        if batch_size < 1 or token_budget < 1:
            raise ValueError("batch_size and token_budget must be at least 1")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.batch_size = batch_size
        self.token_budget = token_budget
        self.max_tokens = max_tokens
        self.threads = threads if threads and threads > 0 else (os.cpu_count() or 1)

        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.no_padding()  # we pad per batch ourselves
        tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer = tokenizer
        self._tokenizer_lock = threading.Lock()

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # No busy-waiting between ops: the server shares its cores with request threads.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._output_name = self._session.get_outputs()[0].name

    @classmethod
    def from_cache(cls, models_path: Path, *, precision: str = "fp32", **kwargs: Any) -> OnnxMiniLMEmbedder:
        """Load the model prepared by ``make install`` from ``models_path`` (``Settings.models_path``):
        the fp32 export by default, the int8 model with ``precision="int8"`` (``EMBEDDER_PRECISION``)."""
        if precision not in MODEL_FILES:
            raise ValueError(f"precision must be one of {', '.join(MODEL_FILES)}, not {precision!r}")
        folder = model_dir(models_path)
        model_path, tokenizer_path = folder / MODEL_FILES[precision], folder / TOKENIZER_FILE
        missing = [p.name for p in (model_path, tokenizer_path) if not p.is_file()]
        if missing:
            # A cache prepared before the int8 model existed has only the fp32 export: say so.
            fallback = (
                "; or EMBEDDER_PRECISION=fp32 to use the fp32 export already there"
                if precision != "fp32" and (folder / MODEL_FILE).is_file() and tokenizer_path.is_file()
                else ""
            )
            raise ModelNotPreparedError(
                f"the embedding model {MODEL_ID} is not prepared in {folder} ({', '.join(missing)} missing): "
                f"run `{PREPARE_COMMAND}` in the ragchat repository (or set RAGCHAT_MODEL_DIR to a "
                f"prepared model cache{fallback})"
            )
        embedder = cls(model_path, tokenizer_path, **kwargs)
        embedder.precision = precision
        return embedder

    # ------------------------------------------------------------------ Embedder port
    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text, in input order."""
        if not texts:
            return []
        return self._embed(list(texts)).tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return self._embed([text])[0].tolist()  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ internals
    def embed_array(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Same as ``embed_documents`` but returns a float32 array of shape (len(texts), 384)."""
        if not texts:
            import numpy as np

            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._embed(list(texts))

    def _embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np  # already loaded by onnxruntime; a dict lookup

        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {position} is {type(text).__name__}, not str")
        with self._tokenizer_lock:
            encodings = self._tokenizer.encode_batch(texts, add_special_tokens=True)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        # Sorting by length keeps padding (wasted compute) small within each batch.
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for rows in self._batches(order, lengths):
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, index in enumerate(rows):
                enc = encodings[index]
                n = len(enc.ids)
                ids[r, :n] = enc.ids
                mask[r, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feed["token_type_ids"] = np.zeros_like(ids)
            (hidden,) = self._session.run([self._output_name], feed)
            out[rows] = _mean_pool_normalize(hidden, mask)
        return out

    def _batches(
        self, order: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
    ) -> list[npt.NDArray[np.int64]]:
        """Split indices sorted by length into batches of at most ``batch_size`` rows and (after
        padding to the longest row) about ``token_budget`` tokens; a batch has at least one row."""
        batches = []
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and end - start < self.batch_size
                and (end - start + 1) * int(lengths[order[end]]) <= self.token_budget
            ):
                end += 1
            batches.append(order[start:end])
            start = end
        return batches


def _mean_pool_normalize(hidden: npt.NDArray[Any], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    import numpy as np

    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    pooled = summed / counts
    norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    result: npt.NDArray[np.float32] = (pooled / norms).astype(np.float32, copy=False)
    return result
