"""Configuration: docs/configuration.md defaults, and a bad value stops start-up naming the variable."""

from __future__ import annotations

import pytest
from ragchat.config import ConfigError, load_settings


def test_defaults_match_the_spec() -> None:
    s = load_settings({})
    assert s.enable_text_splitting is True
    assert s.enable_chat_summarization is False
    assert s.enable_rate_limiting is False
    assert s.enable_citation_validation is True
    assert s.max_chat_history == 12
    assert s.retrieval_mode == "hybrid"
    assert s.chat_mode == "rag"
    assert s.backend == "local"
    assert str(s.data_dir) == ".ragchat"
    # MiniLM gets its own calibrated threshold, not the seeds' 0.65 for BGE.
    assert s.embedding_model_id == "all-MiniLM-L6-v2"
    assert 0.0 < s.similarity_threshold < 0.65


def test_values_are_read_from_the_environment_names() -> None:
    s = load_settings(
        {
            "ENABLE_RATE_LIMITING": "true",
            "MAX_CHAT_HISTORY": "20",
            "MIN_SIMILARITY": "0.5",
            "RETRIEVAL_MODE": "hybrid",
            "RAGCHAT_DATA_DIR": "/tmp/x",
        }
    )
    assert s.enable_rate_limiting is True
    assert s.max_chat_history == 20
    assert s.similarity_threshold == 0.5
    assert s.retrieval_mode == "hybrid"
    assert str(s.data_dir) == "/tmp/x"


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"MAX_CHAT_HISTORY": "lots"}, "MAX_CHAT_HISTORY"),
        ({"ENABLE_TEXT_SPLITTING": "maybe"}, "ENABLE_TEXT_SPLITTING"),
        ({"RETRIEVAL_MODE": "semantic"}, "RETRIEVAL_MODE"),
        ({"MIN_SIMILARITY": "2"}, "MIN_SIMILARITY"),
        ({"CHAT_MODE": "agent"}, "CHAT_MODE"),
        ({"RAGCHAT_BACKEND": "aws"}, "DOCUMENTS_TABLE"),
        ({"CHUNK_SIZE": "200", "CHUNK_OVERLAP": "300"}, "CHUNK_OVERLAP"),
    ],
)
def test_a_bad_value_names_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert variable in str(info.value)


def test_the_api_key_is_never_shown_in_repr() -> None:
    s = load_settings({"ANTHROPIC_API_KEY": "sk-ant-secret"})
    assert "sk-ant-secret" not in repr(s)


AWS = {
    "RAGCHAT_BACKEND": "aws",
    "DOCUMENTS_TABLE": "docs",
    "CONVERSATIONS_TABLE": "convs",
    "COUNTERS_TABLE": "counters",
    "DOCUMENTS_BUCKET": "bucket",
    "OPENSEARCH_ENDPOINT": "https://x.us-east-1.aoss.amazonaws.com",
}


@pytest.mark.parametrize(
    "variable",
    ["DOCUMENTS_TABLE", "CONVERSATIONS_TABLE", "COUNTERS_TABLE", "DOCUMENTS_BUCKET", "OPENSEARCH_ENDPOINT"],
)
def test_the_aws_backend_refuses_to_start_without_what_it_needs(variable: str) -> None:
    env = {k: v for k, v in AWS.items() if k != variable}
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert variable in str(info.value) and "RAGCHAT_" in str(info.value)


def test_an_embedded_vector_index_is_a_choice_never_a_fallback() -> None:
    env = {k: v for k, v in AWS.items() if k != "OPENSEARCH_ENDPOINT"}
    assert load_settings({**env, "RAGCHAT_VECTOR_INDEX": "sqlite"}).vector_index_kind == "sqlite"
    assert load_settings(AWS).vector_index_kind == "opensearch"
    assert load_settings({}).vector_index_kind == "sqlite"
    with pytest.raises(ConfigError, match="OPENSEARCH_ENDPOINT"):
        load_settings({"RAGCHAT_VECTOR_INDEX": "opensearch"})  # local backend, OpenSearch asked for


def test_the_state_machine_is_required_where_ingestion_starts() -> None:
    settings = load_settings(AWS)
    settings.require()  # the chat and page functions do not start ingestion
    with pytest.raises(ConfigError, match="STATE_MACHINE_ARN"):
        settings.require("launcher")
    load_settings({**AWS, "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:1:stateMachine:s"}).require(
        "launcher"
    )
    load_settings({}).require("launcher")  # locally ingestion runs in-process


def test_the_anthropic_model_needs_a_key_or_a_secret() -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        load_settings({"RAGCHAT_CHAT_MODEL": "anthropic"})
    load_settings({"RAGCHAT_CHAT_MODEL": "anthropic", "ANTHROPIC_SECRET_NAME": "ragchat/anthropic"})


def test_the_checks_survive_python_optimisations() -> None:
    """``python -O`` strips ``assert``: the checks must not be assertions."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import ragchat

    code = (
        "from ragchat.config import ConfigError, load_settings\n"
        "try:\n    load_settings({'RAGCHAT_BACKEND': 'aws'})\n"
        "except ConfigError as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(ragchat.__file__).parents[1])}  # this checkout's code
    out = subprocess.run(
        [sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert "DOCUMENTS_TABLE" in out.stdout
