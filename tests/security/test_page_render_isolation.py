"""The document viewer draws PDF pages as uploads are read (issue 30's rule: one document must never
hold the server): with ``ragchat serve`` in a child process under the ``PARSE_*`` limits. A page that
never finishes drawing, or needs ever more memory, is refused with the reason (400); the child is
replaced and the next page is drawn; the server's own memory never holds the render."""

from __future__ import annotations

import os

import pytest
from ragchat.adapters.local.pdf_pages import ProcessPages
from ragchat.domain.errors import NotFound, ValidationError

from tests.events import json_body
from tests.pdfs import make_pdf
from tests.security import page_bombs
from tests.unit.api_support import make_api
from tests.unit.test_document_pages import pixels, upload

HARBOUR = make_pdf(["Harbour guide\nThe fuel dock opens at 7 every morning.", ""])


def test_ragchat_serve_draws_pages_in_a_child_process() -> None:
    api = make_api({"PARSE_ISOLATION": "process"})
    try:
        pages = api.container.document_service.pages
        assert isinstance(pages, ProcessPages)
        doc_id = upload(api, HARBOUR, "harbour.pdf")
        got = json_body(api.call("GET", f"/documents/{doc_id}/pages/1"))
        assert got["pages"] == 2 and min(pixels(got["image"])[2]) < 100  # drawn, with dark text
        past = api.call("GET", f"/documents/{doc_id}/pages/3")
        assert (past["statusCode"], json_body(past)["error"]) == (
            404,
            "Page 3 not found: the document has 2 page(s)",
        )
        child = pages.child._process
        assert child is not None and child.pid != os.getpid() and child.is_alive()
    finally:
        api.container.close()


@pytest.mark.parametrize(
    ("render", "reason"),
    [
        (page_bombs.stuck_on_page_9, r"^The file took too long to read"),
        (page_bombs.greedy_on_page_9, r"^The file needed too much memory to read"),
    ],
)
def test_a_page_over_a_limit_is_refused_and_the_next_is_drawn(render: object, reason: str) -> None:
    pages = ProcessPages(cpu_seconds=2.0, memory_bytes=600_000_000, wall_seconds=3.0, render=render)  # type: ignore[arg-type]
    try:
        with pytest.raises(ValidationError, match=reason):
            pages.render(HARBOUR, 9, 900)
        image = pages.render(HARBOUR, 1, 900)
        assert (image.page, image.pages) == (1, 2)
        with pytest.raises(NotFound):
            pages.render(HARBOUR, 5, 900)
        assert pages.child.started == 2  # the child that went over was replaced
    finally:
        pages.close()
