"""kill -9 of ``ragchat serve`` loses nothing (issue 8).

Each test SIGKILLs a real server at a moment it detects by polling (never a fixed sleep), checks the
SQLite file the way the next start finds it, restarts on the same data directory and checks what a
user would see:

- during ingestion (a big document half indexed, small ones behind it): every document ends READY
  with the chunk count its text gives (or FAILED with an error), never stuck; a search never returns
  a chunk of a document that is not READY; each document has exactly ``chunkCount`` notes and
  vectors;
- during a streaming turn (a fake Claude that stops after its first delta): the conversation reads
  back with the question; retrying the same ``messageId`` answers it once (the idempotency takeover,
  lowered to 1 s with ``IDEMPOTENCY_TAKEOVER_SECONDS``), and again returns the same answer.
"""

from __future__ import annotations

import http.client
import json
import signal
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import closing, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Server, run_server

pytestmark = pytest.mark.e2e

POLL_S = 0.02
TOPICS = ("volcanoes", "lighthouses", "beekeeping")  # posted right after the big document
LATE = ("tidepools", "orchards")  # posted the moment before the kill


def kill9(srv: Server) -> None:
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGKILL)
    assert srv.proc.wait(timeout=10) == -signal.SIGKILL


def poll(what: str, check: Any, timeout: float = 20.0) -> Any:
    """``check()`` until it returns something truthy (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(POLL_S)


@contextmanager
def database(data_dir: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(data_dir / "ragchat.db", timeout=10)) as conn:
        yield conn


def check_database(data_dir: Path) -> None:
    """The file a killed server left opens (its WAL is recovered) and passes integrity_check."""
    with database(data_dir) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


# ------------------------------------------------------------------------------------- ingestion
def prose(topic: str, paragraphs: int) -> str:
    """Varied sentences about ``topic`` (distinct per paragraph, so chunks differ)."""
    out = []
    for p in range(paragraphs):
        out.append(
            f"Paragraph {p} on {topic}. The {topic} survey number {p * 7 + 3} recorded "
            f"{p % 13} observations near station {p % 29}, and the notes describe how {topic} "
            f"changed over season {p % 5}. Researchers compared sample {p} with sample {p + 1} "
            f"and wrote that the {topic} pattern held in {p % 17} of the trials."
        )
    return "\n\n".join(out)


# Small chunks: many embedding batches (64 chunks each) out of a document that re-ingests in seconds.
CHUNK_SIZE, CHUNK_OVERLAP = 100, 10


def expected_chunks(text: str) -> int:
    """The chunk count an uninterrupted ingestion gives."""
    from ragchat.domain.extraction import extract
    from ragchat.domain.splitting import split_pages

    pages = extract(text.encode(), content_type="text/plain")
    chunks = split_pages(pages, content_type="text/plain", chunk_size=CHUNK_SIZE, overlap=CHUNK_OVERLAP)
    return len([c for c in chunks if c.text.strip()])


def vectors_of(conn: sqlite3.Connection, doc_id: str) -> tuple[int, int]:
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(enabled), 0) FROM vectors WHERE document_id = ?", (doc_id,)
    ).fetchone()
    return int(row[0]), int(row[1])


def half_indexed(data_dir: Path, srv: Server, doc_id: str) -> bool:
    """The big document is PROCESSING and some (not all) of its vectors are written."""
    if srv.request("GET", f"/documents/{doc_id}").json()["status"] != "PROCESSING":
        return False
    with database(data_dir) as conn:
        return vectors_of(conn, doc_id)[0] > 0


def searched_documents(srv: Server, question: str) -> set[str]:
    reply = srv.request("GET", "/?text=" + urllib.parse.quote(question))
    assert reply.status == 200, reply.body
    return {s["id"].rsplit("-", 1)[0] for s in reply.json()["sources"]}


def assert_only_ready_searchable(srv: Server, questions: list[str]) -> None:
    for q in questions:
        for doc_id in searched_documents(srv, q):
            status = srv.request("GET", f"/documents/{doc_id}").json()["status"]
            # statuses only move on to READY: one not READY after the search was not READY during it
            assert status == "READY", f"a search returned a chunk of {doc_id} while it was {status}"


def count_notes(srv: Server, doc_id: str) -> int:
    """The document's notes as ``GET /notes`` lists them (every page)."""
    count, cursor = 0, ""
    for _ in range(100):
        page = srv.request("GET", f"/notes?documentId={doc_id}&limit=200{cursor}").json()
        count += len(page["items"])
        if not page.get("cursor"):
            return count
        cursor = "&cursor=" + urllib.parse.quote(page["cursor"])
    raise AssertionError("too many pages")


