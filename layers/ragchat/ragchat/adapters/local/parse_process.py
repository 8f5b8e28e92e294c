"""``DocumentParser`` in a child process with hard limits (issue 30: one document must never freeze
the server).

Extracting, splitting and heading an upload is pure Python: in the API process it holds the GIL, and
a hostile document stalled every request (84 s for one HTML body). Here it runs in one warm child
process (``multiprocessing``, ``spawn`` context: nothing of the parent's threads or model is
inherited), one document at a time, under three limits:

- CPU: before each document the child sets its ``RLIMIT_CPU`` soft limit to the CPU it has used so
  far plus ``cpu_seconds``; the kernel's ``SIGXCPU`` then stops the reading (a Python exception);
- memory: ``RLIMIT_AS`` (address space) of ``memory_bytes`` for the child's life; an allocation over
  it is a ``MemoryError``;
- wall clock: the parent waits at most ``wall_seconds`` for the answer, then kills the child (a loop
  inside C code, which no signal handler interrupts, or a child stopped by the system).

A document over any limit raises ``ExtractionError`` with the reason (``domain.file_errors``); the
child is replaced (a fresh one starts with the next document) and the next document is read
normally. On a platform without ``resource`` (not Unix) only the wall-clock limit applies.

The child never outlives the server: a thread of its own looks every ``PARENT_WATCH_S`` whether its
parent is still the process that started it, and ends the child when it is not (the server was
killed outright, ``kill -9`` or the out-of-memory killer, with a document being read).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from ragchat.domain.extraction import ExtractionError
from ragchat.domain.file_errors import too_much_memory, too_slow_to_read
from ragchat.domain.parsing import Parsed, ParseJob, ParsingInterrupted, parse_document

try:
    import resource
except ImportError:  # pragma: no cover - not Unix: the wall-clock limit alone
    resource = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

Parse = Callable[[bytes, Any], Any]  # (body, job) -> result: parse_document, or a page render
PARENT_WATCH_S = 0.5  # how often the child looks whether the server that started it is still there
WARM_WALL_S = 120.0  # how long a child may take to start (``ProcessPdfCheck``)


class _CpuExceeded(BaseException):
    """Raised by ``SIGXCPU`` wherever the reading is. A ``BaseException``, so the readers' own
    ``except Exception`` (pypdf's many, ``extraction``'s "Could not read PDF: …") cannot swallow it:
    as an ``Exception`` a PDF stopped by the limit FAILED as "Could not read PDF: ." or read on until
    the wall-clock limit (issue 43)."""


class ParserBusy(Exception):
    """The child is reading another document (``ProcessParser.call`` with ``wait``)."""


def _on_cpu_limit(_signum: int, _frame: Any) -> None:
    raise _CpuExceeded


def _set_cpu_limit(seconds: float | None) -> None:
    """The soft CPU limit: the CPU used so far plus ``seconds`` (``None``: no limit)."""
    if resource is None:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if seconds is None:
        soft = hard
    else:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(usage.ru_utime + usage.ru_stime + seconds) + 1
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _set_memory_limit(limit: int) -> None:
    if resource is None or not hasattr(resource, "RLIMIT_AS"):
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _read_one(parse: Parse, job: ParseJob, body: bytes, cpu_seconds: float) -> tuple[str, Any]:
    _set_cpu_limit(cpu_seconds)
    try:
        return "ok", parse(body, job)
    except _CpuExceeded:
        return "cpu", None
    except MemoryError:
        return "memory", None
    except ExtractionError as exc:  # the budget of the extraction itself, an unreadable file
        return "invalid", exc.message
    except Exception as exc:
        from ragchat.domain.errors import NotFound, ValidationError

        if isinstance(exc, ValidationError):
            return "invalid", exc.message
        if isinstance(exc, NotFound):  # e.g. a PDF page past the end (the viewer's pages)
            return "missing", exc.message
        return "error", f"{type(exc).__name__}: {exc}"
    finally:
        _set_cpu_limit(None)


def _watch_parent(parent: int) -> None:
    """End this process as soon as its parent is no longer ``parent``, the server that started it
    (it died, even before this child was running: the child was handed to another process), even
    in the middle of a document."""
    while os.getppid() == parent:
        time.sleep(PARENT_WATCH_S)
    os._exit(0)


def child_main(conn: Connection, memory_bytes: int, parse: Parse, server: int) -> None:
    """The child: read documents from ``conn`` until it closes (one ``(job, cpu_seconds)`` then the
    body's bytes each), answer ``(kind, value)`` for each. ``server``: the process id of the server
    that started it."""
    threading.Thread(target=_watch_parent, args=(server,), name="parent-watch", daemon=True).start()
    _set_memory_limit(memory_bytes)
    if resource is not None:
        signal.signal(signal.SIGXCPU, _on_cpu_limit)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C stops the server, which stops the child
    while True:
        try:
            message = conn.recv()
            if message is None:
                return
            job, cpu_seconds = message
            body = conn.recv_bytes()
        except (EOFError, OSError):
            return
        answer = _read_one(parse, job, body, cpu_seconds)
        del body
        try:
            conn.send(answer)
        except MemoryError:
            conn.send(("memory", None))
        except OSError:  # the server is gone
            return


class ProcessParser:
    """Reads documents in a warm child process under CPU, memory and wall-clock limits (module
    docstring). Thread-safe: one document at a time."""

    def __init__(
        self,
        *,
        cpu_seconds: float,
        memory_bytes: int,
        wall_seconds: float,
        parse: Parse = parse_document,
    ) -> None:
        """``parse``: what the child runs per document (importable by name: tests give a slow one)."""
        self.cpu_seconds = cpu_seconds
        self.memory_bytes = memory_bytes
        self.wall_seconds = wall_seconds
        self._parse = parse
        # spawn: a fresh interpreter (a fork would copy the server's threads, locks and model)
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._closed = False
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self.started = 0  # child processes started (tests; the per-document cost is a warm child's)

    def parse(self, body: Callable[[], bytes], job: ParseJob) -> Parsed:
        parsed = self.call(body, job)
        assert isinstance(parsed, Parsed)
        return parsed

    def call(
        self, body: Callable[[], bytes], job: Any, *, wait: float | None = None, wall: float | None = None
    ) -> Any:
        """``parse(body(), job)`` in the child, under the limits (any picklable job and result: the
        document viewer renders PDF pages this way too). ``wait``: how long to wait for the child
        while it reads another document (``None``: as long as it takes); past it, :class:`ParserBusy`.
        ``wall``: this call's wall-clock limit (default ``wall_seconds``)."""
        wall_seconds = self.wall_seconds if wall is None else wall
        if not self._lock.acquire(timeout=-1 if wait is None else wait):
            raise ParserBusy
        with contextlib.ExitStack() as held:
            held.callback(self._lock.release)
            if self._closed:
                raise ParsingInterrupted("the server is stopping")
            data = body()  # before anything is sent: a missing body leaves the child waiting for the next
            conn = self._child()
            started = time.monotonic()
            try:
                conn.send((job, self.cpu_seconds))
                conn.send_bytes(data)
                del data  # the child has its copy: not held here while it reads
                if not conn.poll(wall_seconds):
                    logger.warning("parse.wall_limit", extra={"seconds": wall_seconds})
                    self._stop()
                    raise ExtractionError(too_slow_to_read(self.cpu_seconds))
                kind, value = conn.recv()
            except (EOFError, OSError):  # the child died: stopped by close(), or killed by the system
                code = self._stop()
                if self._closed:
                    raise ParsingInterrupted("the server is stopping") from None
                logger.warning("parse.child_died", extra={"exitcode": code})
                raise ExtractionError(self._death_reason(code, time.monotonic() - started)) from None
        return self._answer(kind, value)

    def _answer(self, kind: str, value: Any) -> Any:
        if kind == "ok":
            return value
        if kind == "missing":
            from ragchat.domain.errors import NotFound

            raise NotFound(str(value))
        if kind in ("cpu", "memory"):
            with self._lock:
                self._stop()  # a fresh child for the next document (its heap may be fragmented)
            if kind == "cpu":
                raise ExtractionError(too_slow_to_read(self.cpu_seconds))
            raise ExtractionError(too_much_memory(self.memory_bytes))
        if kind == "invalid":
            raise ExtractionError(str(value))
        raise RuntimeError(str(value))

    def _death_reason(self, code: int | None, elapsed: float) -> str:
        if code in (-signal.SIGXCPU, -signal.SIGKILL) and elapsed >= self.cpu_seconds:
            return too_slow_to_read(self.cpu_seconds)
        return too_much_memory(self.memory_bytes)  # the usual cause: the system's out-of-memory killer

    def _child(self) -> Connection:
        if self._process is not None and self._conn is not None and self._process.is_alive():
            return self._conn
        self._stop()
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=child_main,
            args=(child, self.memory_bytes, self._parse, os.getpid()),
            name="ragchat-parse",
            daemon=True,
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent
        self.started += 1
        return parent

    def _stop(self) -> int | None:
        """Kill the child (if any); its exit code."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            conn.close()
        if process is None:
            return None
        if process.is_alive():
            process.kill()
        process.join(5)
        code = process.exitcode
        with contextlib.suppress(ValueError):
            process.close()
        return code

    def close(self) -> None:
        """Stop the child (the server is stopping): a document being read is left as it is
        (:class:`ParsingInterrupted`). Never waits for the document being read."""
        self._closed = True
        process, conn = self._process, self._conn
        if process is not None and process.is_alive():
            process.kill()
        if self._lock.acquire(timeout=5):
            try:
                if conn is not None and self._conn is conn:
                    self._stop()
            finally:
                self._lock.release()


class LanedParser:
    """The ingestion's ``DocumentParser`` for ``ragchat serve``: two :class:`ProcessParser` children
    under the same limits, one for the documents read apart (PDF, HTML, Office, e-book, RTF, text over
    a megabyte: ``domain.parsing.reads_apart``, read on the worker's reading lane) and one for short
    text, so a note is never queued behind a PDF being read (issue 43). Each child starts with the
    first document of its kind; a server that only gets notes never starts the second."""

    def __init__(self, make: Callable[[], ProcessParser]) -> None:
        self.text = make()
        self.apart = make()

    def parse(self, body: Callable[[], bytes], job: ParseJob) -> Parsed:
        from ragchat.domain.parsing import reads_apart

        held = [body()]  # its size decides the child; handed over once, not held here while read
        child = self.apart if reads_apart(job.content_type, len(held[0])) else self.text
        return child.parse(held.pop, job)

    @property
    def started(self) -> int:
        """Child processes started, both kinds together."""
        return self.text.started + self.apart.started

    def close(self) -> None:
        self.apart.close()
        self.text.close()


class ProcessPdfCheck:
    """The PDF check before the 202 (``extraction.check_pdf``: a PDF up to 5 MiB is opened to its
    first page with text) in a child process of its own, under ``cpu_seconds`` of CPU and
    ``wall_seconds`` (issue 43: it ran on the request thread with no limit, and a 1,454-byte PDF
    whose page draws one form 64 times cost the server 21.9 s of CPU before its 202). Over a limit:
    ``ExtractionError`` (a 400 naming it). While the child checks another upload for more than
    ``wait_s``, the check is left to the pipeline (its reading has the ``PARSE_*`` limits and its
    owner's share of the queue): one user's uploads never queue another's behind them."""

    def __init__(self, *, cpu_seconds: float, wall_seconds: float, memory_bytes: int, wait_s: float = 0.2):
        """The child is started at once, on a thread of its own (starting an interpreter may take
        longer than the wall budget on a busy machine): until it is up, checks are left to the
        pipeline, never refused for the time it took to start."""
        from ragchat.domain.parsing import check_pdf_body

        self.wait_s = wait_s
        self.deferred = 0  # checks left to the pipeline (tests, logs)
        self.ready = threading.Event()  # the child is up
        self._parser = ProcessParser(
            cpu_seconds=cpu_seconds,
            memory_bytes=memory_bytes,
            wall_seconds=wall_seconds,
            parse=check_pdf_body,
        )
        threading.Thread(target=self._warm, name="ragchat-pdf-check", daemon=True).start()

    def _warm(self) -> None:
        with contextlib.suppress(Exception):  # (an empty body: "not a PDF", from the child)
            self._parser.call(lambda: b"", None, wall=WARM_WALL_S)
        self.ready.set()

    def __call__(self, data: bytes) -> None:
        try:
            self._parser.call(lambda: data, None, wait=self.wait_s)
        except ExtractionError as exc:
            if exc.message != too_slow_to_read(self._parser.cpu_seconds):
                raise
            limit = f"{self._parser.cpu_seconds:g} s of CPU"
            raise ExtractionError(
                f"Could not read PDF: its first page with text took more than {limit} to open "
                "(PDF_CHECK_CPU_SECONDS). It may draw the same content over and over; export it again "
                "or send its text."
            ) from None
        except ParserBusy:
            self.deferred += 1
            logger.info("pdf_check.deferred")
        except ParsingInterrupted:  # the server is stopping: the pipeline reads it at the next start
            pass

    def close(self) -> None:
        self._parser.close()
