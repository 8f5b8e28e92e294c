"""Document titles for the answerability decision, remembered for a short while.

The decision embeds passages of the top chunks prefixed with their document's title (what the chunk's
own vector was computed from, :mod:`ragchat.domain.context`): a passage that answers a question in
the user's words often names its subject only in the title ("expense policy: … within 30 days").
The vector index does not carry titles (see :mod:`ragchat.services.sources` for why), so they are
read from the document store in one batched read and remembered per (owner, document) for
``TITLE_TTL_S`` seconds (a document the store does not have, too): a renamed document's passages
read its new title within that time. A failed read leaves the titles out (the passages are then
embedded without them); it never fails a question.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock, system_clock

if TYPE_CHECKING:
    from ragchat.ports import DocumentStore

logger = Logger(service="ragchat", child=True)

TITLE_TTL_S = 60.0
TITLE_CACHE_SIZE = 4096


class DocumentTitles:
    """``titles(owner, document_ids) → {document_id: title}``; unknown or unreadable ids are absent."""

    def __init__(
        self,
        documents: DocumentStore,
        *,
        clock: Clock = system_clock,
        ttl_s: float = TITLE_TTL_S,
        size: int = TITLE_CACHE_SIZE,
    ) -> None:
        self._documents = documents
        self._clock = clock
        self._ttl = ttl_s
        self._size = max(0, size)
        # (owner, document) → (title, or None for a document the store does not have; expiry)
        self._known: OrderedDict[tuple[str, str], tuple[str | None, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, owner: str, document_ids: Sequence[str]) -> dict[str, str]:
        now = self._clock()
        wanted = list(dict.fromkeys(d for d in document_ids if d))
        out: dict[str, str] = {}
        remembered: set[str] = set()
        with self._lock:
            for doc_id in wanted:
                entry = self._known.get((owner, doc_id))
                if entry is not None and entry[1] > now:
                    remembered.add(doc_id)
                    self._known.move_to_end((owner, doc_id))
                    if entry[0] is not None:
                        out[doc_id] = entry[0]
        missing = [d for d in wanted if d not in remembered]
        if not missing:
            return out
        try:
            _, docs = self._documents.get_notes_and_documents(owner, [], missing)
        except Exception as exc:  # the decision goes on without titles
            logger.warning("chat.titles_unavailable", extra={"error": type(exc).__name__})
            return out
        found = {doc.id: doc.title for doc in docs}
        out.update(found)
        with self._lock:
            for doc_id in missing:  # a document the store lacks is remembered too (no re-read per turn)
                self._known[(owner, doc_id)] = (found.get(doc_id), now + self._ttl)
                self._known.move_to_end((owner, doc_id))
            while len(self._known) > self._size:
                self._known.popitem(last=False)
        return out
