"""The project's own grounding set (``bench/grounding/``): 20 short documents in varied styles and
176 questions labelled answerable (with their document), off-topic or near-topic, with a fixed
dev/test split written in ``questions.json``. Dev (110 questions over 16 documents) is what the
decision is fitted and chosen on; test (66 questions, 4 more documents) was written blind after
that tuning and is only reported (``test-answers.md`` gives each label's evidence).

``security-handbook.pdf`` is written at run time from ``security-handbook.pdf.txt`` (pages separated
by form feeds) by :func:`make_pdf`, a tiny PDF writer (Helvetica, one text object per page).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

GROUNDING = Path(__file__).resolve().parent / "grounding"
DOCS = GROUNDING / "docs"


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    kind: str  # answerable | off_topic | near_topic
    document: str | None
    split: str  # dev | test


def questions() -> list[Question]:
    data = json.loads((GROUNDING / "questions.json").read_text(encoding="utf-8"))
    return [Question(q["question"], q["kind"], q["document"], q["split"]) for q in data["questions"]]


def smoke_questions(qs: list[Question], per_kind: int = 1) -> list[Question]:
    """A smoke run's questions: the first ``per_kind`` of each split and kind (every table cell has
    some)."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for q in qs:
        key = (q.split, q.kind)
        if seen.get(key, 0) < per_kind:
            seen[key] = seen.get(key, 0) + 1
            out.append(q)
    return out


def documents() -> dict[str, bytes]:
    """File name → bytes, the PDF generated from its text."""
    out: dict[str, bytes] = {}
    for path in sorted(DOCS.iterdir()):
        if path.name.endswith(".pdf.txt"):
            out[path.name.removesuffix(".txt")] = make_pdf(path.read_text(encoding="utf-8").split("\f"))
        else:
            out[path.name] = path.read_bytes()
    return out


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF: one page per text, paragraphs wrapped at 90 characters."""
    objects: list[bytes] = []
    page_ids = [4 + 2 * i for i in range(len(pages))]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{p} 0 R" for p in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        lines: list[str] = []
        for para in text.strip().split("\n\n"):
            lines += [*textwrap.wrap(" ".join(para.split()), 90), ""]
        ops = ["BT", "/F1 10 Tf", "14 TL", "50 800 Td", *(f"({_escape(line)}) '" for line in lines), "ET"]
        stream = "\n".join(ops).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {page_ids[i] + 1} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
