"""The split step's batch files, written in parallel (docs/ingestion.md).

A 500 MiB text (the largest upload) is ~16,600 batch files of 64 chunks: written one S3 PUT after
another they would take the split step's whole 300 s. They go ``SPLIT_WRITERS`` at a time (threads;
the S3 client's connection pool holds as many, ``adapters/aws/s3.py``), in waves of
``4 * SPLIT_WRITERS``; between waves the document is looked up, so a document deleted meanwhile stops
the split (the runner then removes what is there).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ragchat.services.blob_keys import work_prefix

if TYPE_CHECKING:
    from ragchat.domain.models import Chunk
    from ragchat.ports import BlobStore

SPLIT_WRITERS = 16


def write_batches(
    blobs: BlobStore,
    owner: str,
    document_id: str,
    version: str | None,
    chunks: list[Chunk],
    headers: list[str],
    batch_size: int,
    *,
    still_there: Callable[[], object],
    writers: int = SPLIT_WRITERS,
) -> list[dict[str, Any]]:
    """Write ``chunks`` as batch files of ``batch_size`` under the version's work prefix; returns the
    batch list in order (``{owner, documentId, version, key}`` each). ``still_there`` raises when the
    document is gone."""
    prefix = work_prefix(document_id, version)
    starts = list(range(0, len(chunks), batch_size))

    def write(n: int) -> dict[str, Any]:
        start = starts[n]
        key = f"{prefix}batch-{n:05d}.json"
        payload = {
            "owner": owner,
            "documentId": document_id,
            "version": version,
            "chunks": [
                {"index": i, "text": c.text, "metadata": c.metadata, "header": headers[i]}
                for i, c in enumerate(chunks[start : start + batch_size], start=start)
            ],
        }
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        blobs.put(key, data, content_type="application/json")
        return {"owner": owner, "documentId": document_id, "version": version, "key": key}

    batches: list[dict[str, Any]] = []
    wave = max(1, writers) * 4
    with ThreadPoolExecutor(max_workers=max(1, writers), thread_name_prefix="split-write") as pool:
        for first in range(0, len(starts), wave):
            if first:
                still_there()
            batches += pool.map(write, range(first, min(first + wave, len(starts))))
    return batches
