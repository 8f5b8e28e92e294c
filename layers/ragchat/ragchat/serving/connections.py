"""Connection limits of the HTTP server (docs/security.md, "Connection floods").

An idle TCP connection costs the server a file descriptor and nothing else, so a flood of them (no
token needed: nothing is read yet) used to exhaust the process's descriptors: ``accept()`` then failed
with ``EMFILE`` thousands of times a second, each failure logged with its traceback (327 MB in 65 s),
and clients holding the token waited for answers that never came. The defences:

- ``raise_fd_limit``: the descriptor soft limit is raised toward the hard limit at start.
- ``ConnectionGate``: at most ``max_total`` connections at once (never more than the descriptors
  left once the server's own files are counted: ``connection_cap``) and ``max_per_ip`` per client
  address among those that carried an authenticated request (a request with the token, or any
  request on a server without one; counted when the request is let in: ``promote``). A connection
  over a cap takes the place of the oldest *idle* one (no request in progress:
  a keep-alive connection between requests, or one that has not finished its headers): a flood of
  idle sockets only pushes itself out, while a client that sends its request at once is served. When
  every connection is busy, the new one is answered 503 + ``Retry-After`` and closed. A request
  refused from its headers (no token, another site, too large, over a rate limit) is answered at
  once, its body unread, and its connection closes within ``Limits.linger_s`` (what the client still
  sends meanwhile is dropped as it comes); until then it counts as idle and is the first pushed out,
  and the per-address cap counts only connections that carried an authenticated request, so
  connections without the token never hold a place a client with it needs (issue 43: 300 sockets
  dripping 10 MB bodies at a byte a second were drained for 30 s each, filled the per-address cap,
  and the token holder got 503).
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
# Accept batches whose sockets may be open before the connections they push out are closed: asyncio
# accepts a batch in one loop iteration, calls ``connection_made`` (where the gate evicts) in a later
# one, and closes an evicted socket in the one after (``connection_lost``), accepting a batch in each.
ACCEPT_BATCHES_IN_FLIGHT = 3
MIN_CONNECTIONS = 16
BUSY_MESSAGE = "Server busy: too many open connections; retry in 1 s"
CONNECTION_KEY = "ragchat.connection"  # in the ASGI scope: the request's connection (``promote``)


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


def _spent(conn: Connection) -> bool:
    """Whether ``conn`` has been answered and is only closing (``GuardedH11Protocol.is_spent``)."""
    spent = getattr(conn, "is_spent", None)
    return bool(spent()) if callable(spent) else False


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
    """Counts the open connections: all of them against ``max_total``, and those with an
    authenticated request against ``max_per_ip`` per client address (module docstring)."""

    def __init__(self, max_total: int, max_per_ip: int, log: ThrottledLog) -> None:
        self.max_total, self.max_per_ip, self.log = max_total, max_per_ip, log
        self._all: dict[Connection, str] = {}  # insertion order: oldest first
        self._proven: dict[str, dict[Connection, None]] = {}  # by address: those that carried a request
        self.refused = 0
        self.evicted = 0
        self.lingering = 0  # refused connections not closed yet (the server's protocol counts them)

    def __len__(self) -> int:
        return len(self._all)

    def count(self, ip: str) -> int:
        """Connections from ``ip`` that carried an authenticated request (what ``max_per_ip`` caps)."""
        return len(self._proven.get(ip, ()))

    def admit(self, conn: Connection, ip: str) -> bool:
        """Count a new connection in, closing another to make room if ``max_total`` are open (one
        answered and closing, else the oldest idle one, else the oldest that has not carried an
        authenticated request); ``False`` if it must be refused: every connection in its way is busy
        with an authenticated request. Nothing is known yet of who is calling: the per-address cap
        waits for the request (``promote``), so connections without the token never take the place
        of a client with it."""
        if len(self._all) >= self.max_total and not self._evict(self._all, f"{self.max_total} in all", True):
            return self._refuse(f"{self.max_total} in all")
        self._all[conn] = ip
        return True

    def promote(self, conn: Connection) -> bool:
        """``conn`` carries an authenticated request: count it against its address's cap (closing
        that address's oldest idle authenticated connection to make room); ``False`` if every one of
        them is busy (the request is then answered 503)."""
        ip = self._all.get(conn)
        if ip is None:
            return True  # not counted (no gate when it was accepted): nothing to cap
        mine = self._proven.setdefault(ip, {})
        if conn in mine:
            return True
        if len(mine) >= self.max_per_ip and not self._evict(mine, f"{self.max_per_ip} from {ip}", False):
            if not mine:
                del self._proven[ip]
            return self._refuse(f"{self.max_per_ip} from {ip}")
        mine[conn] = None
        return True

    def release(self, conn: Connection) -> None:
        """Count ``conn`` out (closed); a connection already released or never admitted is ignored."""
        ip = self._all.pop(conn, None)
        if ip is None:
            return
        mine = self._proven.get(ip)
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self._proven[ip]

    def _evict(self, pool: dict[Connection, Any], cap: str, unproven: bool) -> bool:
        # one answered already and closing first (a refused request's lingering close), else the oldest
        # idle one, else (``unproven``) the oldest that never carried an authenticated request
        victim = next((c for c in pool if _spent(c)), None) or next((c for c in pool if c.is_idle()), None)
        if victim is None and unproven:
            proven = self._proven
            victim = next((c for c, ip in self._all.items() if c not in proven.get(ip, ())), None)
        if victim is None:
            return False
        self.release(victim)
        victim.drop()
        self.evicted += 1
        self.log.warning("evict", "connection limit (%s): closed the oldest idle connection", cap)
        return True

    def _refuse(self, cap: str) -> bool:
        self.refused += 1
        self.log.warning("refuse", "connection limit (%s) and none idle: answered 503", cap)
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
    soft limit leaves once the process's own files, each worker thread's and the accept batches in
    flight (``ACCEPT_BATCHES_IN_FLIGHT``: sockets accepted before those they push out are closed) are
    set aside."""
    limits = fd_limits()
    soft = limits[0] if limits is not None else -1
    if soft < 0:  # RLIM_INFINITY, or no limits at all
        return max_connections
    reserve = FD_BASE_RESERVE + FD_PER_WORKER * max_concurrency + ACCEPT_BATCHES_IN_FLIGHT * accept_batch
    return max(MIN_CONNECTIONS, min(max_connections, soft - reserve))
