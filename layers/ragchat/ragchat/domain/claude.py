"""What the code needs to know about a Claude model, read from its id (docs/chat.md, "Models").

Any id naming ``claude-(haiku|sonnet|opus)-<major>-<minor>`` is understood, whatever wraps it: the
Anthropic API's ``claude-haiku-5-5``, Bedrock's ``anthropic.claude-haiku-5-5`` or
``anthropic.claude-haiku-4-5-20251001-v1:0``, an inference profile's ``us.anthropic.claude-…``.

- **Tokenizer.** Claude 4.7 and later count the same text as about 30 % more tokens than Claude
  Haiku 4.5 and earlier (Anthropic, "What's new in Claude Haiku 5.5"). The project's estimate
  (:func:`ragchat.domain.messages.estimate_tokens`: words and punctuation-separated pieces) is
  calibrated on the earlier tokenizer; :attr:`ClaudeModel.token_factor` turns it into the model's
  tokens, and output budgets (``max_tokens``) written for the earlier tokenizer are scaled by it.
- **Thinking.** Claude 4.6 and later take *adaptive* thinking with an ``effort``
  (``output_config.effort``: low, medium, high); Haiku 5.5 thinks adaptively by default at medium
  effort and Sonnet 5.5 at high. Thinking can be turned off (``thinking.type: disabled``) except on
  the models where it is always on (Opus 4.7 and Opus 5.5 and later: a 400 otherwise). Earlier
  models (Haiku 4.5, Sonnet/Opus 4.5 and before) think only when asked with a token budget; the
  project never asks them, so they get neither field. Thinking tokens count toward ``max_tokens``.
- **Sampling.** Claude 5 models refuse non-default ``temperature``/``top_p``/``top_k`` and an
  assistant prefill; the adapters send neither to any model.
- **Prices** (USD per million input / output tokens, Anthropic list prices, prompts up to 100k
  tokens): :data:`PRICES`, for the cost table in docs/deploy.md and the bench.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Effort = Literal["low", "medium", "high"]
Thinking = Literal["off", "adaptive"]

_ID = re.compile(r"claude-(haiku|sonnet|opus)-(\d+)-(\d{1,2})(?!\d)")
NEW_TOKENIZER_FROM = (4, 7)
NEW_TOKENIZER_FACTOR = 1.3
ADAPTIVE_FROM = (4, 6)

# USD per million tokens (input, output), prompts up to 100k tokens; re-checked 2026-11-29 on
# Anthropic's model pages (Haiku 5.5 "from $0.10 / $0.50": $0.50 / $2.50 past 100k-token prompts).
PRICES: dict[str, tuple[float, float]] = {
    "haiku-5-5": (0.10, 0.50),
    "sonnet-5-5": (2.00, 10.00),
    "opus-5-5": (4.00, 20.00),
    "haiku-4-5": (1.00, 5.00),
}
# Models whose thinking cannot be turned off: Opus from 4.7 ("adaptive, always on").
_ALWAYS_THINKS = {"opus": (4, 7)}
# The effort a model thinks at when none is sent.
DEFAULT_EFFORT: dict[str, Effort] = {"haiku": "medium", "sonnet": "high", "opus": "medium"}


@dataclass(frozen=True, slots=True)
class ClaudeModel:
    family: Literal["haiku", "sonnet", "opus"]
    major: int
    minor: int

    @property
    def version(self) -> tuple[int, int]:
        return (self.major, self.minor)

    @property
    def name(self) -> str:
        return f"{self.family}-{self.major}-{self.minor}"

    @property
    def token_factor(self) -> float:
        """This model's tokens per token of the earlier tokenizer (the estimate's unit)."""
        return NEW_TOKENIZER_FACTOR if self.version >= NEW_TOKENIZER_FROM else 1.0

    @property
    def adaptive(self) -> bool:
        """Takes ``thinking: adaptive`` and ``output_config.effort``."""
        return self.version >= ADAPTIVE_FROM

    @property
    def always_thinks(self) -> bool:
        """Refuses ``thinking: disabled``."""
        since = _ALWAYS_THINKS.get(self.family)
        return since is not None and self.version >= since

    @property
    def prices(self) -> tuple[float, float] | None:
        return PRICES.get(self.name)


def claude_model(model_id: str) -> ClaudeModel | None:
    """The Claude model an Anthropic, Bedrock or inference-profile id names; ``None`` for another id."""
    match = _ID.search(model_id)
    if match is None:
        return None
    family, major, minor = match.groups()
    return ClaudeModel(family, int(major), int(minor))  # type: ignore[arg-type]


def token_factor(model_id: str | None) -> float:
    """Tokens of ``model_id`` per estimated token (1.0 for an id that names no Claude model)."""
    model = claude_model(model_id or "")
    return model.token_factor if model else 1.0


def output_budget(tokens: int, model_id: str | None) -> int:
    """An output budget written in estimated tokens, in ``model_id``'s tokens."""
    return round(tokens * token_factor(model_id))


def reasoning_fields(model_id: str, thinking: Thinking, effort: Effort) -> dict[str, object]:
    """The request fields that set thinking and effort for ``model_id`` (the Messages API's names;
    Bedrock Converse takes them as ``additionalModelRequestFields``). Nothing for a model without
    adaptive thinking; on a model that always thinks, ``off`` becomes adaptive thinking at
    ``effort`` (the least it allows)."""
    model = claude_model(model_id)
    if model is None or not model.adaptive:
        return {}
    mode = "adaptive" if thinking == "adaptive" or model.always_thinks else "disabled"
    return {"thinking": {"type": mode}, "output_config": {"effort": effort}}


def thinks(model_id: str, thinking: Thinking) -> bool:
    """Whether a call to ``model_id`` with this setting may spend tokens thinking."""
    model = claude_model(model_id)
    return model is not None and model.adaptive and (thinking == "adaptive" or model.always_thinks)


# Room for thinking on top of the answer's budget when a call may think (thinking tokens count
# toward max_tokens; without it a long think would cut the answer off).
THINKING_ALLOWANCE = 2048


def max_output_tokens(tokens: int, model_id: str, thinking: Thinking) -> int:
    """``max_tokens`` for an answer budgeted at ``tokens`` estimated tokens: in the model's tokens,
    plus :data:`THINKING_ALLOWANCE` when the call may think."""
    return output_budget(tokens, model_id) + (THINKING_ALLOWANCE if thinks(model_id, thinking) else 0)


# Claude Haiku 5.5 on Bedrock, invoked through a cross-Region inference profile: ``<geo>.`` + this.
DEFAULT_BEDROCK_CHAT_MODEL = "anthropic.claude-haiku-5-5"
DEFAULT_ANTHROPIC_MODEL = "claude-haiku-5-5"
PROFILE_GEOGRAPHY = {"us": "us", "eu": "eu", "ap": "apac"}  # Region prefix -> profile geography (else global)


def default_bedrock_chat_model(region: str) -> str:
    """The answer model when BEDROCK_CHAT_MODEL_ID is unset: Claude Haiku 5.5 through the inference
    profile of ``region``'s geography (``us-east-1`` -> ``us.anthropic.claude-haiku-5-5``)."""
    geography = PROFILE_GEOGRAPHY.get(region.split("-", 1)[0], "global")
    return f"{geography}.{DEFAULT_BEDROCK_CHAT_MODEL}"
