"""The local runner: the pipeline's steps for several documents at once, fairly, in slices.

Each document is a job: split once, then its batches, then finalize. A *round* splits the jobs not
yet split, then takes batches round-robin — one from each job per pass, passes repeated until about
``coalesce_texts`` texts are gathered — embeds them in one embedder call, stores each batch and
finalizes the jobs whose last batch is stored. Jobs served in a round move to the back of the line.
Documents split in a round take their batches first and, unless the previous round was also theirs,
alone. So a short note submitted while a 1,000-page document is being embedded is READY at the end
of the next round, a small one, whatever is ahead of it (issue 8: first-in first-out made it wait
for the whole big document), and a stream of new notes still leaves every other round to the rest.

Fair between owners (issue 43: three 1.7 KB PDFs of ~4,700 chunks each from one user held another
user's one-line note back 178 s): a round splits the fresh documents of the owner with the least in
hand first, at most one per owner per pass, and stops splitting once its splits have taken
``split_budget_s`` (the rest wait for the next round: one owner's slow PDFs never sit between another
owner's note and its embedding); batches are taken one per *owner* per pass (then one per document
of that owner), so an owner with three big documents gets the same share of a round as an owner
with one. The split of a document that may take long to read (a PDF, an HTML page, an Office file, a
text over a megabyte: :func:`~ragchat.domain.parsing.reads_apart`) runs on the reading lane
(:class:`~ragchat.services.ingest_lane.ReadingLane`), one at a time, the owner with the least in hand
first: the rounds go on meanwhile, so another owner's note never waits for a PDF being read (it
waited up to the split's own limits, ``PARSE_CPU_SECONDS``: 29.5 s in the benchmark). A document
read on the lane takes its batches in the rounds after, in its owner's turn. Without a lane (rounds
run by hand: tests, ``tests.fakes.run_to_end``) a round reads one such document after its embedding.

A document deleted while it is ingested is noticed at its next slice: its job ends, and whatever
notes, vectors or batch files it had are removed (nothing more is embedded for it). One re-uploaded
while it is ingested (issue 8) is noticed the same way: each job carries the content version its
split took, the steps of an older version write nothing, and the job ends without a trace; the
launcher has queued a new run for the newest content.

The stages and the failure policy are :mod:`ragchat.services.ingest_pipeline`'s (the state machine
follows the same definition): a document that fails is ``FAILED`` on its own; if a shared embedder
call fails, each batch in it is embedded again on its own, so only the document whose text fails is
marked ``FAILED``. The runner is built by the composition root (``ragchat.bootstrap.ingestion``); the
local launcher runs one round at a time between its other work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.errors import NotFound, RagchatError
from ragchat.domain.parsing import ParsingInterrupted, reads_apart
from ragchat.services.ingest_pipeline import EMBED_INDEX, FINALIZE, SPLIT, Stage, failure_message
from ragchat.services.ingest_steps import embedding_texts

if TYPE_CHECKING:
    from ragchat.domain.models import Document
    from ragchat.services.ingest_lane import ReadingLane
    from ragchat.services.ingest_steps import IngestSteps

logger = Logger(service="ragchat", child=True)

Key = tuple[str, str]

# Texts per embedder call: the embedder sorts by length and pads per sub-batch, so many short
# documents embed far faster together than one by one.
COALESCE_TEXTS = 256
# Documents split per round (their splits run before the round's embedder call).
MAX_NEW_PER_ROUND = 128
# Seconds of splitting per round: past it, the round's other fresh documents wait for the next one.
SPLIT_BUDGET_S = 1.0


@dataclass(eq=False)  # one per document: compared (and hashed by the lane) as itself
class _Job:
    key: Key
    plan: dict[str, Any] | None = None
    taken: int = 0  # batches read so far
    stored: int = 0  # batches stored so far
    done: bool = False
    heavy: bool | None = None  # a PDF or HTML document (``_heavy``)

    @property
    def version(self) -> str | None:
        """The content version this job ingests (taken at its split; ``None`` before)."""
        return None if self.plan is None else self.plan.get("version")


@dataclass
class _Slice:
    job: _Job
    doc: Document
    chunks: list[dict[str, Any]]
    vectors: list[list[float]] | None = field(default=None)


def _heavy(steps: IngestSteps, job: _Job) -> bool:
    """Whether ``job``'s document is read by a parser that may take long (looked up once)."""
    if job.heavy is None:
        try:
            doc = steps.documents.get_document(*job.key)
        except Exception:  # its split will say what is wrong
            doc = None
        job.heavy = doc is not None and reads_apart(str(doc.content_type), doc.size or 0)
    return job.heavy


