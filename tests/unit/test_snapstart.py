"""SnapStart: the chat handler registers a warm-up that builds its resolver before the snapshot."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable, Iterator

import pytest
from ragchat.api import handler as handlers

from tests.events import api_event
from tests.unit.api_support import make_api


@pytest.fixture
def snapshot_hooks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Callable[[], None]]]:
    hooks: list[Callable[[], None]] = []
    module = types.ModuleType("snapshot_restore_py")
    module.register_before_snapshot = hooks.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", module)
    yield hooks


def test_the_warm_up_builds_the_resolver_before_the_first_request(
    snapshot_hooks: list[Callable[[], None]],
) -> None:
    built: list[object] = []
    api = make_api()
    handler = handlers.http_handler({"chat", "ops"}, container=lambda: api.container)
    original = handler.warm  # type: ignore[attr-defined]
    handler.warm = lambda: built.append(original()) or built[-1]  # type: ignore[attr-defined]
    assert handlers.warm_before_snapshot(handler, ("dynamodb",)) is True
    assert len(snapshot_hooks) == 1

    snapshot_hooks[0]()  # what the runtime does before taking the snapshot
    assert built and built[0] is not None

    # After restore the already-built resolver answers (no second build).
    response = handler(api_event("GET", "/health", principal=None), None)
    assert response["statusCode"] == 200
    assert json.loads(response["body"])["status"] == "ok"
    assert original() is built[0]


def test_without_snapstart_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails
    handler = handlers.http_handler({"ops"}, container=lambda: make_api().container)
    assert handlers.warm_before_snapshot(handler) is False  # no error, nothing registered
