"""Which model answers on AWS (issue 18): the default Bedrock model is a current Claude through an
inference profile, auto mode sends an Anthropic key only when the secret holds a real one, and
``/health`` says who answers. The secret lives in Secrets Manager on moto."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ragchat.api.ops import answering_model
from ragchat.bootstrap import Container
from ragchat.config import default_bedrock_chat_model, is_anthropic_key, load_settings

from tests.events import json_body
from tests.unit.api_support import make_api

REGION = "eu-west-1"


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    import boto3
    from aws_lambda_powertools.utilities import parameters
    from moto import mock_aws

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        parameters.clear_caches()  # the secret is cached per process for max_age
        yield boto3.client("secretsmanager", region_name=REGION)
        parameters.clear_caches()


@pytest.mark.parametrize(
    ("region", "model"),
    [
        ("us-east-1", "us.anthropic.claude-haiku-5-5"),
        ("us-west-2", "us.anthropic.claude-haiku-5-5"),
        ("eu-central-1", "eu.anthropic.claude-haiku-5-5"),
        ("ap-northeast-1", "apac.anthropic.claude-haiku-5-5"),
        ("sa-east-1", "global.anthropic.claude-haiku-5-5"),
    ],
)
def test_bedrock_answers_with_claude_haiku_5_5_through_the_regions_profile_by_default(
    region: str, model: str
) -> None:
    settings = load_settings({"AWS_REGION": region, "RAGCHAT_CHAT_MODEL": "bedrock"})
    assert settings.bedrock_chat_model_id == model == default_bedrock_chat_model(region)
    chosen = load_settings({"BEDROCK_CHAT_MODEL_ID": "global.anthropic.claude-sonnet-4-5-20250929-v1:0"})
    assert chosen.bedrock_chat_model_id == "global.anthropic.claude-sonnet-4-5-20250929-v1:0"


@pytest.mark.parametrize("value", ["", "   ", "changeme", "{}", "PLACEHOLDER", "sk-", "sk-ant- x"])
def test_a_blank_or_placeholder_secret_is_no_key(value: str) -> None:
    assert not is_anthropic_key(value)


def test_a_real_looking_key_is_a_key() -> None:
    assert is_anthropic_key("sk-ant-api03-" + "x" * 40)
    assert is_anthropic_key("  sk-ant-api03-abc\n")  # the stored value may end with a newline


@pytest.mark.parametrize("stored", ["placeholder", "   "])
def test_auto_mode_never_sends_a_placeholder_secret_and_health_says_extractive(
    secrets: object, stored: str
) -> None:
    arn = secrets.create_secret(Name="ragchat/dev/anthropic", SecretString=stored)["ARN"]  # type: ignore[attr-defined]
    env = {"RAGCHAT_CHAT_MODEL": "auto", "ANTHROPIC_SECRET_NAME": arn, "EXTRACTIVE_SENTENCES": "words"}
    api = make_api(env)
    health = api.call("GET", "/health", principal=None)
    assert health["statusCode"] == 200 and json_body(health)["model"] == "extractive"
    from ragchat.adapters.local.extractive import ExtractiveChatModel

    assert isinstance(api.container.chat_model, ExtractiveChatModel)


def test_auto_mode_uses_anthropic_once_a_real_key_is_put_in_the_secret(secrets: object) -> None:
    arn = secrets.create_secret(Name="ragchat/dev/anthropic", SecretString="sk-ant-api03-" + "k" * 40)["ARN"]  # type: ignore[attr-defined]
    settings = load_settings(
        {"RAGCHAT_CHAT_MODEL": "auto", "ANTHROPIC_SECRET_NAME": arn, "ANTHROPIC_MODEL": "claude-haiku-4-5"}
    )
    assert answering_model(Container(settings)) == "anthropic:claude-haiku-4-5"


def test_anthropic_mode_with_a_placeholder_secret_refuses_instead_of_sending_it(secrets: object) -> None:
    from ragchat.config import ConfigError

    arn = secrets.create_secret(Name="ragchat/dev/anthropic", SecretString="changeme")["ARN"]  # type: ignore[attr-defined]
    box = Container(load_settings({"RAGCHAT_CHAT_MODEL": "anthropic", "ANTHROPIC_SECRET_NAME": arn}))
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        _ = box.chat_model


def test_health_names_the_bedrock_model_and_stays_up_when_the_secret_cannot_be_read(secrets: object) -> None:
    bedrock = make_api({"RAGCHAT_CHAT_MODEL": "bedrock", "AWS_REGION": "us-east-2"})
    body = json_body(bedrock.call("GET", "/health", principal=None))
    assert body["model"] == "bedrock:us.anthropic.claude-haiku-5-5"
    missing = make_api({"RAGCHAT_CHAT_MODEL": "auto", "ANTHROPIC_SECRET_NAME": "ragchat/dev/none"})
    res = missing.call("GET", "/health", principal=None)
    assert res["statusCode"] == 200 and json_body(res) == {
        "status": "ok",
        "version": json_body(res)["version"],
        "backend": "local",
        "model": "unknown",
    }
