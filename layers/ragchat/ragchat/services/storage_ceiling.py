"""What each workspace holds, reserved atomically against ``MAX_WORKSPACE_BYTES`` (issue 43).

Every workspace (personal or shared) has a byte ledger, one counter (the ``Counters`` port:
SQLite's ``counters`` table, the DynamoDB counters table) holding the sum of its documents' body
sizes. An upload *reserves* its size before anything is stored, with the same atomic conditional
increment as the daily ceilings (``Counters.increment_up_to``: one ``INSERT … ON CONFLICT … WHERE``
statement in SQLite, one conditional ``UpdateItem`` in DynamoDB): of 8 concurrent 150 KB uploads
under a 200,000-byte ceiling exactly one is stored (before: a list of the workspace, then the
write, so all 8 saw room and 450,000 bytes were stored). The reservation is given back when the
body is not stored after all (a later check refused it, the store failed), and a document's size
when it is deleted; a new version reserves (or gives back) only the difference.

The ledger is kept whether a ceiling is set or not, so setting one later starts from the truth.
It is *seeded* once per workspace, on first use: one request claims the seeding (a conditional
counter), lists the workspace's documents once and writes their sum; concurrent uploads wait
(bounded) until it is done. No upload lists a workspace after that. The sum is written only where no
ledger is yet (``Counters.put_new``: a conditional write on both stores), so a seeder whose claim
ran out while it was listing (a slow count) never writes over a ledger another one seeded and
uploads have reserved in since. A ledger never expires (its counter has a century-long TTL); it
goes with its workspace (:meth:`WorkspaceBytes.forget`, when a shared workspace is deleted).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock, system_clock
from ragchat.domain.errors import PayloadTooLarge, TransientError

if TYPE_CHECKING:
    from ragchat.ports import Counters, DocumentStore

logger = Logger(service="ragchat", child=True)

HELD_TTL_S = 100 * 365 * 24 * 3600  # never expires in practice
SEED_CLAIM_TTL_S = 60.0  # a seeder that died lets another one seed after this
SEED_WAIT_S = 10.0  # how long an upload waits for another request's seeding
SEED_POLL_S = 0.05
NO_CEILING = 2**62


class WorkspaceBytes:
    """The byte ledger of every workspace (module docstring). ``cap`` 0: none, only counted."""

    def __init__(
        self,
        counters: Counters,
        documents: DocumentStore,
        cap: int,
        clock: Clock = system_clock,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.counters = counters
        self.documents = documents
        self.cap = int(cap)
        self.clock = clock
        self.sleep = sleep

    @staticmethod
    def _held_key(workspace: str) -> str:
        return f"ws-bytes:{workspace}"

    @staticmethod
    def _seeded_key(workspace: str) -> str:
        return f"ws-bytes-seeded:{workspace}"

    @staticmethod
    def _claim_key(workspace: str) -> str:
        return f"ws-bytes-seeding:{workspace}"

    def held(self, workspace: str) -> int:
        """What ``workspace`` holds now (its ledger)."""
        self._seed(workspace)
        return self.counters.get(self._held_key(workspace), now=self.clock())

    def reserve(self, workspace: str, size: int) -> None:
        """Reserve ``size`` more bytes in ``workspace``, or ``PayloadTooLarge`` (413) and nothing
        reserved. ``size`` ≤ 0 (a smaller new version) reserves nothing: see :meth:`release`."""
        if size <= 0:
            return
        self._seed(workspace)
        key, now = self._held_key(workspace), self.clock()
        limit = self.cap or NO_CEILING
        if (
            self.counters.increment_up_to(key, limit=limit, amount=size, ttl_seconds=HELD_TTL_S, now=now)
            is None
        ):
            held = self.counters.get(key, now=now)
            raise PayloadTooLarge(
                f"This workspace holds {held} bytes of its {self.cap} (MAX_WORKSPACE_BYTES): this file "
                f"({size} bytes) does not fit; delete documents first"
            )

    def release(self, workspace: str, size: int) -> None:
        """Give ``size`` bytes back (a reservation not used, a document deleted). A ledger not seeded
        yet is left alone: its seeding counts what is stored then."""
        if size <= 0 or not self._is_seeded(workspace):
            return
        self.counters.increment(
            self._held_key(workspace), amount=-size, ttl_seconds=HELD_TTL_S, now=self.clock()
        )

    def forget(self, workspace: str) -> None:
        """The workspace is gone: drop its ledger (its counters, none left behind)."""
        self.counters.reset(self._held_key(workspace))
        self.counters.reset(self._seeded_key(workspace))
        self.counters.reset(self._claim_key(workspace))

    # ------------------------------------------------------------------ seeding
    def _is_seeded(self, workspace: str) -> bool:
        return self.counters.get(self._seeded_key(workspace), now=self.clock()) > 0

    def _seed(self, workspace: str) -> None:
        """Make sure the ledger counts what the workspace held before it existed (once)."""
        polls = int(SEED_WAIT_S / SEED_POLL_S)
        while not self._is_seeded(workspace):
            claim = self._claim_key(workspace)
            if self.counters.increment_up_to(claim, limit=1, ttl_seconds=SEED_CLAIM_TTL_S, now=self.clock()):
                # seeded by another request between the look and the claim: counting again would
                # overwrite what was reserved since
                if self._is_seeded(workspace):
                    return
                try:
                    self._count(workspace)
                except BaseException:
                    self.counters.reset(claim)  # let another request count it
                    raise
                return  # the claim stays until it expires: nobody counts twice
            polls -= 1
            if polls < 0:
                raise TransientError("This workspace's storage is being counted; retry in a few seconds")
            self.sleep(SEED_POLL_S)

    def _count(self, workspace: str) -> None:
        held, cursor = 0, None
        while True:
            page = self.documents.list_documents(workspace, limit=200, cursor=cursor)
            held += sum(d.size or 0 for d in page.items)
            if not (cursor := page.cursor):
                break
        now = self.clock()
        # only where no ledger is yet: another seeder may have written one (this claim ran out while
        # listing) and uploads reserved in it since; it is the one that counts
        first = self.counters.put_new(self._held_key(workspace), held, ttl_seconds=HELD_TTL_S, now=now)
        self.counters.put(self._seeded_key(workspace), 1, ttl_seconds=HELD_TTL_S, now=now)
        event = "workspace.bytes_counted" if first else "workspace.bytes_already_counted"
        logger.info(event, extra={"workspace": workspace, "bytes": held})
