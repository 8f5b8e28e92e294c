"""Issue 30 finding 3 with a real ``kill -9``: the count of a document's interrupted runs survives
the kill (it is written to the SQLite file before the reading starts), and at the next start a
document over ``INGEST_MAX_ATTEMPTS`` (1 here) is FAILED with the reason instead of being resumed,
while the server answers and ingests other notes normally."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import run_server
from tests.e2e.test_crash_recovery import CHUNK_OVERLAP, CHUNK_SIZE, half_indexed, kill9, poll, prose

pytestmark = pytest.mark.e2e


def test_a_document_killed_during_its_run_is_failed_at_the_next_start(tmp_path: Path) -> None:
    env = {"CHUNK_SIZE": str(CHUNK_SIZE), "CHUNK_OVERLAP": str(CHUNK_OVERLAP), "INGEST_MAX_ATTEMPTS": "1"}
    with run_server(tmp_path, env=env) as srv:
        note = {"title": "Glaciers", "text": prose("glaciers", 60)}
        big = srv.request("POST", "/notes", body=note).json()["documentId"]
        poll("the big document half indexed", lambda: half_indexed(tmp_path, srv, big))
        kill9(srv)

    with run_server(tmp_path, env=env) as srv:
        doc = srv.wait_document(big, timeout=60)
        assert doc["status"] == "FAILED"
        assert doc["error"].startswith("Ingestion was interrupted once (the server stopped")
        assert doc["chunkCount"] == 0
        fresh = srv.request("POST", "/notes", body={"title": "Tides", "text": prose("tides", 2)})
        assert srv.wait_document(fresh.json()["documentId"], timeout=60)["status"] == "READY"
        listed = srv.request("GET", f"/notes?documentId={big}").json()
        assert listed["items"] == []
