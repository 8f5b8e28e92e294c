"""Stand-ins for PDFs that are hostile to draw, run by the page renderer's child process (importable
by name for ``spawn``): each behaves like the real renderer except on its trigger page."""

from __future__ import annotations

import re

from ragchat.adapters.local.pdf_pages import render_page
from ragchat.domain.page_images import PageImage


def stuck_on_page_9(pdf: bytes, job: tuple[int, int, tuple[str, ...]]) -> PageImage:
    """Page 9 never finishes drawing: one C call no signal handler interrupts."""
    if job[0] == 9:
        re.match(r"(a|aa)+b", "a" * 60)
    return render_page(pdf, job)


def greedy_on_page_9(pdf: bytes, job: tuple[int, int, tuple[str, ...]]) -> PageImage:
    """Page 9 needs ever more memory to draw."""
    if job[0] == 9:
        blocks = []
        while True:
            blocks.append(bytearray(20_000_000))
    return render_page(pdf, job)
