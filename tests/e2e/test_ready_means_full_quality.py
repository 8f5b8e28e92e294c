"""READY means full quality (issue 31): a question asked the instant its documents turn READY gets
the answer it gets once their evidence vectors are all stored (warmed).

The real local stack (SQLite, the local index, the MiniLM ONNX embedder, the extractive answerer)
set up as ``ragchat serve`` sets it (``warm_unwarmed``), with a subset of the project's own sets:
grounding questions (``bench/grounding/``: answerable, near-topic, off-topic) and conversations
(``bench/conversations/``, through the chat turn, follow-ups included). Round one is asked while
nothing has warmed the documents' evidence (the worker's warmer holds back, as it does while uploads
keep it busy); round two by a server started later on the same data directory, once its worker has
warmed everything. Decisions, sources and answers must be identical. Needs the prepared model
(``make model``); skipped without it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import REPO, model_ready, models_path

GROUNDING = REPO / "bench" / "grounding"
CONVERSATIONS = REPO / "bench" / "conversations"
#: grounding documents ingested (the answerable questions asked are about these)
GROUNDING_DOCS = (
    "expense-policy.md",
    "accounts-faq.md",
    "support-sla.html",
    "meeting-2026-03-12.txt",
    "vpn-setup.md",
    "remote-work-policy.txt",
)
#: conversations asked (their documents are ingested for a second user)
CONVERSATION_IDS = ("d01", "d02", "d03", "d04", "d05", "d06")
NEAR_AND_OFF_TOPIC = 6  # of each kind, from the dev split

pytestmark = pytest.mark.skipif(
    not model_ready(models_path()), reason="MiniLM ONNX model not prepared: run `make model`"
)


def _grounding_questions() -> list[str]:
    questions = json.loads((GROUNDING / "questions.json").read_text())["questions"]
    dev = [q for q in questions if q["split"] == "dev"]
    answerable = [q["question"] for q in dev if q["kind"] == "answerable" and q["document"] in GROUNDING_DOCS]
    near = [q["question"] for q in dev if q["kind"] == "near_topic"][:NEAR_AND_OFF_TOPIC]
    off = [q["question"] for q in dev if q["kind"] == "off_topic"][:NEAR_AND_OFF_TOPIC]
    return answerable + near + off


def _conversations() -> list[dict[str, Any]]:
    convs = json.loads((CONVERSATIONS / "dev.json").read_text())["conversations"]
    return [c for c in convs if c["id"] in CONVERSATION_IDS]


def _container(data: Path, inline: str) -> Any:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    settings = load_settings(
        {
            "RAGCHAT_DATA_DIR": str(data),
            "RAGCHAT_MODEL_DIR": str(models_path()),
            "RAGCHAT_CHAT_MODEL": "extractive",
            "EVIDENCE_INLINE_CHUNKS": inline,
        }
    )
    return Container(settings)


class _NotYet:
    """The worker's warmer while uploads keep it busy: a READY document's evidence is not stored
    (nothing marked), so a server started later finds it unwarmed."""

    def pending(self) -> list[tuple[str, str]]:
        return []

    def __call__(
        self, owner: str, document_id: str, should_yield: Callable[[], bool] = lambda: False
    ) -> bool:
        return True


def _answers(container: Any, grounding: list[str], conversations: list[dict[str, Any]]) -> dict[str, Any]:
    """Per question and per turn: (refused?, the sources' chunk ids, the answer)."""
    out: dict[str, Any] = {}
    for question in grounding:
        result = container.ask.ask("grounding", question)
        out[question] = (result.guard_used, [s.id for s in result.sources], result.answer)
    for conv in conversations:
        cid = container.chat.conversations.create("talker").id
        for i, turn in enumerate(conv["turns"]):
            result = container.chat.turns.send("talker", cid, turn["q"])
            msg = result.message
            out[f"{conv['id']}.{i} {turn['q']}"] = (
                result.guard_used,
                [s.id for s in msg.sources or []],
                msg.content,
            )
    return out


# "16" (the default): the small documents are READY with their evidence, the others without;
# "0": every document is READY without it, asked on the on-demand path
@pytest.mark.parametrize("inline", ["16", "0"])
def test_answers_at_ready_equal_answers_after_warming(tmp_path: Path, inline: str) -> None:
    from ragchat.cli.serve import warm_unwarmed

    grounding, conversations = _grounding_questions(), _conversations()
    assert len(grounding) >= 20 and sum(len(c["turns"]) for c in conversations) >= 20

    at_ready = _container(tmp_path, inline)
    try:
        assert at_ready.evidence_warmer is not None  # the default: evidence is warmed in the background
        at_ready.launcher._warmer = _NotYet()
        warm_unwarmed(at_ready)  # as `ragchat serve` starts
        for name in GROUNDING_DOCS:
            path = GROUNDING / "docs" / name
            at_ready.ingestion.submit_file("grounding", data=path.read_bytes(), filename=name)
        wanted = {t["doc"] for c in conversations for t in c["turns"] if "doc" in t}
        for name in sorted(wanted):
            path = CONVERSATIONS / "docs" / f"{name}.md"
            at_ready.ingestion.submit_file("talker", data=path.read_bytes(), filename=path.name)
        assert at_ready.launcher.wait_idle(300)
        assert len(at_ready.evidence_warmer.pending()) == len(GROUNDING_DOCS) + len(wanted)
        first = _answers(at_ready, grounding, conversations)
    finally:
        at_ready.close()

    later = _container(tmp_path, inline)  # the server started again, an hour later
    try:
        assert warm_unwarmed(later) == len(GROUNDING_DOCS) + len(wanted)
        assert later.launcher.wait_warm(300)
        assert later.evidence_warmer.pending() == []
        second = _answers(later, grounding, conversations)
    finally:
        later.close()

    assert sum(not refused for refused, _, _ in first.values()) >= len(first) // 3  # not all refused
    differ = {q: (first[q], second[q]) for q in first if first[q] != second[q]}
    assert not differ, f"{len(differ)} of {len(first)} answers differ at READY:\n" + "\n".join(
        f"{q}\n  at READY: {a}\n  warmed:   {b}" for q, (a, b) in differ.items()
    )
