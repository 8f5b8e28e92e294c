"""Fakes of the remaining ports: ``ChatModel`` (scripted answers), ``BlobStore`` (registered in the blob
store contract suite) and ``IngestionLauncher``."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ragchat.domain.models import (
    Completion,
    Hit,
    ModelRequest,
)
from ragchat.domain.uploads import PresignedUpload, UploadGrant, sign_grant, verify_grant
from ragchat.services.ingest_runner import SlicedRunner
from ragchat.services.ingest_steps import IngestSteps


# ----------------------------------------------------------------------------------------- chat model
class FakeChatModel:
    """``ChatModel`` returning scripted answers.

    ``reply`` is either a fixed string or a function of the ``ModelRequest``; ``replies`` (a list)
    is consumed first, one per call. ``fail_with`` (an exception, or a list of exceptions consumed one
    per call) makes calls raise. ``requests`` records every request. ``stream`` yields the answer in
    word-sized deltas."""

    def __init__(
        self,
        reply: str | Callable[[ModelRequest], str] = "Answer.",
        *,
        model_id: str = "fake-model",
        tool_hits: Sequence[Hit] = (),
    ) -> None:
        self.model_id = model_id
        self.reply = reply
        self.replies: list[str] = []
        self.fail_with: BaseException | list[BaseException] | None = None
        self.requests: list[ModelRequest] = []
        self.tool_hits = list(tool_hits)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _text(self, request: ModelRequest) -> str:
        self.requests.append(request)
        if isinstance(self.fail_with, list):
            if self.fail_with:
                raise self.fail_with.pop(0)
        elif self.fail_with is not None:
            raise self.fail_with
        if self.replies:
            return self.replies.pop(0)
        return self.reply(request) if callable(self.reply) else self.reply

    def complete(self, request: ModelRequest) -> Completion:
        return Completion(text=self._text(request), model=self.model_id, tool_hits=list(self.tool_hits))

    def stream(self, request: ModelRequest) -> Iterator[str]:
        text = self._text(request)
        yield from re.findall(r"\S+\s*|\s+", text)


# ------------------------------------------------------------------------------------------ blob store
LINK_PREFIX = "https://blobs.example/"


class FakeBlobStore:
    """``BlobStore`` in memory: ``objects`` maps key → bytes, ``content_types`` key → content type."""

    def __init__(self, *, links: bool = False) -> None:
        self.links = links  # True: ``link`` gives a URL (as S3 does), read back with ``follow``
        self.objects: dict[str, bytes] = {}
        self.content_types: dict[str, str] = {}
        self.metadata: dict[str, dict[str, str]] = {}  # user metadata, as an S3 upload carries it
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> None:
        with self._lock:
            self.objects[key] = bytes(data)
            self.content_types[key] = content_type

    def get(self, key: str) -> bytes:
        with self._lock:
            return self.objects[key]

    def get_with_metadata(self, key: str) -> tuple[bytes, dict[str, str]]:
        with self._lock:
            return self.objects[key], dict(self.metadata.get(key, {}))

    def delete(self, key: str) -> None:
        with self._lock:
            self.objects.pop(key, None)
            self.content_types.pop(key, None)

    def delete_prefix(self, prefix: str) -> int:
        with self._lock:
            keys = [k for k in self.objects if k.startswith(prefix)]
            for k in keys:
                del self.objects[k]
                self.content_types.pop(k, None)
            return len(keys)

    def keys(self, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(k for k in self.objects if k.startswith(prefix))

    def presign_post(
        self,
        key: str,
        *,
        content_type: str,
        min_bytes: int,
        max_bytes: int,
        expires_in: int,
        metadata: dict[str, str],
    ) -> PresignedUpload:
        """Like the local store: a token route on the server itself (grant signed, never expiring)."""
        grant = UploadGrant(key, content_type, min_bytes, max_bytes, float("inf"), dict(metadata))
        fields = {"key": key, "Content-Type": content_type}
        fields.update({f"x-amz-meta-{name}": value for name, value in metadata.items()})
        return PresignedUpload(url="/uploads/local/" + sign_grant(grant, b"fake"), fields=fields)

    def upload_grant(self, token: str) -> UploadGrant:
        return verify_grant(token, b"fake", 0.0)

    def link(self, key: str, *, content_type: str, expires_in: int) -> str | None:
        with self._lock:
            if key not in self.objects:
                raise KeyError(key)
        return f"{LINK_PREFIX}{key}?expires={expires_in}" if self.links else None

    def follow(self, url: str) -> bytes:
        """What a GET of a ``link`` URL answers."""
        return self.get(url.removeprefix(LINK_PREFIX).split("?", 1)[0])


# ---------------------------------------------------------------------------------------- launcher
class FakeLauncher:
    """``IngestionLauncher`` that records starts; with ``run`` set (e.g. ``ingest_runner.run_to_end``
    over the steps) it runs the pipeline synchronously on ``start``. A document is run at most once
    per ``start`` while running."""

    def __init__(self, run: Callable[[str, str], Any] | None = None) -> None:
        self.run = run
        self.started: list[tuple[str, str]] = []
        self.versions: list[str | None] = []  # the content version of each start
        self._running: set[tuple[str, str]] = set()

    def start(self, owner: str, document_id: str, *, version: str | None = None) -> None:
        key = (owner, document_id)
        self.started.append(key)
        self.versions.append(version)
        if self.run is None or key in self._running:
            return
        self._running.add(key)
        try:
            self.run(owner, document_id)
        finally:
            self._running.discard(key)


def run_to_end(steps: IngestSteps | OneBatchSteps, keys: Sequence[tuple[str, str]]) -> None:
    """Run documents (``(owner, document_id)``) to the end in this thread, as the local launcher's
    rounds do: each ends ``READY``, ``FAILED``, or removed when deleted meanwhile. The split budget's
    clock stands still, so a round's splits never depend on how busy the machine is."""
    runner = SlicedRunner(clock=lambda: 0.0)
    runner.add(keys)
    while runner.active():
        runner.round(steps)  # type: ignore[arg-type]


class OneBatchSteps:
    """Stands in for ``IngestSteps`` under a launcher: every document is one split, one batch of one
    chunk, one finalize. Subclasses override :meth:`split` to record, block or fail."""

    documents = None  # never consulted: no step raises NotFound

    def split(self, owner: str, document_id: str) -> dict[str, Any]:
        return {"version": None, "chunkCount": 1, "batches": [{"key": f"work/{document_id}/b"}]}

    def read_batch(self, owner: str, document_id: str, key: str, version: Any) -> Any:
        return None, [{"index": 0, "text": document_id}]

    def embed(self, texts: list[str], *chunks_and_titles: Any) -> list[list[float]]:
        return [[1.0] for _ in texts]

    def store_batch(self, *args: Any, **kwargs: Any) -> int:
        return 1

    def finalize(self, *args: Any) -> dict[str, Any]:
        return {}

    def fail(self, *args: Any) -> dict[str, Any]:
        return {}
