"""What a newcomer meets after ``make run``: the bundled samples, added the way ``ragchat serve
--samples`` adds them, answer the plain questions a first user asks about ragchat (each the first
message of a conversation), with the real MiniLM embedder, the calibrated decision and the
extractive answerer; a question they do not cover is refused. Needs the prepared model (``make
model``); skipped without it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import model_ready, models_path

pytestmark = pytest.mark.skipif(
    not model_ready(models_path()), reason="MiniLM ONNX model not prepared: run `make model`"
)

# question → words the answer must contain (all of them)
ANSWERED = {
    "How does ingestion work?": ["chunks", "READY"],  # the README's first question
    "What file types are supported?": [" .txt", " .pdf"],
    "How do I upload a file?": ["/write"],
    "How big can a document be?": ["MiB"],
    "Can I use it without AWS?": ["no AWS account"],
    "Which vector database does it use?": ["SQLite"],
    "What happens when I am rate limited?": ["429"],
    "Can other users read my notes?": ["only their own"],
    "How are citations checked?": ["citation"],
}
REFUSED = ["Who wins the football tonight?", "How do I reset my password?"]


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    from ragchat.bootstrap import Container
    from ragchat.cli.serve import seed_samples
    from ragchat.config import load_settings

    settings = load_settings(
        {
            "RAGCHAT_DATA_DIR": str(tmp_path_factory.mktemp("samples")),
            "RAGCHAT_MODEL_DIR": str(models_path()),
            "RAGCHAT_CHAT_MODEL": "extractive",
        }
    )
    container = Container(settings)
    assert len(seed_samples(container)) >= 5
    assert container.launcher.wait_idle(300)
    assert container.launcher.wait_warm(300)  # as a server has them a few seconds after start
    owner = settings.local_principal
    yield container, owner
    container.launcher.close()


def _ask(samples: tuple[Any, str], question: str) -> Any:
    container, owner = samples
    cid = container.chat.conversations.create(owner).id
    return container.chat.turns.send(owner, cid, question)


@pytest.mark.parametrize("question", list(ANSWERED))
def test_a_newcomers_question_is_answered_from_the_samples(samples: tuple[Any, str], question: str) -> None:
    result = _ask(samples, question)
    assert not result.guard_used, result.message.content
    assert result.message.sources
    for words in ANSWERED[question]:
        assert words in result.message.content


@pytest.mark.parametrize("question", REFUSED)
def test_a_question_the_samples_do_not_cover_is_refused(samples: tuple[Any, str], question: str) -> None:
    result = _ask(samples, question)
    assert result.guard_used and not result.message.sources
