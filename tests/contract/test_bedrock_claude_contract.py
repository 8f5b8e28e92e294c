"""The Bedrock Converse adapter against a fake that answers as Claude on Bedrock does
(tests/contract/fake_bedrock_claude.py): the requests it sends for each Claude generation are ones
the model accepts, and with the default settings the first word of an answer is not held back by
thinking. Time is virtual (the fake advances a clock by its latency model)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from ragchat.adapters.aws.bedrock_chat import BedrockConverseChatModel
from ragchat.config import load_settings
from ragchat.domain.errors import ModelError
from ragchat.domain.models import ChatTurn, ModelRequest

from tests.contract.fake_bedrock_claude import FakeBedrockClaude, LatencyModel
from tests.fakes.clock import FakeClock

HAIKU_55 = "us.anthropic.claude-haiku-5-5"
SOURCES = "Sources:\n[Source id=n1] The Eiffel Tower was completed in 1889."


def request(question: str = "When was the Eiffel Tower completed?", max_tokens: int = 1024) -> ModelRequest:
    return ModelRequest(
        system=f"You are a helpful AI assistant.\n{SOURCES}",
        messages=[ChatTurn("user", question)],
        sources=[],
        question=question,
        max_tokens=max_tokens,
    )


def setup(
    model_id: str = HAIKU_55, **kw: str
) -> tuple[BedrockConverseChatModel, FakeBedrockClaude, FakeClock]:
    clock = FakeClock(0.0)
    fake = FakeBedrockClaude(clock, clock.advance, latency=LatencyModel(first_event_s=0.35, tokens_per_s=180))
    model = BedrockConverseChatModel(fake, model_id, sleep=lambda s: None, clock=clock, **kw)  # type: ignore[arg-type]
    return model, fake, clock


def first_text_at(model: BedrockConverseChatModel, clock: FakeClock, req: ModelRequest) -> tuple[float, str]:
    start = clock()
    stream = model.stream(req)
    first = next(stream)
    at = clock() - start
    rest = "".join(stream)
    return at, first + rest


def test_the_default_settings_send_haiku_5_5_no_thinking_and_its_first_word_comes_at_once():
    settings = load_settings({"RAGCHAT_CHAT_MODEL": "bedrock"})
    model, fake, clock = setup(thinking=settings.model_thinking, effort=settings.model_effort)
    at, text = first_text_at(model, clock, request())
    assert at == pytest.approx(0.35 + 1 / 180)  # the first event, then one token: no thinking before it
    assert text.endswith("[source: n1]")
    sent = fake.calls[-1][1]
    assert sent["additionalModelRequestFields"] == {
        "thinking": {"type": "disabled"},
        "output_config": {"effort": "low"},
    }
    assert sent["inferenceConfig"] == {"maxTokens": round(1024 * 1.3)}  # the 5.5 tokenizer's 30 % more


def test_haiku_5_5_left_to_its_default_thinks_before_the_first_word():
    """What the defaults avoid: sent nothing, Haiku 5.5 thinks adaptively at medium effort."""
    model, fake, clock = setup(thinking="adaptive", effort="medium")
    at, _ = first_text_at(model, clock, request())
    assert at > 0.35 + 300 / 180  # ~350 thinking tokens at 180 tokens/s before the answer starts
    assert fake.calls[-1][1]["inferenceConfig"]["maxTokens"] == round(1024 * 1.3) + 2048


def test_a_short_budget_is_not_eaten_by_thinking():
    """The condense call asks 100 tokens: with thinking on, the allowance keeps the answer."""
    model, _, _ = setup(thinking="adaptive", effort="high")
    assert model.complete(request(max_tokens=100)).text


def test_opus_5_5_always_thinks_so_off_becomes_adaptive_at_the_effort_asked():
    model, fake, _ = setup("global.anthropic.claude-opus-5-5", thinking="off", effort="low")
    assert model.complete(request()).text
    assert fake.calls[-1][1]["additionalModelRequestFields"]["thinking"] == {"type": "adaptive"}


def test_haiku_4_5_stays_selectable_and_gets_no_thinking_fields():
    model, fake, clock = setup("us.anthropic.claude-haiku-4-5-20251001-v1:0", thinking="off", effort="low")
    at, _ = first_text_at(model, clock, request())
    assert at == pytest.approx(0.35 + 1 / 180)
    assert "additionalModelRequestFields" not in fake.calls[-1][1]
    assert fake.calls[-1][1]["inferenceConfig"] == {"maxTokens": 1024}  # the earlier tokenizer


@pytest.mark.parametrize(
    ("model_id", "extra", "inference", "match"),
    [
        (HAIKU_55, {}, {"maxTokens": 10, "temperature": 0.2}, "temperature"),
        (HAIKU_55, {"thinking": {"type": "enabled", "budget_tokens": 1024}}, {}, "enabled"),
        ("us.anthropic.claude-opus-5-5", {"thinking": {"type": "disabled"}}, {}, "disabled"),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", {"output_config": {"effort": "low"}}, {}, "effort"),
        (HAIKU_55, {"output_config": {"effort": "minimal"}}, {}, "effort must be"),
    ],
)
def test_the_fake_refuses_what_claude_on_bedrock_refuses(model_id, extra, inference, match):
    clock = FakeClock(0.0)
    fake = FakeBedrockClaude(clock, clock.advance)
    params = {"modelId": model_id, "messages": [{"role": "user", "content": [{"text": "hi"}]}]}
    if extra:
        params["additionalModelRequestFields"] = extra
    if inference:
        params["inferenceConfig"] = inference
    with pytest.raises(ClientError, match=match):
        fake.converse(**params)


def test_the_fake_refuses_a_prefill_on_claude_5():
    clock = FakeClock(0.0)
    fake = FakeBedrockClaude(clock, clock.advance)
    messages = [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"text": "The"}]},
    ]
    with pytest.raises(ClientError, match="prefill"):
        fake.converse(modelId=HAIKU_55, messages=messages)


def test_an_answer_cut_by_max_tokens_before_any_text_is_a_model_error():
    model, fake, _ = setup(thinking="adaptive", effort="high")
    fake.answer_words = 10
    # the fake thinks 900 tokens at high effort; a model budget below it leaves no answer
    model._request = (lambda orig: lambda r: {**orig(r), "inferenceConfig": {"maxTokens": 500}})(
        model._request
    )  # type: ignore[method-assign]
    with pytest.raises(ModelError, match="max_tokens"):
        model.complete(request())
