"""Readers that behave like the code before issue 30, for the parsing-isolation tests. Importable by
name: the reading child process (``spawn``) imports them the way it imports ``parse_document``.

Findings 1 and 2 of issue 30 were quadratic regular expressions over user text (an HTML pre-pass,
a Markdown heading pattern): one ``re`` call held the GIL for tens of seconds. The product's patterns
are linear now (tests/security/test_linear_text.py), so :func:`read_like_before` puts the old
patterns back in front of the real reader: each pass is one C call that holds the GIL for about a
second on a ~30 KB bomb, which is what stalled the server when reading ran in its process.
"""

from __future__ import annotations

import re

from ragchat.domain.parsing import Parsed, ParseJob, parse_document

# domain/extraction.py's _TAG and domain/context.py's _HEADING before commit b3f99e5
OLD_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)\b[^>]*>")
OLD_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
PASSES = 6  # the old code ran each once on a 10x bigger body (84 s, 37 s): here a few shorter passes

HTML_BOMB = ("<html><body>hello " + "<a " * 30_000).encode()  # finding 1, scaled down 10x
HEADING_BOMB = ("# x" + " #" * 12_000 + "y").encode()  # finding 2, scaled down ~5x
BANG_NOTE = ("Why! " + "!" * 8_000 + " so. ") * 3  # finding 4's notes (ingested; slow only to answer)


def read_like_before(body: bytes, job: ParseJob) -> Parsed:
    """The real reader, after the old quadratic pre-pass of the document's type (PASSES times)."""
    text = body.decode("utf-8", "replace")
    for _ in range(PASSES):
        if job.content_type == "text/html":
            OLD_TAG.sub("", text)
        else:
            for _match in OLD_HEADING.finditer(text):
                pass
    return parse_document(body, job)


def hog_memory(body: bytes, job: ParseJob) -> Parsed:
    """A reader whose document needs ever more memory (``HOG`` documents)."""
    if body.startswith(b"HOG"):
        blocks = []
        while True:
            blocks.append(bytearray(20_000_000))
    return parse_document(body, job)


def stuck_in_c(body: bytes, job: ParseJob) -> Parsed:
    """A reader stuck in one C call (``STUCK`` documents): an exponential match no signal handler
    interrupts, so only the wall-clock limit ends it."""
    if body.startswith(b"STUCK"):
        re.match(r"(a|aa)+b", "a" * 60)
    return parse_document(body, job)


def gated_reader(body: bytes, job: ParseJob) -> Parsed:
    """A reader that holds ``GATE:<path>`` documents until ``<path>`` exists (an injected slow step:
    the test opens the gate when it has seen what it waits for)."""
    import os
    import time

    if body.startswith(b"GATE:"):
        gate = body[5:].split(b"\n", 1)[0].decode()
        deadline = time.monotonic() + 60
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
    return parse_document(body, job)