def _has_batch(job: _Job) -> bool:
    return not job.done and job.plan is not None and job.taken < len(job.plan["batches"])


def _one_per_owner(by_owner: dict[str, list[_Job]]) -> list[_Job]:
    """One job with a batch left per owner (the first in its line, which then goes to the back)."""
    picked = []
    for jobs in by_owner.values():
        for i, job in enumerate(jobs):
            if _has_batch(job):
                jobs.append(jobs.pop(i))
                picked.append(job)
                break
    return picked


def _title(s: _Slice) -> str:
    """The slice's document title (what pooled evidence passages start with; "" when unknown)."""
    return str(getattr(s.doc, "title", "") or "")


def _size(s: _Slice) -> int:
    """How many chunks the slice's document has."""
    plan = s.job.plan
    return int(plan.get("chunkCount") or 0) if plan is not None else 1 << 30


class SlicedRunner:
    """Runs documents (``(owner, document_id)``) round by round; not thread-safe (one worker)."""

    def __init__(
        self,
        *,
        coalesce_texts: int = COALESCE_TEXTS,
        max_new_per_round: int = MAX_NEW_PER_ROUND,
        split_budget_s: float = SPLIT_BUDGET_S,
        clock: Callable[[], float] = time.monotonic,
        lane: ReadingLane | None = None,
    ) -> None:
        """``clock``: monotonic seconds, for the split budget (tests pass a fake one). ``lane``: where
        the documents read apart (:func:`~ragchat.domain.parsing.reads_apart`) are split (``ragchat
        serve``'s worker); without one, in the round, one per round after its embedding (rounds run
        by hand: tests)."""
        self._coalesce = max(1, int(coalesce_texts))
        self._max_new = max(1, int(max_new_per_round))
        self._split_budget = split_budget_s
        self._clock = clock
        self.lane = lane
        self._jobs: dict[Key, _Job] = {}  # insertion order is the round-robin order
        self._fresh_only = False  # whether the last round embedded only documents split in it
        self._cut_short = False  # whether the last round ended after its splits

    def add(self, keys: Iterable[Key]) -> None:
        for key in keys:
            if key not in self._jobs:
                self._jobs[key] = _Job(key)

    def active(self) -> bool:
        """Whether documents are in hand (some may only be waiting for the reading lane)."""
        return bool(self._jobs)

    def runnable(self) -> bool:
        """Whether a round now has something to do: not only wait for a document being read on the
        lane (the launcher's worker sleeps meanwhile; ``lane.on_done`` wakes it)."""
        lane = self.lane
        if lane is None or lane.ready():
            return bool(self._jobs) or lane is not None
        free = lane.free()
        for job in self._jobs.values():
            if job.done or job.plan is not None:
                return True
            if not lane.holds(job) and (job.heavy is not True or free):
                return True
        return False

    def wait(self, timeout: float) -> bool:
        """Block until a round has something to do (at most ``timeout`` seconds), for callers that
        run rounds by hand (tests). False when it timed out with documents only being read."""
        if self.lane is None or self.runnable() or not self._jobs:
            return True
        self.lane.wait(timeout)
        return self.runnable()

    def close(self) -> None:
        """Stop the reading lane (the server is stopping; a document being read is left as it is)."""
        if self.lane is not None:
            self.lane.close()

    def keys(self) -> set[Key]:
        return set(self._jobs)

    def clear(self) -> None:
        """Forget every job (after an unexpected error: the documents stay as they are)."""
        self._jobs.clear()

    def round(self, steps: IngestSteps, arrived: Callable[[], bool] = lambda: False) -> list[Key]:
        """One round (see the module docstring). Returns the documents it finished: READY,
        FAILED or deleted meanwhile. ``arrived`` tells whether new documents are waiting: if they
        came while this round was splitting (a long text takes a while to split), the round ends
        after its splits so that they are split and embedded next, before any batch of the rest."""
        self._take_read(steps)
        fresh = self._split_fairly(steps, heavy=False, split=self._split)
        if self.lane is not None and self.lane.free():  # the next PDF or page is read while this round embeds
            self._split_fairly(steps, heavy=True, most=1, split=self._read_apart)
        cut_short, self._cut_short = self._cut_short, False
        if fresh and not cut_short and arrived():  # never twice in a row: embedding goes on
            self._cut_short = True
            return self._collect([])
        # Documents split just now go first, and alone unless the last round was theirs too: a
        # short note is READY at the end of this round, and a stream of them never starves the rest.
        alone = bool(fresh) and not self._fresh_only
        self._fresh_only = alone
        order = fresh if alone else fresh + [j for j in self._jobs.values() if j not in fresh]
        served: list[_Job] = []
        slices = self._take(steps, order, served)
        self._store(steps, slices)
        if self.lane is None:  # the round's notes are embedded: now one PDF or page, for the next round
            self._split_fairly(steps, heavy=True, most=1, split=self._split)
        return self._collect(served)

    def _collect(self, served: list[_Job]) -> list[Key]:
        """Drop the finished jobs (returned); those that had a batch go to the back of the line."""
        finished = [job.key for job in self._jobs.values() if job.done]
        for job in served:
            self._jobs.pop(job.key, None)
            if not job.done:
                self._jobs[job.key] = job
        for key in finished:
            self._jobs.pop(key, None)
        return finished

    # ---------------------------------------------------------------- slices
    def _split_fairly(
        self,
        steps: IngestSteps,
        *,
        heavy: bool,
        split: Callable[[IngestSteps, _Job], None],
        most: int | None = None,
    ) -> list[_Job]:
        """Split fresh documents of one kind (``heavy``: read apart, whose reading may take long;
        else text) with ``split``: the owner with the fewest documents in hand first, one per owner
        per pass, until ``most`` (``max_new_per_round``) or the split budget is spent (at least
        one). The jobs split (or handed to the lane)."""
        most = self._max_new if most is None else most
        waiting: dict[str, list[_Job]] = {}
        load: dict[str, int] = {}
        for job in self._jobs.values():
            owner = job.key[0]
            load[owner] = load.get(owner, 0) + 1
            if job.plan is None and not job.done and not self._reading(job) and _heavy(steps, job) is heavy:
                waiting.setdefault(owner, []).append(job)
        owners = sorted(waiting, key=lambda o: load[o])  # stable: ties in order of arrival
        started = self._clock()
        done: list[_Job] = []
        while owners:
            for owner in list(owners):
                job = waiting[owner].pop(0)
                if not waiting[owner]:
                    owners.remove(owner)
                split(steps, job)
                done.append(job)
                if len(done) >= most or self._clock() - started >= self._split_budget:
                    return done
        return done

    def _split(self, steps: IngestSteps, job: _Job) -> None:
        try:
            plan = steps.split(*job.key)
        except Exception as exc:
            self._planned(steps, job, None, exc)
        else:
            self._planned(steps, job, plan, None)

    def _read_apart(self, steps: IngestSteps, job: _Job) -> None:
        """Hand ``job``'s split to the reading lane (taken back by :meth:`_take_read`)."""
        owner, document_id = job.key
        assert self.lane is not None
        self.lane.submit(job, lambda: steps.split(owner, document_id))

    def _reading(self, job: _Job) -> bool:
        return self.lane is not None and self.lane.holds(job)

    def _take_read(self, steps: IngestSteps) -> None:
        """The splits the lane ended since the last round: their jobs take their batches from now on
        (a job dropped meanwhile, ``clear``, is forgotten)."""
        for job, plan, error in self.lane.take() if self.lane is not None else []:
            assert isinstance(job, _Job)
            if self._jobs.get(job.key) is job:
                self._planned(steps, job, plan, error)

    def _planned(
        self, steps: IngestSteps, job: _Job, plan: dict[str, Any] | None, exc: Exception | None
    ) -> None:
        """A split ended: its plan, or the error it raised."""
        if isinstance(exc, ParsingInterrupted):  # the server is stopping: left PROCESSING, resumed later
            job.done = True
            return
        if exc is not None or plan is None:
            self._end(steps, job, SPLIT, exc or RuntimeError("the split returned no plan"))
            return
        job.plan = plan
        if not plan["batches"]:  # superseded while splitting: finalize stands down and ends it
            self._finalize(steps, job)

    def _take(self, steps: IngestSteps, order: list[_Job], served: list[_Job]) -> list[_Slice]:
        """Batches for one embedder call: a pass takes one batch per owner (their documents in turn),
        passes repeated until about ``coalesce_texts`` texts are gathered."""
        slices: list[_Slice] = []
        texts = 0
        by_owner: dict[str, list[_Job]] = {}
        for job in order:
            by_owner.setdefault(job.key[0], []).append(job)
        while texts < self._coalesce:
            progressed = False
            for job in _one_per_owner(by_owner):
                if job.plan is None or not _has_batch(job):
                    continue
                item = job.plan["batches"][job.taken]
                job.taken += 1
                progressed = True
                if job not in served:
                    served.append(job)
                try:
                    doc, chunks = steps.read_batch(job.key[0], job.key[1], item["key"], job.version)
                except Exception as exc:
                    self._end(steps, job, EMBED_INDEX, exc)
                    continue
                slices.append(_Slice(job, doc, chunks))
                texts += len(chunks)
                if texts >= self._coalesce:
                    break
            if not progressed:
                break
        return slices

    def _store(self, steps: IngestSteps, slices: list[_Slice]) -> None:
        chunks = [c for s in slices for c in s.chunks]
        titles = [_title(s) for s in slices for _ in s.chunks]
        # small documents get their evidence in this call only when the call is small: a note added
        # while nothing else ingests, not each of a bulk load's thousands (READY stays fast there)
        total = sum({id(s.job): _size(s) for s in slices}.values())
        texts = embedding_texts(chunks)
        try:
            vectors = steps.embed(texts, chunks, titles, total) if texts else []
        except Exception:
            logger.warning("ingest.coalesced_embed_failed", extra={"batches": len(slices)})
        else:
            offset = 0
            for s in slices:
                s.vectors, offset = vectors[offset : offset + len(s.chunks)], offset + len(s.chunks)
        for s in slices:
            job = s.job
            if job.done:
                continue
            owner, document_id = job.key
            try:
                # A failed shared call: embed this batch on its own, the error belongs to one document.
                mine = s.vectors
                if mine is None:
                    n = len(s.chunks)
                    mine = steps.embed(embedding_texts(s.chunks), s.chunks, [_title(s)] * n, _size(s))
                stored = steps.store_batch(owner, document_id, s.doc, s.chunks, mine, version=job.version)
            except Exception as exc:
                self._end(steps, job, EMBED_INDEX, exc)
                continue
            if stored == 0 and s.chunks:  # re-uploaded meanwhile: finalize stands down and ends the job
                self._finalize(steps, job)
                continue
            job.stored += 1
            if job.plan is not None and job.stored == len(job.plan["batches"]):
                self._finalize(steps, job)

    def _finalize(self, steps: IngestSteps, job: _Job) -> None:
        assert job.plan is not None
        try:
            steps.finalize(job.key[0], job.key[1], job.plan["chunkCount"], job.version)
        except Exception as exc:
            self._end(steps, job, FINALIZE, exc)
        else:
            job.done = True

    @staticmethod
    def _end(steps: IngestSteps, job: _Job, stage: Stage, exc: Exception) -> None:
        """A slice failed: the document was deleted (clean up quietly) or it is ``FAILED``."""
        job.done = True
        owner, document_id = job.key
        if isinstance(exc, NotFound) and steps.documents.get_document(owner, document_id) is None:
            steps.abandon(owner, document_id)
        else:
            record_failure(steps, owner, document_id, stage, exc, job.version)


def record_failure(
    steps: IngestSteps, owner: str, document_id: str, stage: Stage, exc: Exception, version: str | None
) -> None:
    """Log ``exc`` and run the pipeline's failure step for it."""
    if isinstance(exc, RagchatError) and exc.status < 500:  # bad input (e.g. an unreadable PDF)
        logger.warning(
            "ingest.error", extra={"documentId": document_id, "phase": stage.step, "error": exc.message}
        )
    else:
        logger.exception("ingest.error", extra={"documentId": document_id, "phase": stage.step})
    try:
        steps.fail(owner, document_id, failure_message(stage, exc), version)
    except Exception:  # pragma: no cover - storage down: nothing more we can do here
        logger.exception("ingest.fail_error", extra={"documentId": document_id})
