"""Two copies of one chunk on OpenSearch Serverless, and how the adapter keeps that from showing.

A Serverless vector collection refuses custom ``_id``s, so a chunk's id, its note id, is the
``note_id`` field. An upsert first searches for earlier copies to delete, but a Step Functions retry
of ``embed_index`` whose first write is not yet visible (the collection refreshes on its own
schedule) finds none and writes a second copy. Writes stay idempotent all the same:
``set_enabled`` (finalize) waits until every note id is visible, then :func:`flip_units` keeps one
copy of each and deletes the rest, and :func:`one_per_note` drops a second copy from any search.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ragchat.adapters.aws.opensearch_bulk import ndjson


def one_per_note(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hits, the first (best-ranked) of each note id only."""
    seen: set[str] = set()
    out = []
    for raw in hits:
        key = raw.get("_source", {}).get("note_id") or raw["_id"]
        if key not in seen:
            seen.add(key)
            out.append(raw)
    return out


def flip_units(
    hits: Iterable[dict[str, Any]], index: str, enabled: bool
) -> Iterator[list[tuple[str, str | None]]]:
    """The ``_bulk`` units (NDJSON text, note id) that leave each note id of ``hits`` (scanned with
    their sources, sorted by ``note_id``) once, with ``enabled`` set: a copy in the other state is
    deleted and indexed again flipped (both in one unit, one request), a second copy deleted."""
    previous: str | None = None
    for hit in hits:
        note = hit["_source"].get("note_id")
        delete = ndjson({"delete": {"_index": index, "_id": hit["_id"]}})
        if note is not None and note == previous:
            yield [(delete, None)]
            continue
        previous = note
        if hit["_source"].get("enabled") == enabled:
            continue
        flipped = ndjson({"index": {"_index": index}}) + ndjson({**hit["_source"], "enabled": enabled})
        yield [(delete, None), (flipped, note)]
