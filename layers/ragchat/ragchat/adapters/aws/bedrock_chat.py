"""``ChatModel`` on Amazon Bedrock through the Converse API (Claude on Bedrock by default).

The system prompt goes in ``system``; turns alternate user/assistant starting with the user (same
merge rules as the Anthropic adapter). Retries (docs/retrieval.md): 2, on throttling, timeouts, 5xx and
connection errors, sleeping 200 ms then 400 ms through an injected ``sleep``. Build the client with
botocore retries off (``Config(retries={"total_max_attempts": 1})``) so this policy is the only one.

Tool-use mode (docs/chat.md, ``CHAT_MODE=tools``): :meth:`complete_with_tools` gives Claude on Bedrock the
same ``search_notes`` / ``get_note`` tools as the Anthropic adapter, through Converse's
``toolConfig`` / ``toolUse`` / ``toolResult`` blocks, for at most ``MAX_TOOL_ROUNDS`` rounds. Converse
has no "no tools" choice and needs ``toolConfig`` once tool blocks are in the conversation, so the
last round says in the user turn that no more searches will run, and only its text is kept.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ragchat.adapters.aws.anthropic_model import TOOLS, alternate, run_tool, tool_result_text
from ragchat.adapters.aws.bedrock_errors import describe, is_retryable, jittered, log_failure
from ragchat.domain.claude import Effort, Thinking, max_output_tokens, reasoning_fields
from ragchat.domain.errors import ModelError
from ragchat.domain.limits import RETRY_DELAYS, Budget, Sleep, call_with_retries
from ragchat.domain.models import Completion, Hit, ModelRequest
from ragchat.domain.tools import MAX_TOOL_ROUNDS
from ragchat.ports import NoteTools

TOOL_CONFIG: dict[str, Any] = {
    "tools": [
        {
            "toolSpec": {
                "name": t["name"],
                "description": t["description"],
                "inputSchema": {"json": t["input_schema"]},
            }
        }
        for t in TOOLS
    ]
}
logger = logging.getLogger("ragchat.adapters.bedrock_chat")
LAST_ROUND_NOTE = "No more searches will run: answer now from the notes above, citing them."

# Stop reasons after which the text is the whole answer; any other (max_tokens, content_filtered,
# guardrail_intervened, model_context_window_exceeded, malformed_*) is logged, and fails the call
# when no text came with it.
COMPLETE_STOPS = frozenset({"end_turn", "stop_sequence", "tool_use"})


def client_config(*, connect_timeout: float = 3.0, first_token_timeout: float = 10.0) -> Any:
    """The botocore ``Config`` of the bedrock-runtime client: connect and read (first token / next
    stream event) timeouts, and botocore's retries off (the adapter applies docs/retrieval.md's policy)."""
    from botocore.config import Config

    return Config(
        connect_timeout=connect_timeout,
        read_timeout=first_token_timeout,
        retries={"total_max_attempts": 1},
    )


class BedrockConverseChatModel:
    """Claude on Bedrock (Converse API). Build its client with :func:`client_config` so each attempt
    has connect / first-token timeouts. A botocore client cannot shorten them per request, so an
    attempt starts only while a whole first-token wait fits in the call's ``ModelRequest.timeout_s``:
    a hung model never overruns the budget."""

    def __init__(
        self,
        client: Any,
        model_id: str,
        *,
        sleep: Sleep = time.sleep,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        clock: Callable[[], float] = time.monotonic,
        first_token_timeout: float = 10.0,
        jitter: Callable[[], float] = random.random,
        thinking: Thinking = "off",
        effort: Effort = "low",
    ) -> None:
        """``retry_delays`` are the nominal waits (docs/retrieval.md: 200 ms, 400 ms); each is jittered to
        between half and all of it (``jitter`` in [0, 1), injectable). Any model id or inference
        profile id works (``us.anthropic.claude-haiku-5-5``): Converse takes either. ``thinking`` /
        ``effort``: what a model with adaptive thinking is asked for (docs/chat.md, "Models"); they
        travel as ``additionalModelRequestFields``, and ``maxTokens`` is in the model's tokens."""
        self.model_id = model_id
        self.thinking: Thinking = thinking
        self.effort: Effort = effort
        self._jitter = jitter
        self._first_token = first_token_timeout
        self._client = client
        self._sleep = sleep
        self._delays = tuple(retry_delays)
        self._clock = clock

    def _request(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "modelId": self.model_id,
            "system": [{"text": request.system}],
            "messages": [
                {"role": m["role"], "content": [{"text": m["content"]}]} for m in alternate(request.messages)
            ],
            "inferenceConfig": {
                "maxTokens": max_output_tokens(request.max_tokens, self.model_id, self.thinking)
            },
        }
        fields = reasoning_fields(self.model_id, self.thinking, self.effort)
        if fields:
            kwargs["additionalModelRequestFields"] = fields
        return kwargs

    def _call(self, op: str, kwargs: dict[str, Any], budget: Budget) -> Any:
        def attempt() -> Any:
            left = budget.left()
            if left is not None and left < self._first_token:
                raise ModelError(f"Bedrock {op}: no time left for another attempt")
            return getattr(self._client, op)(**kwargs)

        delays = jittered(self._delays, self._jitter)
        try:
            return call_with_retries(
                attempt, retryable=is_retryable, sleep=self._sleep, delays=delays, budget=budget
            )
        except ModelError:
            raise
        except Exception as exc:
            log_failure(exc, self.model_id, op)
            raise ModelError(f"Bedrock {op} failed: {describe(exc, self.model_id)}") from exc

    def complete(self, request: ModelRequest) -> Completion:
        budget = Budget.start(request.timeout_s, self._clock)
        return self._completion(self._call("converse", self._request(request), budget), [])

    def complete_with_tools(
        self, request: ModelRequest, tools: NoteTools, *, max_rounds: int = MAX_TOOL_ROUNDS
    ) -> Completion:
        """Answer with ``search_notes`` / ``get_note`` available for up to ``max_rounds`` rounds of
        tool calls; every note a tool returned comes back in ``Completion.tool_hits``."""
        kwargs = {**self._request(request), "toolConfig": TOOL_CONFIG}
        messages: list[dict[str, Any]] = kwargs["messages"]
        found: dict[str, Hit] = {}
        budget = Budget.start(request.timeout_s, self._clock)  # for every round together
        for round_no in range(max_rounds + 1):
            response = self._call("converse", kwargs, budget)
            message = response.get("output", {}).get("message", {})
            uses = [b["toolUse"] for b in message.get("content", []) if "toolUse" in b]
            if round_no == max_rounds or response.get("stopReason") != "tool_use" or not uses:
                return self._completion(response, list(found.values()))
            messages.append({"role": "assistant", "content": message["content"]})
            results: list[dict[str, Any]] = []
            for use in uses:
                hits = run_tool(tools, str(use.get("name")), use.get("input") or {})
                for h in hits:
                    found.setdefault(h.id, h)
                results.append(
                    {
                        "toolResult": {
                            "toolUseId": use["toolUseId"],
                            "content": [{"text": tool_result_text(hits)}],
                        }
                    }
                )
            if round_no + 1 == max_rounds:
                results.append({"text": LAST_ROUND_NOTE})
            messages.append({"role": "user", "content": results})
        raise AssertionError("unreachable")  # pragma: no cover

    def _completion(self, response: dict[str, Any], tool_hits: list[Hit]) -> Completion:
        content = response.get("output", {}).get("message", {}).get("content", [])
        text = "".join(block.get("text", "") for block in content)
        self._check_stop(response.get("stopReason"), bool(text.strip()))
        usage = response.get("usage") or {}
        return Completion(
            text=text,
            model=self.model_id,
            tool_hits=tool_hits,
            input_tokens=usage.get("inputTokens"),
            output_tokens=usage.get("outputTokens"),
        )

    def _check_stop(self, reason: str | None, has_text: bool) -> None:
        """Log an answer that did not end normally; with no text at all it is a failure."""
        if reason is None or reason in COMPLETE_STOPS:
            return
        logger.warning("bedrock.stop_reason", extra={"modelId": self.model_id, "stopReason": reason})
        if not has_text:
            raise ModelError(f"Bedrock returned no answer (stop reason {reason})")

    def stream(self, request: ModelRequest) -> Iterator[str]:
        """Text deltas of ConverseStream. An exception event in the stream (botocore raises it as
        ``EventStreamError`` while iterating: throttling, model stream error, …) ends it with
        ``ModelError``; so does a stop without any text. Not retried once the stream is open."""
        budget = Budget.start(request.timeout_s, self._clock)
        response = self._call("converse_stream", self._request(request), budget)
        stream = response.get("stream")
        sent = False
        try:
            for event in stream or []:
                delta = event.get("contentBlockDelta", {}).get("delta", {})
                if delta.get("text"):
                    sent = True
                    yield delta["text"]
                elif "messageStop" in event:
                    self._check_stop(event["messageStop"].get("stopReason"), sent)
        except (ModelError, GeneratorExit):
            raise
        except Exception as exc:
            log_failure(exc, self.model_id, "converse_stream")
            raise ModelError(f"Bedrock stream failed: {describe(exc, self.model_id)}") from exc
        finally:
            if stream is not None and hasattr(stream, "close"):
                stream.close()