def test_kill9_during_ingestion_loses_nothing(tmp_path: Path) -> None:
    big_text = prose("glaciers", 60)  # ~16 KB, 300 chunks of 100 characters: 5 embedding batches
    small_texts = {t: prose(t, 2) for t in (*TOPICS, *LATE)}
    env = {"CHUNK_SIZE": str(CHUNK_SIZE), "CHUNK_OVERLAP": str(CHUNK_OVERLAP)}
    with run_server(tmp_path, env=env) as srv:
        big = srv.request("POST", "/notes", body={"title": "Glaciers", "text": big_text}).json()["documentId"]

        def post(topic: str) -> str:
            note = {"title": topic, "text": small_texts[topic]}
            return str(srv.request("POST", "/notes", body=note).json()["documentId"])

        small = {t: post(t) for t in TOPICS}
        poll("the big document half indexed", lambda: half_indexed(tmp_path, srv, big))
        small.update({t: post(t) for t in LATE})
        kill9(srv)

    check_database(tmp_path)
    with database(tmp_path) as conn:
        at_kill = dict(conn.execute("SELECT id, status FROM documents").fetchall())
        assert at_kill[big] == "PROCESSING"
        big_vectors = vectors_of(conn, big)[0]
        for doc_id, status in at_kill.items():
            if status != "READY":  # nothing of an unfinished document is switched on
                assert vectors_of(conn, doc_id)[1] == 0, (doc_id, status)

    texts = {big: big_text, **{small[t]: small_texts[t] for t in small}}
    questions = ["How did the glaciers pattern hold?", *(f"What about {t}?" for t in small)]
    with run_server(tmp_path, env=env) as srv:
        started = time.monotonic()
        assert_only_ready_searchable(srv, questions)  # while the resumed ingestion runs
        final = {doc_id: srv.wait_document(doc_id, timeout=60) for doc_id in texts}
        recovered_s = time.monotonic() - started
        assert_only_ready_searchable(srv, questions)
        for doc_id, doc in final.items():
            assert doc["status"] == "READY", doc
            assert doc["chunkCount"] == expected_chunks(texts[doc_id]), doc_id
            assert count_notes(srv, doc_id) == doc["chunkCount"]
        assert big in searched_documents(srv, "glaciers survey observations near station")
    check_database(tmp_path)
    with database(tmp_path) as conn:
        for doc_id, doc in final.items():
            assert vectors_of(conn, doc_id) == (doc["chunkCount"], doc["chunkCount"])
            rows = conn.execute("SELECT chunk_index FROM notes WHERE document_id = ?", (doc_id,))
            assert sorted(r[0] for r in rows) == list(range(doc["chunkCount"]))
    small_at_kill = [at_kill[small[t]] for t in small]
    print(
        f"\ncrash-recovery: killed with {big_vectors}/{final[big]['chunkCount']} vectors of the big document "
        f"written, small ones {small_at_kill}; all READY {recovered_s:.1f} s after the restart"
    )


