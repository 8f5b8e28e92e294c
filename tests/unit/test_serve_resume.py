"""``ragchat serve`` at start: documents a killed run left unfinished are hidden, then re-queued."""

from __future__ import annotations

from pathlib import Path

from ragchat.bootstrap import Container
from ragchat.cli.serve import resume_pending
from ragchat.config import load_settings
from ragchat.domain.models import DocumentStatus, SearchFilter

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
