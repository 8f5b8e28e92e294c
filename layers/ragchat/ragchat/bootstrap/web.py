"""The whole process: every feature root together (:class:`Container`), the route rate limits, and
:class:`LazyContainer`, the container of one entry point made on first use."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

from ragchat.bootstrap.chat import ChatRoot
from ragchat.bootstrap.ingestion import IngestionRoot

if TYPE_CHECKING:
    from ragchat.config import Part
    from ragchat.services.limits import RequestLimiter


class Container(ChatRoot, IngestionRoot):
    """Every port and service of one process, each built once on first use (a Lambda function pays
    only for what its routes touch). What must be right for the process to be useful is checked when
    it is made: the settings the chosen backends need and the persona file. Entry points build one
    lazily through :class:`LazyContainer`; tests pass overrides (``Container(settings,
    embedder=FakeEmbedder())``) or hand the entry point a factory of their own container."""

    def __enter__(self) -> Container:
        return self

    @cached_property
    def limiter(self) -> RequestLimiter:
        """The one limiter of every limited route (``Settings.limit_rules``; off: passes all)."""
        from ragchat.services.limits import RequestLimiter

        return RequestLimiter.of(self.settings, self.counters, self.clock)


ContainerFactory = Callable[[], Container]


class LazyContainer:
    """The container of one entry point, made on first use (not at import time) by ``factory``
    (default: from the environment), then checked for the ``needs`` of that entry point (e.g. the
    functions that start ingestion need STATE_MACHINE_ARN on AWS). Thread-safe."""

    def __init__(self, factory: ContainerFactory = Container, needs: tuple[Part, ...] = ()) -> None:
        self.factory = factory
        self.needs = needs
        self._value: Container | None = None
        self._lock = threading.Lock()

    def get(self) -> Container:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    built = self.factory()
                    built.settings.require(*self.needs)
                    self._value = built
                value = self._value
        return value
