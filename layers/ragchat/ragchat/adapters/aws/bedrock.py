"""Embeddings on Amazon Bedrock: Titan Text Embeddings V2 (default) and Cohere Embed v3.

Both return unit-length float vectors in input order. Calls run concurrently on a bounded thread
pool (``concurrency``) and are retried with exponential backoff and jitter on what
:mod:`ragchat.adapters.aws.bedrock_errors` classifies as retryable (throttling, service unavailable,
model not ready, model timeout, 5xx, network errors), within ``Backoff.budget_s`` per call; a 4xx
such as ``ValidationException`` or ``AccessDeniedException`` fails at once, and access denied is
logged as ``bedrock.access_denied`` with what to fix. The sleep, the clock and the jitter source are
injectable so tests never wait. Build the client with botocore's own retries off
(``ragchat.bootstrap`` does) so the two retry layers do not multiply.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ragchat.adapters.aws.bedrock_errors import describe, error_code, is_retryable, log_failure
from ragchat.domain.errors import ModelError, TransientError, ValidationError

T = TypeVar("T")

TITAN_MODEL_ID = "amazon.titan-embed-text-v2:0"
TITAN_DIMENSIONS = (256, 512, 1024)
COHERE_BATCH = 96  # Cohere Embed on Bedrock: at most 96 texts per call
COHERE_MAX_CHARS = 2048  # … and at most 2048 characters per text
COHERE_DIMENSION = 1024


def normalize(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    if not norm:
        raise ValueError("the model returned a zero vector")
    return [float(x) / norm for x in vector]


class Backoff:
    """Retry policy: attempt ``n`` (0-based) that fails retryably waits
    ``min(cap, base * 2**n) * (0.5 + 0.5 * jitter())`` ("equal jitter"), up to ``attempts`` tries,
    and only while the wait ends within ``budget_s`` of the call's start (the deadline).

    Final failures: a retryable error whose retries are spent → ``TransientError`` (the ingestion
    state machine retries it later); ``ValidationException`` → ``ValidationError``; any other error
    (access denied, model not found, …) → ``ModelError`` with a message that says what to fix."""

    def __init__(
        self,
        *,
        attempts: int = 6,
        base: float = 0.25,
        cap: float = 8.0,
        budget_s: float = 20.0,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.attempts = attempts
        self.base = base
        self.cap = cap
        self.budget_s = budget_s
        self.sleep = sleep
        self.jitter = jitter
        self.clock = clock

    def delay(self, attempt: int) -> float:
        return float(min(self.cap, self.base * 2**attempt) * (0.5 + 0.5 * self.jitter()))

    def run(self, call: Callable[[], T], what: str, model_id: str = "") -> T:
        deadline = self.clock() + self.budget_s
        for attempt in range(self.attempts):
            try:
                return call()
            except Exception as exc:
                if not is_retryable(exc):
                    log_failure(exc, model_id, what)
                    if error_code(exc) == "ValidationException":
                        raise ValidationError(f"{what}: {describe(exc, model_id)}") from exc
                    if error_code(exc) is None:
                        raise
                    raise ModelError(f"{what}: {describe(exc, model_id)}") from exc
                wait = self.delay(attempt)
                if attempt == self.attempts - 1 or self.clock() + wait > deadline:
                    log_failure(exc, model_id, what)
                    raise TransientError(
                        f"{what}: {describe(exc, model_id)} after {attempt + 1} attempts"
                    ) from exc
                self.sleep(wait)
        raise AssertionError("unreachable")


def _invoke(client: Any, model_id: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = client.invoke_model(
        modelId=model_id,
        body=json.dumps(body),
        contentType="application/json",
        accept="application/json",
    )
    payload = resp["body"].read()
    result: dict[str, Any] = json.loads(payload)
    return result


def _map_ordered(fn: Callable[[T], Any], items: Sequence[T], concurrency: int) -> list[Any]:
    if len(items) <= 1 or concurrency <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(items))) as pool:
        return list(pool.map(fn, items))  # map keeps input order


class TitanEmbedder:
    """``amazon.titan-embed-text-v2:0``: one ``InvokeModel`` per text (the model takes one input),
    ``{"inputText", "dimensions", "normalize": true}``, run ``concurrency`` at a time."""

    model_id = TITAN_MODEL_ID

    def __init__(
        self,
        client: Any,
        dimension: int = 1024,
        concurrency: int = 8,
        *,
        backoff: Backoff | None = None,
    ) -> None:
        if dimension not in TITAN_DIMENSIONS:
            raise ValueError(
                f"Titan Text Embeddings V2 supports dimensions {TITAN_DIMENSIONS}, not {dimension}"
            )
        self._client = client
        self.dimension = dimension
        self.concurrency = max(1, concurrency)
        self.backoff = backoff or Backoff()

    def _embed_one(self, text: str) -> list[float]:
        body = {"inputText": text, "dimensions": self.dimension, "normalize": True}
        result = self.backoff.run(
            lambda: _invoke(self._client, self.model_id, body), "Titan embedding", self.model_id
        )
        vector = result["embedding"]
        if len(vector) != self.dimension:
            raise ValueError(f"Titan returned {len(vector)} dimensions, expected {self.dimension}")
        return normalize(vector)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return _map_ordered(self._embed_one, list(texts), self.concurrency)

    def embed_query(self, text: str) -> list[float]:
        return self._embed_one(text)


class CohereEmbedder:
    """Cohere Embed v3 on Bedrock: batches of ≤ 96 texts per call, ``input_type`` ``search_document``
    for notes and ``search_query`` for questions, ``embedding_types: ["float"]``; vectors normalized
    here (Cohere does not promise unit length). Batches run ``concurrency`` at a time."""

    def __init__(
        self,
        client: Any,
        model_id: str = "cohere.embed-english-v3",
        concurrency: int = 4,
        *,
        dimension: int = COHERE_DIMENSION,
        backoff: Backoff | None = None,
    ) -> None:
        self._client = client
        self.model_id = model_id
        self.dimension = dimension
        self.concurrency = max(1, concurrency)
        self.backoff = backoff or Backoff()

    def _embed_batch(self, texts: Sequence[str], input_type: str) -> list[list[float]]:
        body = {
            "texts": [t[:COHERE_MAX_CHARS] for t in texts],
            "input_type": input_type,
            "embedding_types": ["float"],
            "truncate": "END",
        }
        result = self.backoff.run(
            lambda: _invoke(self._client, self.model_id, body), "Cohere embedding", self.model_id
        )
        embeddings = result["embeddings"]
        vectors = embeddings["float"] if isinstance(embeddings, dict) else embeddings
        if len(vectors) != len(texts):
            raise ValueError(f"Cohere returned {len(vectors)} embeddings for {len(texts)} texts")
        for v in vectors:
            if len(v) != self.dimension:
                raise ValueError(f"Cohere returned {len(v)} dimensions, expected {self.dimension}")
        return [normalize(v) for v in vectors]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        items = list(texts)
        batches = [items[i : i + COHERE_BATCH] for i in range(0, len(items), COHERE_BATCH)]
        results = _map_ordered(
            lambda batch: self._embed_batch(batch, "search_document"), batches, self.concurrency
        )
        return [vector for batch in results for vector in batch]

    def embed_query(self, text: str) -> list[float]:
        return self._embed_batch([text], "search_query")[0]