# ------------------------------------------------------------------------------------- chat turn
class FakeClaude:
    """A Messages API on 127.0.0.1 whose streaming answer sends one delta and then hangs (until
    :meth:`close`): the turn is mid-answer for as long as the test needs."""

    def __init__(self) -> None:
        release = self.release = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self._event("message_start", {"message": _message()})
                block = {"type": "text", "text": ""}
                self._event("content_block_start", {"index": 0, "content_block": block})
                delta = {"type": "text_delta", "text": "Lighthouses guide ships "}
                self._event("content_block_delta", {"index": 0, "delta": delta})
                release.wait(30)

            def _event(self, name: str, data: dict[str, Any]) -> None:
                self.wfile.write(f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode())
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _message() -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": [],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 9},
    }


def stream_until_first_delta(srv: Server, conv_id: str, text: str, message_id: str) -> list[str]:
    """POST a streaming turn and read its events up to the first ``answer_delta``."""
    parts = urllib.parse.urlsplit(srv.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=20)
    conn.request(
        "POST",
        f"/chat/conversations/{conv_id}/messages",
        body=json.dumps({"content": text, "messageId": message_id}),
        headers={
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Authorization": f"Bearer {srv.token}",
        },
    )
    resp = conn.getresponse()
    assert resp.status == 200
    events: list[str] = []
    for _ in range(200):  # bounded: a handful of lines precede the first delta
        line = resp.readline().decode().strip()
        if line.startswith("event: "):
            events.append(line[len("event: ") :])
            if events[-1] == "answer_delta":
                return events
    raise AssertionError(f"no answer_delta in {events}")


def test_kill9_during_a_streaming_turn_loses_nothing(tmp_path: Path) -> None:
    fake = FakeClaude()
    env = {"RAGCHAT_CHAT_MODEL": "anthropic", "ANTHROPIC_API_KEY": "sk-fake", "ANTHROPIC_BASE_URL": fake.url}
    # The restarted server answers with the extractive model: the retry's answer is its own either
    # way, and importing the Claude SDK again costs ~10 s on a loaded 2-core machine.
    restart_env = {"IDEMPOTENCY_TAKEOVER_SECONDS": "1"}
    question = "What do lighthouses do?"
    try:
        with run_server(tmp_path, env=env) as srv:
            note = {"title": "Lighthouses", "text": prose("lighthouses", 3)}
            srv.wait_document(srv.request("POST", "/notes", body=note).json()["documentId"], timeout=60)
            conv_id = srv.request("POST", "/chat/conversations", body={"title": "Crash"}).json()["id"]
            events = stream_until_first_delta(srv, conv_id, question, "turn-1")
            assert events[0] == "answer_start"
            kill9(srv)  # the model is mid-answer: one delta out, the rest never comes

        check_database(tmp_path)
        with run_server(tmp_path, env=restart_env) as srv:
            messages = srv.request("GET", f"/chat/conversations/{conv_id}").json()["messages"]
            assert [(m["role"], m["content"], m.get("messageId")) for m in messages] == [
                ("user", question, "turn-1")
            ]
            turns = f"/chat/conversations/{conv_id}/messages"
            turn = {"content": question, "messageId": "turn-1"}
            started = time.monotonic()
            retry = srv.request("POST", turns, body=turn)
            takeover_s = time.monotonic() - started
            assert retry.status == 200, retry.body
            answer = retry.json()
            assert retry.headers["x-model-used"] == "extractive" and answer["sources"]
            again = srv.request("POST", turns, body=turn)
            assert again.status == 200 and again.json()["id"] == answer["id"]
            messages = srv.request("GET", f"/chat/conversations/{conv_id}").json()["messages"]
            roles = [(m["role"], m.get("messageId")) for m in messages]
            assert roles == [("user", "turn-1"), ("assistant", "turn-1")]
            assert messages[1]["id"] == answer["id"]
        check_database(tmp_path)
        print(f"\ncrash-recovery: retry after kill -9 answered in {takeover_s:.2f} s")
    finally:
        fake.close()
