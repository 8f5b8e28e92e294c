"""``ragchat serve`` at start: documents a killed run left unfinished are hidden, then re-queued."""

from __future__ import annotations

from pathlib import Path

from ragchat.bootstrap import Container
from ragchat.cli.serve import resume_pending
from ragchat.config import load_settings
from ragchat.domain.models import DocumentStatus, SearchFilter

from tests.events import json_body
from tests.fakes.search import FakeEmbedder

TEXT = "Glaciers carve valleys. " * 40


class RecordingLauncher:
    def __init__(self) -> None:
        self.started: list[tuple[str, str]] = []
        self.resumed: list[tuple[str, str]] = []

    def start(self, owner: str, document_id: str, *, version: str | None = None) -> None:
        self.started.append((owner, document_id))

    def resume(self, pending: list[tuple[str, str]]) -> None:
        self.resumed += pending


def test_a_document_killed_between_switching_on_and_ready_is_not_searchable_after_restart(
    tmp_path: Path,
) -> None:
    launcher = RecordingLauncher()
    settings = load_settings({"RAGCHAT_DATA_DIR": str(tmp_path), "RAGCHAT_CHAT_MODEL": "extractive"})
    embedder = FakeEmbedder()
    with Container(settings, embedder=embedder, launcher=launcher) as box:
        owner = settings.local_principal
        doc = box.ingestion.submit(owner, text=TEXT, title="Glaciers")
        steps = box.ingest_steps
        split = steps.split(owner, doc.id)
        for batch in split["batches"]:
            steps.embed_index(owner, doc.id, batch["key"])
        box.index.set_enabled(owner, doc.id, True)  # finalize's first write; then the process dies
        query = embedder.embed_query("glaciers carve valleys")
        assert box.documents.get_document(owner, doc.id).status == DocumentStatus.PROCESSING  # type: ignore[union-attr]
        assert box.index.search(query, SearchFilter(owner=owner), 5)  # searchable while not READY

    with Container(settings, embedder=embedder, launcher=launcher) as box:  # the restart
        assert resume_pending(box) == 1
        assert launcher.resumed == [(owner, doc.id)]
        assert box.index.search(query, SearchFilter(owner=owner), 5) == []


def test_a_turn_cut_short_by_a_kill_does_not_answer_409_after_the_restart() -> None:
    """Issue 43: a ``kill -9`` mid-turn left the conversation's turn lease in the counters store, so
    the restarted server answered every new message with 409 for ~58 s (the lease's TTL). The
    server's start removes the leases of the previous run."""
    from ragchat.cli.serve import _prepare
    from ragchat.services.chat.stops import TurnLeases

    from tests.unit.api_support import make_api

    before = make_api()
    conv = json_body(before.call("POST", "/chat/conversations", body={"title": "Crash"}))["id"]
    assert TurnLeases(before.container.counters, before.clock).take(conv)  # mid-turn, then killed
    kept = {
        "counters": before.container.counters,  # what the data directory keeps across the restart
        "conversations": before.container.conversations,
        "workspace_store": before.container.workspace_store,
    }
    turn = {"content": "What do lighthouses do?", "messageId": "turn-2"}
    path = f"/chat/conversations/{conv}/messages"

    unprepared = make_api(**kept)  # the same store, without the start's chores: the old behaviour
    assert unprepared.call("POST", path, body=turn)["statusCode"] == 409

    after = make_api(**kept)
    _prepare(after.container, samples=False)
    answered = after.call("POST", path, body=turn)
    assert answered["statusCode"] == 200, answered
    assert json_body(answered)["role"] == "assistant"
