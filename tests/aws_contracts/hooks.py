"""Adding a botocore handler to every session created from now on.

botocore registers ``botocore.handlers.BUILTIN_HANDLERS`` on each new session; moto adds its own
there the same way. The list is changed in place (moto appends to that very object when it is first
imported, possibly during a test) and the handler removed again afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def session_handler(event: str, handler: Callable[..., Any]) -> Iterator[None]:
    from botocore import handlers

    entry = (event, handler)
    handlers.BUILTIN_HANDLERS.append(entry)
    try:
        yield
    finally:
        handlers.BUILTIN_HANDLERS.remove(entry)
