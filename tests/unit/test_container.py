"""The composition root: what it checks at start-up, what it builds on AWS, what ``close()`` closes,
and the HTTP handlers' own container (no module global)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ragchat.api.handler import http_handler
from ragchat.bootstrap import Container
from ragchat.config import ConfigError, load_settings

from tests.events import api_event, json_body
from tests.unit.api_support import make_api

AWS = {
    "RAGCHAT_BACKEND": "aws",
    "AWS_REGION": "eu-west-1",
    "DOCUMENTS_TABLE": "docs",
    "CONVERSATIONS_TABLE": "convs",
    "COUNTERS_TABLE": "counters",
    "DOCUMENTS_BUCKET": "bucket",
    "OPENSEARCH_ENDPOINT": "https://x.eu-west-1.aoss.amazonaws.com",
    "RAGCHAT_CHAT_MODEL": "extractive",
}


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "No such file"), ("{not json", "Expecting"), ('{"bad name!": "x"}', "persona name")],
)
def test_a_missing_or_invalid_persona_file_stops_start_up(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    path = tmp_path / "personas.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as info:
        Container(load_settings({"RAGCHAT_PERSONAS_FILE": str(path)}))
    assert "RAGCHAT_PERSONAS_FILE" in str(info.value) and problem in str(info.value)


def test_personas_from_the_file_are_offered_to_conversations(tmp_path: Path) -> None:
    path = tmp_path / "personas.toml"
    path.write_text('[personas.analyst]\nprompt = "You are a careful analyst."\n')
    api = make_api({"RAGCHAT_PERSONAS_FILE": str(path)})
    assert api.container.personas["analyst"] == "You are a careful analyst."
    ok = api.call("POST", "/chat/conversations", body={"persona": "analyst"})
    assert ok["statusCode"] == 201
    unknown = api.call("POST", "/chat/conversations", body={"persona": "pirate"})
    assert unknown["statusCode"] == 400 and "analyst" in json_body(unknown)["error"]


def test_on_aws_ingestion_goes_to_the_state_machine_never_to_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")  # making a client looks for credentials; no call is made
    settings = load_settings({**AWS, "STATE_MACHINE_ARN": "arn:aws:states:eu-west-1:1:stateMachine:s"})
    with Container(settings) as box:
        assert type(box.launcher).__name__ == "StepFunctionsLauncher"
        assert box.settings.vector_index_kind == "opensearch"
    # a hand-made Settings without the ARN: an error naming it, not an in-process fallback
    box = Container(settings.model_copy(update={"state_machine_arn": None}))
    with pytest.raises(ConfigError, match="STATE_MACHINE_ARN"):
        _ = box.launcher


def test_close_closes_what_the_container_opened(tmp_path: Path) -> None:
    box = Container(load_settings({"RAGCHAT_DATA_DIR": str(tmp_path), "RAGCHAT_CHAT_MODEL": "extractive"}))
    assert box.documents.list_documents("alice").items == []
    box.close()
    with pytest.raises(RuntimeError, match="closed"):
        box.documents.list_documents("alice")
    box.close()  # twice is fine


def test_overrides_must_name_a_part() -> None:
    with pytest.raises(TypeError, match="embeder"):
        Container(load_settings({}), embeder=object())


def test_each_http_handler_uses_the_container_it_is_given() -> None:
    api = make_api()
    handler = http_handler({"notes"}, container=lambda: api.container)
    created = handler(api_event("POST", "/notes", body={"text": "Cats purr."}), None)
    assert created["statusCode"] == 202
    listed = handler.with_container(lambda: api.container)(api_event("GET", "/documents"), None)
    assert len(json.loads(listed["body"])["items"]) == 1


def test_a_function_that_starts_ingestion_needs_the_state_machine_on_aws() -> None:
    settings = load_settings(AWS)  # no STATE_MACHINE_ARN: the chat/pages functions do not get one
    pages = http_handler({"ops", "ui"}, container=lambda: Container(settings))
    assert pages(api_event("GET", "/health", principal=None), None)["statusCode"] == 200
    notes = http_handler({"notes"}, container=lambda: Container(settings))
    with pytest.raises(ConfigError, match="STATE_MACHINE_ARN"):
        notes(api_event("GET", "/documents"), None)


def test_the_local_extractive_answerer_shares_the_retrievers_passage_vectors() -> None:
    from ragchat.adapters.local.extractive import ExtractiveChatModel

    from tests.fakes import FakeEmbedder, FakeVectorIndex

    embedder = FakeEmbedder()
    box = Container(
        load_settings({"RAGCHAT_CHAT_MODEL": "extractive"}), embedder=embedder, index=FakeVectorIndex()
    )
    model = box.chat_model
    assert isinstance(model, ExtractiveChatModel)
    assert model.relevance_vectors is box.retriever.passage_vectors is box.passage_vectors
    assert model.query_embedder is embedder


def test_with_a_bedrock_embedder_the_extractive_answerer_goes_by_words() -> None:
    from ragchat.adapters.local.extractive import ExtractiveChatModel

    settings = load_settings(
        {"RAGCHAT_CHAT_MODEL": "extractive", "RAGCHAT_EMBEDDER": "titan", "AWS_REGION": "eu-west-1"}
    )
    box = Container(settings)
    model = box.chat_model
    assert isinstance(model, ExtractiveChatModel) and model.relevance_vectors is None
    assert "embedder" not in box.__dict__  # no Bedrock client made: no answer's sentences billed


def test_extractive_sentences_words_keeps_the_answerer_on_shared_words() -> None:
    from ragchat.adapters.local.extractive import ExtractiveChatModel

    from tests.fakes import FakeEmbedder, FakeVectorIndex

    settings = load_settings({"RAGCHAT_CHAT_MODEL": "extractive", "EXTRACTIVE_SENTENCES": "words"})
    box = Container(settings, embedder=FakeEmbedder(), index=FakeVectorIndex())
    model = box.chat_model
    assert isinstance(model, ExtractiveChatModel) and model.relevance_vectors is None
    with pytest.raises(ValueError):
        load_settings({"EXTRACTIVE_SENTENCES": "vibes"})
