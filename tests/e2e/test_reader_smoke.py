"""The extractive reader end to end (``READER=on``, docs/reader.md): ``ragchat serve`` with the smoke
model of ``bench/train_reader.py --smoke`` (trained once per session into a temporary folder, never
the models cache; its figures mean nothing, so the threshold is set to make each outcome certain):
a turn is answered with a sentence of the note, cited, the citation carrying the span it highlights;
a turn the reader refuses gets the guard reply with the closest passage offered, before any answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.conftest import Server, models_path, run_server
from tests.reader_smoke import EXPORT_PYTHON, smoke_reader

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NOTE = (
    "Bike parking\n\nCargo bikes\nEmployees may park cargo bikes in the yard behind the workshop. "
    "Standard bikes go in the basement racks.\n\n| Plot | Rent per year |\n|---|---|\n"
    "| Half plot | 48 pounds |\n| Full plot | 90 pounds |\n"
)
QUESTION = "Where can employees park cargo bikes?"
GUARD = "I don't have sufficiently relevant documents to answer confidently."


@pytest.fixture(scope="module")
def reader_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not EXPORT_PYTHON.is_file():
        pytest.skip("the export virtualenv (torch) is not there")
    out = smoke_reader(tmp_path_factory.getbasetemp() / "reader-smoke")
    if out is None:
        pytest.skip("the all-MiniLM-L6-v2 weights package is not installed")
    models = out.parent
    embedder = models / "all-MiniLM-L6-v2"
    if not embedder.exists():  # the embedder beside the smoke reader: one RAGCHAT_MODEL_DIR for both
        embedder.symlink_to((models_path() / "all-MiniLM-L6-v2").resolve(), target_is_directory=True)
    return models


@contextmanager
def _served(tmp: Path, models: Path, threshold: str) -> Iterator[Server]:
    env = {"READER": "on", "RAGCHAT_MODEL_DIR": str(models), "READER_THRESHOLD": threshold}
    with run_server(tmp, env=env) as srv:
        res = srv.request("POST", "/notes", body={"title": "Bikes", "text": NOTE})
        assert res.status == 202, res.body
        assert srv.wait_document(res.json()["documentId"])["status"] == "READY"
        yield srv


def _turn(server: Server, question: str) -> tuple[dict[str, object], str]:
    conv = server.request("POST", "/chat/conversations", body={}).json()["id"]
    reply = server.request("POST", f"/chat/conversations/{conv}/messages", body={"content": question})
    assert reply.status == 200, reply.body
    sse = server.request(
        "POST",
        f"/chat/conversations/{conv}/messages",
        body={"content": question},
        headers={"Accept": "text/event-stream"},
    ).body.decode()
    return reply.json(), sse


def test_a_turn_the_reader_answers_quotes_the_note_and_highlights_the_span(
    reader_models: Path, tmp_path: Path
) -> None:
    with _served(tmp_path, reader_models, "-100") as server:  # every span answers
        body, sse = _turn(server, QUESTION)
        assert body["guardUsed"] is False
        content = str(body["content"])
        assert content.rstrip().splitlines()[-1].startswith("Sources: ")
        assert "Bike parking Cargo" not in content and "Cargo bikes Employees" not in content
        [source, *_] = body["sources"]  # type: ignore[misc]
        highlight = source["highlight"]
        assert highlight and all(w in content for w in highlight.replace(".", " ").split())  # quoted
        assert source["id"] in content
        sources = next(b for b in sse.split("\n\n") if b.startswith("event: sources"))
        assert json.loads(sources.split("data: ", 1)[1])["sources"][0]["highlight"] == highlight
        log = server.log.read_text(encoding="utf-8", errors="replace")
        assert "chat.reader" in log


def test_a_turn_the_reader_refuses_offers_the_closest_passage(reader_models: Path, tmp_path: Path) -> None:
    with _served(tmp_path, reader_models, "100") as server:  # no span beats no answer by 100
        body, sse = _turn(server, QUESTION)
        assert body["guardUsed"] is True and str(body["content"]).startswith(GUARD)
        assert body["sources"] == []
        assert any("Employees may park cargo bikes" in s for s in body["suggestions"])  # type: ignore[union-attr]
        refusal = next(b for b in sse.split("\n\n") if b.startswith("event: refusal"))
        suggestions = json.loads(refusal.split("data: ", 1)[1])["suggestions"]
        assert suggestions[0].startswith("Closest passage")
