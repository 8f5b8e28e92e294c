"""The Swagger UI page still works under its Content-Security-Policy (every inline script allowed by
hash, nothing else): the page renders the API's operations in headless Chromium, and the browser
reports no CSP violation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from ragchat.local_server import LocalServer

from tests.e2e.test_pages_browser import browser
from tests.unit.api_support import make_api

pytestmark = pytest.mark.e2e
__all__ = ["browser"]  # the module-scoped Chromium fixture of the page tests


@pytest.fixture
def local_url() -> Iterator[str]:
    server = LocalServer(make_api().container, port=0)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def test_swagger_renders_under_its_csp(browser: Any, local_url: str) -> None:
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    try:
        page.goto(local_url + "/swagger")
        page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)
        assert page.locator(".swagger-ui .opblock").count() >= 10  # the operations, rendered by script
    finally:
        page.close()
    assert not [p for p in problems if "Content Security Policy" in p], problems
