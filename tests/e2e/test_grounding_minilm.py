"""Answer or refuse with the real MiniLM embedder and the calibrated decision: a few documents of the
grounding set (bench/grounding/, dev split questions) and the bundled samples, ingested through the
real pipeline into a throwaway data directory, asked through the one-shot path with the extractive
answerer. Needs the prepared model (``make model``); skipped without it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import REPO, model_ready, models_path

DOCS = REPO / "bench" / "grounding" / "docs"
SAMPLES = REPO / "layers" / "ragchat" / "ragchat" / "samples"
OWNER = "local"

pytestmark = pytest.mark.skipif(
    not model_ready(models_path()), reason="MiniLM ONNX model not prepared: run `make model`"
)

ANSWERED = {  # grounding-set questions → the document that answers them
    "How fast does support reply when production is down?": "support-sla.html",
    "How do I set up 2FA on my profile?": "accounts-faq.md",
    "When will production Kubernetes be upgraded?": "meeting-2026-03-12.txt",
    "What does the HTTP API offer?": "the-http-api.md",
    "What happens to invalid citations?": "how-citations-work.md",
}
REFUSED = [
    "How many moons does Jupiter have?",  # off-topic
    "How do I grow tomatoes on a balcony?",  # off-topic
    "What is the price of the Team plan?",  # near-topic: plans are in the FAQ, prices not
]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, str]]]:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    data = tmp_path_factory.mktemp("grounding")
    settings = load_settings(
        {
            "RAGCHAT_DATA_DIR": str(data),
            "RAGCHAT_MODEL_DIR": str(models_path()),
            "RAGCHAT_CHAT_MODEL": "extractive",
        }
    )
    container = Container(settings)
    files: list[Path] = [
        *(DOCS / name for name in ("support-sla.html", "accounts-faq.md", "meeting-2026-03-12.txt")),
        *(DOCS / name for name in ("office-guide.txt", "webhooks.html")),
        *sorted(SAMPLES.glob("*.md")),
    ]
    names: dict[str, str] = {}
    for path in files:
        doc = container.ingestion.submit_file(OWNER, data=path.read_bytes(), filename=path.name)
        names[doc.id] = path.name
    assert container.launcher.wait_idle(300)
    yield container, names
    container.launcher.close()


@pytest.mark.parametrize("question", list(ANSWERED))
def test_answerable_questions_are_answered_from_the_right_document(
    service: tuple[Any, dict[str, str]], question: str
) -> None:
    container, names = service
    result = container.ask.ask(OWNER, question)
    assert not result.guard_used, result.answer
    notes = container.documents.get_notes(OWNER, [s.id for s in result.sources])
    assert ANSWERED[question] in {names[n.document_id] for n in notes}
    assert "**" not in result.answer and "`" not in result.answer


@pytest.mark.parametrize("question", REFUSED)
def test_unanswerable_questions_are_refused(service: tuple[Any, dict[str, str]], question: str) -> None:
    container, _ = service
    result = container.ask.ask(OWNER, question)
    assert result.guard_used and result.sources == []
