"""``ragchat.serving.events``: which requests ``ragchat serve`` lets through without its token."""

from __future__ import annotations

import pytest
from ragchat.serving.events import bearer_refusal

TOKEN = "s3cret"


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/health"), ("GET", "/ui"), ("GET", "/ui/c/01M8GPDR55KJ6E98C09Q20EZ04"),
     ("GET", "/documents/ui"), ("GET", "/static/common.js"),
     ("HEAD", "/static/style.css"), ("OPTIONS", "/notes")],
)  # fmt: skip
def test_health_pages_their_files_and_preflights_need_no_token(method: str, path: str) -> None:
    assert bearer_refusal(TOKEN, method, path, "") is None


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/notes"), ("POST", "/static/common.js"), ("GET", "/staticx"), ("GET", "/openapi.json"),
     ("GET", "/ui/c/a/b"), ("GET", "/ui/c/"), ("POST", "/ui/c/abc"), ("GET", "/ui/c/a%2Fb")],
)  # fmt: skip
def test_everything_else_needs_the_token(method: str, path: str) -> None:
    status, body, headers = bearer_refusal(TOKEN, method, path, "") or (0, {}, {})
    assert (status, body, headers) == (401, {"error": "Unauthorized"}, {"WWW-Authenticate": "Bearer"})
    assert bearer_refusal(TOKEN, method, path, f"Bearer {TOKEN}") is None
