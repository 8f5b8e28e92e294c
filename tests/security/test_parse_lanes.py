"""Issue 43 item 4: under ``ragchat serve`` a note is never read behind another user's PDF.

The ingestion's parser (``LanedParser``) reads the documents read apart (PDF, HTML, Office...) in one
child process and text in another, both under the ``PARSE_*`` limits. Here a page is held in its
child (``parse_bombs.gated_reader``: it waits until the test opens the gate) while a note is read:
the note's chunks come back at once, the page is still being read, and it is read normally once the
gate opens. With the single child of before, the note waited for the page (its lock).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ragchat.adapters.local.parse_process import LanedParser, ProcessParser
from ragchat.domain.parsing import Parsed, ParseJob

from tests.security.parse_bombs import gated_reader

WAIT_S = 60.0  # never reached when it passes


def job(content_type: str) -> ParseJob:
    return ParseJob(content_type, "t", 1000, 100, headers=False, cpu_seconds=30)


def test_a_note_is_read_while_a_page_is_held_in_the_other_child(tmp_path: Path) -> None:
    parser = LanedParser(
        lambda: ProcessParser(
            cpu_seconds=30, memory_bytes=1_000_000_000, wall_seconds=WAIT_S, parse=gated_reader
        )
    )
    gate = tmp_path / "gate"
    page = b"GATE:" + str(gate).encode() + b"\n<html><body><p>Ferns grow in shade.</p></body></html>"
    read: list[Parsed] = []
    reading = threading.Thread(target=lambda: read.append(parser.parse(lambda: page, job("text/html"))))
    try:
        reading.start()
        deadline = time.monotonic() + WAIT_S
        while not parser.apart._lock.locked():  # the page has been handed to its child
            assert time.monotonic() < deadline
            time.sleep(0.01)

        note = parser.parse(lambda: b"Lighthouses guide ships at night.", job("text/plain"))

        assert [c.text for c in note.chunks] == ["Lighthouses guide ships at night."]
        assert reading.is_alive() and not read  # the page is still being read
        gate.touch()
        reading.join(WAIT_S)
        assert "Ferns grow in shade." in read[0].chunks[0].text
        assert parser.started == 2
    finally:
        gate.touch()
        parser.close()
