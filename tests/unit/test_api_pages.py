"""The minimal HTML pages: served as HTML, need a principal, and render no data server-side."""

from __future__ import annotations

from tests.events import header
from tests.unit.api_support import make_api


def test_pages_are_html_and_need_a_principal():
    api = make_api()
    for path in ("/ui", "/write", "/documents/ui"):
        res = api.call("GET", path)
        assert res["statusCode"] == 200, path
        assert header(res, "Content-Type").startswith("text/html")
        assert "<script>" in res["body"] and "textContent" in res["body"]
        assert "innerHTML" not in res["body"]
        assert api.call("GET", path, principal=None)["statusCode"] == 401


def test_documents_ui_is_not_taken_for_a_document_id():
    api = make_api()
    res = api.call("GET", "/documents/ui")
    assert header(res, "Content-Type").startswith("text/html")
