"""The HTML pages: served as HTML, need a principal, render no data server-side and use no HTML sinks.

What the pages do in a browser is tested in ``tests/e2e/test_pages_browser.py`` (headless Chromium).
"""

from __future__ import annotations

import re

from tests.events import header
from tests.unit.api_support import make_api

PAGES = ("/ui", "/write", "/documents/ui")
# Every way a script could turn data into markup or code.
HTML_SINKS = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function")


def test_pages_are_html_and_need_a_principal():
    api = make_api()
    for path in PAGES:
        res = api.call("GET", path)
        assert res["statusCode"] == 200, path
        assert header(res, "Content-Type").startswith("text/html")
        assert "<script>" in res["body"] and "textContent" in res["body"]
        assert api.call("GET", path, principal=None)["statusCode"] == 401


def test_pages_never_render_data_as_html():
    api = make_api()
    for path in PAGES:
        body = api.call("GET", path)["body"]
        for sink in HTML_SINKS:
            assert sink not in body, (path, sink)
        assert body.count("<script>") == 1, path  # one inline script, nothing else executable


def test_pages_forbid_outside_scripts_and_connections():
    api = make_api()
    for path in PAGES:
        csp = header(api.call("GET", path), "Content-Security-Policy")
        directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
        assert directives["default-src"] == "'self'"
        assert directives["connect-src"] == "'self'"
        assert "http" not in directives["script-src"]


def test_ui_page_has_ask_and_chat():
    body = make_api().call("GET", "/ui")["body"]
    ids = set(re.findall(r"\bid=([\w-]+)", body))
    assert {"q", "answer", "sources", "new-conv", "convs", "messages", "chat-form", "chat-error"} <= ids
    for endpoint in ("'/chat/conversations'", "'/chat/conversations/'", "'/messages'", "'/?text='"):
        assert endpoint in body, endpoint


def test_documents_ui_is_not_taken_for_a_document_id():
    api = make_api()
    res = api.call("GET", "/documents/ui")
    assert header(res, "Content-Type").startswith("text/html")
