"""Claude model ids: which generation a model is, its tokenizer, and the thinking fields it takes;
the template's BedrockChatModelId pattern accepts exactly the profiles the code understands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ragchat.adapters.aws.anthropic_model import AnthropicChatModel
from ragchat.config import load_settings
from ragchat.domain.claude import (
    THINKING_ALLOWANCE,
    claude_model,
    max_output_tokens,
    reasoning_fields,
    token_factor,
)
from ragchat.domain.models import ChatTurn, ModelRequest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("model_id", "name", "factor", "adaptive", "always"),
    [
        ("claude-haiku-5-5", "haiku-5-5", 1.3, True, False),
        ("us.anthropic.claude-haiku-5-5", "haiku-5-5", 1.3, True, False),
        ("global.anthropic.claude-opus-5-5", "opus-5-5", 1.3, True, True),
        ("anthropic.claude-sonnet-5-5", "sonnet-5-5", 1.3, True, False),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "haiku-4-5", 1.0, False, False),
        ("jp.anthropic.claude-sonnet-4-6", "sonnet-4-6", 1.0, True, False),
        ("claude-opus-4-7", "opus-4-7", 1.3, True, True),
        ("us.anthropic.claude-haiku-10-0", "haiku-10-0", 1.3, True, False),
    ],
)
def test_a_model_id_says_which_claude_it_is(model_id, name, factor, adaptive, always):
    model = claude_model(model_id)
    assert model is not None
    assert (model.name, model.token_factor, model.adaptive, model.always_thinks) == (
        name,
        factor,
        adaptive,
        always,
    )


@pytest.mark.parametrize(
    "model_id", ["amazon.nova-pro-v1:0", "apac.anthropic.claude-sonnet-4-20250514-v1:0", ""]
)
def test_other_ids_are_no_known_claude_generation_and_get_nothing(model_id):
    assert claude_model(model_id) is None
    assert token_factor(model_id) == 1.0
    assert reasoning_fields(model_id, "off", "low") == {}


def test_thinking_fields_per_generation():
    assert reasoning_fields("us.anthropic.claude-haiku-5-5", "off", "low") == {
        "thinking": {"type": "disabled"},
        "output_config": {"effort": "low"},
    }
    assert reasoning_fields("claude-haiku-5-5", "adaptive", "medium") == {
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "medium"},
    }
    # Opus 5.5 refuses thinking disabled: off becomes adaptive at the effort asked
    assert reasoning_fields("us.anthropic.claude-opus-5-5", "off", "low")["thinking"] == {"type": "adaptive"}
    assert reasoning_fields("us.anthropic.claude-haiku-4-5-20251001-v1:0", "adaptive", "high") == {}


def test_budgets_are_in_the_models_tokens_with_room_to_think():
    assert max_output_tokens(100, "claude-haiku-5-5", "off") == 130
    assert max_output_tokens(100, "claude-haiku-5-5", "adaptive") == 130 + THINKING_ALLOWANCE
    assert max_output_tokens(100, "claude-opus-5-5", "off") == 130 + THINKING_ALLOWANCE  # it always thinks
    assert max_output_tokens(100, "claude-haiku-4-5", "adaptive") == 100


def test_the_defaults_are_haiku_5_5_without_thinking_at_low_effort():
    settings = load_settings({})
    assert settings.anthropic_model == "claude-haiku-5-5"
    assert (settings.model_thinking, settings.model_effort) == ("off", "low")
    with pytest.raises(ValueError, match="MODEL_EFFORT"):
        load_settings({"MODEL_EFFORT": "extreme"})


def test_the_anthropic_adapter_sends_the_same_fields():
    model = AnthropicChatModel(api_key="sk-test", model="claude-haiku-5-5")
    request = ModelRequest(
        system="s", messages=[ChatTurn("user", "q")], sources=[], question="q", max_tokens=400
    )
    sent = model._base(request)
    assert sent["max_tokens"] == 520
    assert sent["thinking"] == {"type": "disabled"} and sent["output_config"] == {"effort": "low"}
    assert "temperature" not in sent


def _template_pattern() -> str:
    text = (ROOT / "template.yaml").read_text(encoding="utf-8")
    match = re.search(r"BedrockChatModelId:\n(?:    .*\n)*?    AllowedPattern: \"(.*)\"\n", text)
    assert match, "BedrockChatModelId has an AllowedPattern"
    return match.group(1).replace("\\\\", "\\")


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("", True),
        ("us.anthropic.claude-haiku-5-5", True),
        ("global.anthropic.claude-sonnet-5-5", True),
        ("eu.anthropic.claude-opus-5-5", True),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", True),
        ("jp.anthropic.claude-sonnet-4-6", True),
        ("anthropic.claude-haiku-5-5", False),  # not a profile
        ("us.anthropic.claude-haiku-5-5.evil", False),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", False),
        ("us.amazon.nova-pro-v1:0", False),
    ],
)
def test_the_templates_model_parameter_takes_claude_profiles_the_code_understands(value, accepted):
    assert bool(re.fullmatch(_template_pattern(), value)) == accepted
    if accepted and value:
        assert claude_model(value) is not None
