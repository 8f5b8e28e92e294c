"""Adding a botocore handler to every session created from now on, and to boto3's default session
if an earlier test made one (``boto3.client(...)`` makes its clients from it: without this, a test
after such a test would run without the handler).

botocore registers ``botocore.handlers.BUILTIN_HANDLERS`` on each new session; moto adds its own
there the same way. The list is changed in place (moto appends to that very object when it is first
imported, possibly during a test) and the handler removed again afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def session_handler(event: str, handler: Callable[..., Any], *, first: bool = False) -> Iterator[None]:
    """``first``: ahead of the handlers already listed (a contract fake's ``before-send`` answers
    before moto's catch-all one, which would claim every AWS host)."""
    import boto3
    from botocore import handlers

    entry = (event, handler)
    if first:
        handlers.BUILTIN_HANDLERS.insert(0, entry)
    else:
        handlers.BUILTIN_HANDLERS.append(entry)
    default = boto3.DEFAULT_SESSION.events if boto3.DEFAULT_SESSION is not None else None
    if default is not None:
        (default.register_first if first else default.register)(event, handler)
    try:
        yield
    finally:
        handlers.BUILTIN_HANDLERS.remove(entry)
        if default is not None:
            default.unregister(event, handler)


@contextmanager
def moto_leaves_alone(host: str) -> Iterator[None]:
    """moto's ``before-send`` handler is called for every request even once another handler has
    answered (botocore calls them all and takes the first response), and claims every AWS host it has
    a backend for (raising ``NotImplementedError`` for what it does not emulate): requests whose URL
    holds ``host`` (``"://bedrock-runtime."``) are left to the contract fake that answers them."""
    from moto.core.botocore_stubber import BotocoreStubber

    call = BotocoreStubber.__call__

    def unless_faked(self: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
        if host in request.url:
            return None
        return call(self, event_name, request, **kwargs)

    BotocoreStubber.__call__ = unless_faked  # type: ignore[method-assign]
    try:
        yield
    finally:
        BotocoreStubber.__call__ = call  # type: ignore[method-assign]
