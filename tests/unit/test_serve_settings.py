"""``SERVE_*`` settings: the limits of ``ragchat serve`` and the chat_stream server (issue 8)."""

from __future__ import annotations

import pytest
from ragchat.config import ConfigError, load_settings
from ragchat.serving.asgi import Limits


def test_the_defaults_are_the_servers_defaults() -> None:
    assert Limits.of(load_settings({})) == Limits()
    assert Limits().backlog >= 1024


def test_each_setting_reaches_the_limits() -> None:
    settings = load_settings(
        {
            "SERVE_MAX_CONCURRENCY": "16",
            "SERVE_HEADER_TIMEOUT_SECONDS": "2.5",
            "SERVE_BODY_TIMEOUT_SECONDS": "90",
            "SERVE_KEEPALIVE_SECONDS": "20",
            "SERVE_BACKLOG": "4096",
        }
    )
    limits = Limits.of(settings)
    assert (limits.max_concurrency, limits.header_timeout, limits.body_timeout) == (16, 2.5, 90.0)
    assert (limits.keep_alive, limits.backlog) == (20.0, 4096)
    assert limits.max_url_bytes == Limits().max_url_bytes  # what no setting governs keeps its default


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SERVE_MAX_CONCURRENCY", "0"),
        ("SERVE_MAX_CONCURRENCY", "many"),
        ("SERVE_HEADER_TIMEOUT_SECONDS", "0"),
        ("SERVE_HEADER_TIMEOUT_SECONDS", "nan"),
        ("SERVE_BODY_TIMEOUT_SECONDS", "-1"),
        ("SERVE_BODY_TIMEOUT_SECONDS", "inf"),
        ("SERVE_KEEPALIVE_SECONDS", "soon"),
        ("SERVE_BACKLOG", "0"),
        ("SERVE_BACKLOG", "100000"),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        load_settings({variable: value})
