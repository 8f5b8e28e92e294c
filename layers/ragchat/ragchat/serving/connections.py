"""Connection limits of the HTTP server (docs/security.md, "Connection floods").

An idle TCP connection costs the server a file descriptor and nothing else, so a flood of them (no
token needed: nothing is read yet) used to exhaust the process's descriptors: ``accept()`` then failed
with ``EMFILE`` thousands of times a second, each failure logged with its traceback (327 MB in 65 s),
and clients holding the token waited for answers that never came. The defences:

- ``raise_fd_limit``: the descriptor soft limit is raised toward the hard limit at start.
- ``ConnectionGate``: at most ``max_total`` connections at once (never more than the descriptors
  left once the server's own files are counted: ``connection_cap``) and ``max_per_ip`` per client
  address. A connection over a cap takes the place of the oldest *idle* one (no request in progress:
  a keep-alive connection between requests, or one that has not finished its headers): a flood of
  idle sockets only pushes itself out, while a client that sends its request at once is served. When
  every connection is busy, the new one is answered 503 + ``Retry-After`` and closed.
- ``ThrottledLog``: refusals, evictions and ``accept()`` errors are logged at most once per
  ``every`` seconds each, with the count of those held back, so a flood cannot fill the disk.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

FD_BASE_RESERVE = 64  # descriptors of the process itself: listening socket, database, model, logs…
FD_PER_WORKER = 4  # a worker thread's own: its SQLite connection (database, -wal, -shm) and a spare
FD_TARGET = 65536  # the soft limit asked for at start (or the hard limit, if lower)
MIN_CONNECTIONS = 16


class Connection(Protocol):
    """What the gate needs of a connection (``GuardedH11Protocol`` is one)."""

    def is_idle(self) -> bool:
        """No request in progress: it may be closed without losing anyone's answer."""
        ...

    def drop(self) -> None:
        """Close it now (the gate has already forgotten it)."""
        ...


@dataclass
class _Held:
    last: float
    held: int = 0


class ThrottledLog:
    """One log line per kind of event at most every ``every`` seconds; the next line says how many
    were held back meanwhile. ``clock``: monotonic seconds (tests pass a fake one)."""

    def __init__(
        self, logger: logging.Logger, every: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger, self.every, self.clock = logger, every, clock
        self._kinds: dict[str, _Held] = {}

    def warning(self, kind: str, message: str, *args: Any) -> bool:
        """Log ``message % args`` unless a line of this ``kind`` went out less than ``every`` s ago;
        returns whether it was logged."""
        now = self.clock()
        state = self._kinds.get(kind)
        if state is not None and now - state.last < self.every:
            state.held += 1
            return False
        held = state.held if state is not None else 0
        suffix = f" ({held} more since the last such line)" if held else ""
        self.logger.warning(message + suffix, *args)
        self._kinds[kind] = _Held(now)
        return True


class ConnectionGate:
    """Counts the open connections, overall and per client address (module docstring)."""

    def __init__(self, max_total: int, max_per_ip: int, log: ThrottledLog) -> None:
        self.max_total, self.max_per_ip, self.log = max_total, max_per_ip, log
        self._all: dict[Connection, str] = {}  # insertion order: oldest first
        self._by_ip: dict[str, dict[Connection, None]] = {}
        self.refused = 0
        self.evicted = 0
        self.lingering = 0  # refused connections not closed yet (the server's protocol counts them)

    def __len__(self) -> int:
        return len(self._all)

    def count(self, ip: str) -> int:
        return len(self._by_ip.get(ip, ()))

    def admit(self, conn: Connection, ip: str) -> bool:
        """Count ``conn`` in (closing the oldest idle connection to make room if needed); ``False``
        if it must be refused because every connection in its way is busy."""
        mine = self._by_ip.get(ip, {})
        if len(mine) >= self.max_per_ip and not self._evict(mine, f"{self.max_per_ip} from {ip}"):
            return self._refuse(f"{self.max_per_ip} from {ip}")
        if len(self._all) >= self.max_total and not self._evict(self._all, f"{self.max_total} in all"):
            return self._refuse(f"{self.max_total} in all")
        self._all[conn] = ip
        self._by_ip.setdefault(ip, {})[conn] = None
        return True

    def release(self, conn: Connection) -> None:
        """Count ``conn`` out (closed); a connection already released or never admitted is ignored."""
        ip = self._all.pop(conn, None)
        if ip is None:
            return
        mine = self._by_ip.get(ip)
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self._by_ip[ip]

    def _evict(self, pool: dict[Connection, Any], cap: str) -> bool:
        victim = next((c for c in pool if c.is_idle()), None)
        if victim is None:
            return False
        self.release(victim)
        victim.drop()
        self.evicted += 1
        self.log.warning("evict", "connection limit (%s): closed the oldest idle connection", cap)
        return True

    def _refuse(self, cap: str) -> bool:
        self.refused += 1
        self.log.warning("refuse", "connection limit (%s) and none idle: a new connection answered 503", cap)
        return False


def fd_limits() -> tuple[int, int] | None:
    """(soft, hard) descriptor limits of this process; ``None`` where there are none (Windows)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not a Unix
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return int(soft), int(hard)


def raise_fd_limit(target: int = FD_TARGET) -> tuple[int, int] | None:
    """Raise the descriptor soft limit toward the hard limit (at most ``target``); the limits after.
    Never lowers it; a refusal by the system leaves it as it was."""
    limits = fd_limits()
    if limits is None:
        return None
    import resource

    soft, hard = limits
    infinite = hard == resource.RLIM_INFINITY
    wanted = target if infinite else min(hard, target)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        # (refused e.g. on macOS, which caps an unlimited hard limit lower: OPEN_MAX)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return fd_limits()


def connection_cap(max_connections: int, max_concurrency: int, accept_batch: int) -> int:
    """How many connections the server may hold: ``max_connections``, but no more than the descriptor
    soft limit leaves once the process's own files, each worker thread's and one accept batch (the
    sockets accepted before any can be closed) are set aside."""
    limits = fd_limits()
    soft = limits[0] if limits is not None else -1
    if soft < 0:  # RLIM_INFINITY, or no limits at all
        return max_connections
    reserve = FD_BASE_RESERVE + FD_PER_WORKER * max_concurrency + accept_batch
    return max(MIN_CONNECTIONS, min(max_connections, soft - reserve))
