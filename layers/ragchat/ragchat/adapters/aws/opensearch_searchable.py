"""Waiting until a document is searchable on a near-real-time OpenSearch collection (Serverless).

A write shows in searches only after the collection's next refresh, and Serverless refuses explicit
refreshes: :func:`await_searchable` probes with ``_count`` until the document's chunks are visible —
exactly ``chunk_count`` of them, all in the wanted ``enabled`` state (``None``: any state) — pausing
0.25 s doubling to 4 s, and raises ``TransientError`` once ``budget_s`` has passed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ragchat.domain.errors import TransientError

logger = logging.getLogger("ragchat.adapters.opensearch")


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
            state = "" if enabled is None else " in the new state"
            raise TransientError(
                f"OpenSearch: {document_id} not searchable after {budget_s:g} s "
                f"({in_state} of {chunk_count} chunks visible{state}, {total} in all)"
            )
        sleep(min(delay, left))
        delay = min(delay * 2, 4.0)
