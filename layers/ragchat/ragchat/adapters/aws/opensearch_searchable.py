"""Waiting until a document is searchable on a near-real-time OpenSearch collection (Serverless).

A write shows in searches only after the collection's next refresh, and Serverless refuses explicit
refreshes: :func:`await_searchable` probes with ``_count`` until the chunks of the version being
finalized are visible — exactly ``chunk_count`` of them, all in the wanted ``enabled`` state
(``None``: any state) — pausing 0.25 s doubling to 4 s, and raises ``TransientError`` once
``budget_s`` has passed.

A version's chunks are told apart by their note ids (:func:`version_query`: ``<doc>-NNNNNv<tag>``,
the ``note_id`` keyword field), not by a count of the whole document: during a replacement the
previous version's chunks stay searchable beside the new one's until ingestion removes them, once
the new version is READY. A copy from before the flip (Serverless flips by delete + re-index) has
the same note id, so "exactly ``chunk_count``" still means none is left. The swap's delete of the
previous version's chunks waits the same way for none of them to be visible (``chunk_count`` 0).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ragchat.domain.errors import TransientError
from ragchat.domain.ids import tagged_note_id

logger = logging.getLogger("ragchat.adapters.opensearch")


def version_query(
    document_query: dict[str, Any], document_id: str, chunk_count: int, tags: Sequence[str], first: int = 0
) -> dict[str, Any]:
    """The chunks of one version of a document: ``document_query`` (a ``bool`` query with a
    ``filter`` list selecting the document) narrowed to the version's note ids of chunk indexes
    ``first`` to ``chunk_count - 1``; ``tags`` names the version's tag (none: ids without a version)."""
    tag = tags[0] if tags else None
    ids = [tagged_note_id(document_id, i, tag) for i in range(first, chunk_count)]
    return {"bool": {"filter": [*document_query["bool"]["filter"], {"terms": {"note_id": ids}}]}}


def await_searchable(
    count: Callable[[dict[str, Any]], int],
    document_query: dict[str, Any],
    document_id: str,
    chunk_count: int,
    enabled: bool | None,
    *,
    budget_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> None:
    """``count(query)`` → how many documents a search for ``query`` sees now; ``document_query`` is
    a ``bool`` query with a ``filter`` list selecting the document's chunks."""
    started = clock()
    delay = 0.25
    probes = 0
    while True:
        probes += 1
        total = count(document_query)
        in_state = total
        if enabled is not None:
            query = {"bool": {"filter": [*document_query["bool"]["filter"], {"term": {"enabled": enabled}}]}}
            in_state = count(query)
        if total == in_state == chunk_count:
            logger.info(
                "vector.searchable",
                extra={"documentId": document_id, "chunks": chunk_count, "probes": probes,
                       "waitedMs": round((clock() - started) * 1000)},
            )  # fmt: skip
            return
        left = started + budget_s - clock()
        if left <= 0:
            if chunk_count == 0:  # waiting for deleted chunks to leave the searches
                raise TransientError(f"OpenSearch: {document_id}: {total} still visible after {budget_s:g} s")
            state = "" if enabled is None else " in the new state"
            raise TransientError(
                f"OpenSearch: {document_id} not searchable after {budget_s:g} s "
                f"({in_state} of {chunk_count} chunks visible{state}, {total} in all)"
            )
        sleep(min(delay, left))
        delay = min(delay * 2, 4.0)
