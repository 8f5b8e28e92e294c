"""A stand-in for the boto3 ``bedrock-runtime`` client answering as Claude does through Converse and
ConverseStream: requests validated against the botocore service model, then against the model's own
rules (Anthropic: "What's new in Claude Haiku 5.5", adaptive thinking and effort; AWS: adaptive
thinking on Bedrock; read 2026-11-29), answers shaped like the service's.

What it refuses, as the service does (``ValidationException``):

- on Claude 5 and later, non-default sampling (``temperature``, ``topP``, ``top_k``) and a last
  message from the assistant (prefill);
- manual extended thinking (``thinking.type: enabled`` with ``budget_tokens``) on a model that thinks
  adaptively only (Claude 4.7 and later), and ``thinking.type: disabled`` on one that always thinks
  (Opus 4.7 and later);
- ``thinking: adaptive`` or ``output_config.effort`` on a model without adaptive thinking (before
  4.6); an effort outside low, medium, high, xhigh, max.

How it answers. With thinking on (``adaptive``, or nothing sent to a model that thinks by default:
Haiku 5.5 at medium effort, Sonnet 5.5 at high), the stream carries a reasoning block (its text
omitted, a signature only, as Claude 5 sends by default) before the answer's text; thinking tokens
are billed as output. Time is virtual: the fake advances an injected clock by a **latency model**
— ``first_event_s`` to the first event, then ``1 / tokens_per_s`` per output token, thinking
tokens included — so a caller measures when its first text arrives without sleeping. The number
of thinking tokens per effort (:data:`THINKING_TOKENS`, and which questions a lower effort skips
thinking on) is an assumption of this model, not a documented figure: the documented behaviour is
only that lower efforts think less and may skip thinking on simple requests.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import botocore.session
from botocore.exceptions import ClientError, ParamValidationError
from botocore.validate import ParamValidator
from ragchat.domain.claude import DEFAULT_EFFORT, claude_model

_MODEL = botocore.session.get_session().get_service_model("bedrock-runtime")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
# Thinking tokens a RAG answer takes per effort, and the share of questions thought about at all
# (a lower effort skips thinking on simple requests): the latency model's assumption.
THINKING_TOKENS = {"low": 120, "medium": 350, "high": 900, "xhigh": 1800, "max": 3000}
THINKS_SHARE = {"low": 0.25, "medium": 0.9, "high": 1.0, "xhigh": 1.0, "max": 1.0}
_SOURCE = re.compile(r"\[Source id=([A-Za-z0-9_-]+)\]")


def _error(message: str, op: str) -> ClientError:
    return ClientError({"Error": {"Code": "ValidationException", "Message": message}}, op)


@dataclass
class LatencyModel:
    """Seconds to the first event, and output speed (tokens per second, thinking included)."""

    first_event_s: float = 0.35
    tokens_per_s: float = 180.0


@dataclass
class FakeBedrockClaude:
    clock: Callable[[], float]
    advance: Callable[[float], Any]
    latency: LatencyModel = field(default_factory=LatencyModel)
    answer_words: int = 60
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    # ------------------------------------------------------------------ validation
    def _check(self, op: str, params: dict[str, Any]) -> tuple[bool, int]:
        """Validate; return (thinks, thinking tokens) for this request."""
        shape = _MODEL.operation_model(op).input_shape
        report = ParamValidator().validate(params, shape)
        if report.has_errors():
            raise ParamValidationError(report=report.generate_report())
        self.calls.append((op, params))
        model = claude_model(params["modelId"])
        if model is None:
            raise _error(f"The provided model identifier is invalid: {params['modelId']}", op)
        extra = dict(params.get("additionalModelRequestFields") or {})
        inference = params.get("inferenceConfig") or {}
        if model.major >= 5:
            if "temperature" in inference or "topP" in inference or "top_k" in extra:
                raise _error("temperature, top_p and top_k can't be set for this model", op)
            if params["messages"] and params["messages"][-1]["role"] == "assistant":
                raise _error("This model does not support assistant message prefill", op)
        thinking = (extra.get("thinking") or {}).get("type")
        effort = (extra.get("output_config") or {}).get("effort")
        if not model.adaptive and (thinking == "adaptive" or effort is not None):
            raise _error("adaptive thinking and effort are not supported by this model", op)
        if effort is not None and effort not in EFFORTS:
            raise _error(f"effort must be one of {', '.join(EFFORTS)}", op)
        if thinking == "enabled" and model.version >= (4, 7):
            raise _error('thinking.type "enabled" is not supported for this model: use "adaptive"', op)
        if thinking == "disabled" and model.always_thinks:
            raise _error('thinking.type "disabled" is not supported for this model', op)
        if not model.adaptive:
            return False, 0
        # a 5.x model thinks by default (Haiku at medium); Opus/4.7+ always
        default_on = model.major >= 5 or model.always_thinks
        on = thinking == "adaptive" or (thinking is None and default_on)
        if not on:
            return False, 0
        level = effort or DEFAULT_EFFORT.get(model.family, "high")
        question = str(params["messages"][-1]["content"])
        draw = int(hashlib.sha256(question.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        tokens = THINKING_TOKENS[level] if draw < THINKS_SHARE[level] else 0
        budget = int(inference.get("maxTokens") or 4096)
        if tokens >= budget:
            tokens = budget  # thinking counts toward maxTokens: the answer never starts
        return tokens > 0, tokens

    def _answer(self, params: dict[str, Any]) -> str:
        system = " ".join(b.get("text", "") for b in params.get("system") or [])
        ids = _SOURCE.findall(system)
        words = " ".join(["answer"] * max(1, self.answer_words - 4))
        return f"{words} [source: {ids[0]}]" if ids else words

    @staticmethod
    def _usage(params: dict[str, Any], output: int) -> dict[str, int]:
        chars = sum(len(str(m)) for m in params.get("messages", [])) + len(str(params.get("system")))
        inp = max(1, chars // 4)
        return {"inputTokens": inp, "outputTokens": output, "totalTokens": inp + output}

    # ------------------------------------------------------------------ API
    def converse(self, **params: Any) -> dict[str, Any]:
        thinks, thinking_tokens = self._check("Converse", params)
        text = self._answer(params)
        text_tokens = len(text.split())
        budget = int((params.get("inferenceConfig") or {}).get("maxTokens") or 4096)
        left = budget - thinking_tokens
        content: list[dict[str, Any]] = []
        if thinks:
            content.append({"reasoningContent": {"reasoningText": {"text": "", "signature": "sig"}}})
        stop = "end_turn"
        if left <= 0:
            text, stop = "", "max_tokens"
        elif text_tokens > left:
            text, stop = " ".join(text.split()[:left]), "max_tokens"
        if text:
            content.append({"text": text})
        out_tokens = thinking_tokens + len(text.split())
        self.advance(self.latency.first_event_s + out_tokens / self.latency.tokens_per_s)
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop,
            "usage": self._usage(params, out_tokens),
            "metrics": {"latencyMs": 0},
        }

    def converse_stream(self, **params: Any) -> dict[str, Any]:
        thinks, thinking_tokens = self._check("ConverseStream", params)
        return {"stream": self._events(params, thinks, thinking_tokens)}

    def _events(self, params: dict[str, Any], thinks: bool, thinking_tokens: int) -> Iterator[dict[str, Any]]:
        per_token = 1.0 / self.latency.tokens_per_s
        self.advance(self.latency.first_event_s)
        yield {"messageStart": {"role": "assistant"}}
        index = 0
        if thinks:
            self.advance(thinking_tokens * per_token)
            yield {
                "contentBlockDelta": {
                    "delta": {"reasoningContent": {"signature": "sig"}},
                    "contentBlockIndex": 0,
                }
            }
            yield {"contentBlockStop": {"contentBlockIndex": 0}}
            index = 1
        budget = int((params.get("inferenceConfig") or {}).get("maxTokens") or 4096)
        words = self._answer(params).split(" ")
        sent = 0
        for n, word in enumerate(words):
            if thinking_tokens + sent >= budget:
                break
            self.advance(per_token)
            sent += 1
            yield {
                "contentBlockDelta": {
                    "delta": {"text": word if n == 0 else " " + word},
                    "contentBlockIndex": index,
                }
            }
        stop = "end_turn" if sent == len(words) else "max_tokens"
        yield {"contentBlockStop": {"contentBlockIndex": index}}
        yield {"messageStop": {"stopReason": stop}}
        yield {
            "metadata": {"usage": self._usage(params, thinking_tokens + sent), "metrics": {"latencyMs": 0}}
        }
