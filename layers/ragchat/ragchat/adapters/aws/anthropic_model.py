"""``ChatModel`` on the Anthropic API (Claude) through the ``anthropic`` SDK.

- The SDK (~1.7 s to import) is imported inside the first call, never at import time.
- The system prompt goes in the ``system`` parameter; turns alternate user/assistant (consecutive
  same-role turns are merged, leading assistant turns dropped) and end with the user.
- Retries (docs/retrieval.md): 2, on network errors, timeouts, 5xx, 429 and 529 (overloaded), sleeping 200 ms
  then 400 ms through an injected ``sleep``; the SDK's own retries are off (``max_retries=0``).
  A final failure raises ``ModelError``.
- Tool-use mode (docs/chat.md): :meth:`complete_with_tools` lets Claude call ``search_notes`` and
  ``get_note`` for at most ``MAX_TOOL_ROUNDS`` rounds; the notes the tools returned come back in
  ``Completion.tool_hits``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ragchat.domain.claude import Effort, Thinking, max_output_tokens, reasoning_fields
from ragchat.domain.errors import ModelError
from ragchat.domain.limits import RETRY_DELAYS, Budget, Sleep, call_with_retries
from ragchat.domain.models import ChatTurn, Completion, Hit, ModelRequest
from ragchat.domain.tools import MAX_TOOL_ROUNDS, clamp_limit
from ragchat.ports import NoteTools

TOOL_TEXT_CHARS = 1200

TOOLS: list[dict[str, Any]] = [
    {
        "name": "search_notes",
        "description": (
            "Search the user's notes and documents. Returns up to `limit` notes as "
            "'[Source id=<id>] <text>' entries; cite them as [source: <id>]."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
            },
            "required": ["query"],
        },
    },
    {
        "name": "get_note",
        "description": "Fetch one note by id (the full stored text).",
        "input_schema": {
            "type": "object",
            "properties": {"id": {"type": "string", "description": "The note id."}},
            "required": ["id"],
        },
    },
]


def alternate(turns: Sequence[ChatTurn]) -> list[dict[str, Any]]:
    """Anthropic/Converse message list: empty turns skipped, leading assistant turns dropped,
    consecutive same-role turns merged (blank line between), so roles strictly alternate starting
    with ``user``."""
    out: list[dict[str, Any]] = []
    for turn in turns:
        text = turn.content.strip()
        if not text:
            continue
        if not out and turn.role != "user":
            continue
        if out and out[-1]["role"] == turn.role:
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": turn.role, "content": text})
    if not out:
        raise ModelError("No user message to send to the model")
    return out


def is_retryable(exc: BaseException) -> bool:
    import anthropic

    if isinstance(exc, anthropic.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def tool_result_text(hits: Sequence[Hit]) -> str:
    if not hits:
        return "No matching notes."
    return "\n".join(f"[Source id={h.id}] {h.text[:TOOL_TEXT_CHARS]}" for h in hits)


class AnthropicChatModel:
    """Claude through the Anthropic messages API."""

    def __init__(
        self,
        api_key: str,
        model: str,
        *,
        http_client: Any = None,
        base_url: str | None = None,
        connect_timeout: float = 3.0,
        first_token_timeout: float = 10.0,
        sleep: Sleep = time.sleep,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        clock: Callable[[], float] = time.monotonic,
        thinking: Thinking = "off",
        effort: Effort = "low",
    ) -> None:
        """``connect_timeout``: to open the connection; ``first_token_timeout``: the longest wait for
        bytes (the response, or the next stream event). Each call is also bounded in all by its
        ``ModelRequest.timeout_s`` (attempts and retries included). ``thinking`` / ``effort``: what a
        model with adaptive thinking is asked for (docs/chat.md, "Models")."""
        self.model_id = model
        self.thinking: Thinking = thinking
        self.effort: Effort = effort
        self._api_key = api_key
        self._http_client = http_client
        self._base_url = base_url
        self._connect = connect_timeout
        self._first_token = first_token_timeout
        self._clock = clock
        self._sleep = sleep
        self._delays = tuple(retry_delays)
        self._client: Any = None

    def __repr__(self) -> str:  # never shows the key
        return f"AnthropicChatModel(model={self.model_id!r})"

    @property
    def client(self) -> Any:
        if self._client is None:
            import anthropic

            self._client = anthropic.Anthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                http_client=self._http_client,
                timeout=anthropic.Timeout(self._first_token, connect=self._connect),
                max_retries=0,
            )
        return self._client

    # ------------------------------------------------------------------ calls
    def _timeout(self, budget: Budget) -> Any:
        """The timeouts of one attempt: connect / first token, capped by the call's time left."""
        import anthropic

        left = budget.left()
        if left is not None and left <= 0:
            raise ModelError("Claude did not answer in time")
        return anthropic.Timeout(budget.cap(self._first_token), connect=budget.cap(self._connect))

    def _create(self, budget: Budget, **kwargs: Any) -> Any:
        try:
            return call_with_retries(
                lambda: self.client.messages.create(**kwargs, timeout=self._timeout(budget)),
                retryable=is_retryable,
                sleep=self._sleep,
                delays=self._delays,
                budget=budget,
            )
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"Claude call failed: {_describe(exc)}") from exc

    def _base(self, request: ModelRequest) -> dict[str, Any]:
        return {
            "model": self.model_id,
            "max_tokens": max_output_tokens(request.max_tokens, self.model_id, self.thinking),
            "system": request.system,
            "messages": alternate(request.messages),
            **reasoning_fields(self.model_id, self.thinking, self.effort),
        }

    def complete(self, request: ModelRequest) -> Completion:
        response = self._create(Budget.start(request.timeout_s, self._clock), **self._base(request))
        return self._completion(response, [])

    def stream(self, request: ModelRequest) -> Iterator[str]:
        """Text deltas. Retries apply only until the first delta arrived (a retry after that would
        repeat text)."""
        kwargs = self._base(request)
        budget = Budget.start(request.timeout_s, self._clock)
        for attempt in range(len(self._delays) + 1):
            started = False
            try:
                with self.client.messages.stream(**kwargs, timeout=self._timeout(budget)) as stream:
                    for text in stream.text_stream:
                        started = True
                        yield text
                return
            except GeneratorExit:
                raise
            except Exception as exc:
                retry = attempt < len(self._delays) and budget.allows(self._delays[attempt])
                if started or not retry or not is_retryable(exc):
                    raise ModelError(f"Claude stream failed: {_describe(exc)}") from exc
                self._sleep(self._delays[attempt])

    def complete_with_tools(
        self, request: ModelRequest, tools: NoteTools, *, max_rounds: int = MAX_TOOL_ROUNDS
    ) -> Completion:
        """Answer with ``search_notes`` / ``get_note`` available for up to ``max_rounds`` rounds; a
        last call without tools forces a text answer if the model still wants to search."""
        base = self._base(request)
        messages: list[dict[str, Any]] = list(base.pop("messages"))
        found: dict[str, Hit] = {}
        budget = Budget.start(request.timeout_s, self._clock)  # for every round together
        for round_no in range(max_rounds + 1):
            final = round_no == max_rounds
            kwargs = {**base, "messages": messages, "tools": TOOLS}
            if final:
                kwargs["tool_choice"] = {"type": "none"}
            response = self._create(budget, **kwargs)
            uses = [b for b in response.content if getattr(b, "type", None) == "tool_use"]
            if final or response.stop_reason != "tool_use" or not uses:
                return self._completion(response, list(found.values()))
            messages.append({"role": "assistant", "content": [_block_param(b) for b in response.content]})
            results = []
            for use in uses:
                hits = run_tool(tools, use.name, use.input or {})
                for h in hits:
                    found.setdefault(h.id, h)
                results.append(
                    {"type": "tool_result", "tool_use_id": use.id, "content": tool_result_text(hits)}
                )
            messages.append({"role": "user", "content": results})
        raise AssertionError("unreachable")  # pragma: no cover

    def _completion(self, response: Any, tool_hits: list[Hit]) -> Completion:
        text = "".join(b.text for b in response.content if getattr(b, "type", None) == "text")
        usage = getattr(response, "usage", None)
        return Completion(
            text=text,
            model=getattr(response, "model", None) or self.model_id,
            tool_hits=tool_hits,
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
        )


def run_tool(tools: NoteTools, name: str, args: Any) -> list[Hit]:
    if not isinstance(args, dict):
        return []
    if name == "search_notes":
        query = str(args.get("query") or "").strip()
        if not query:
            return []
        return tools.search_notes(query, clamp_limit(args.get("limit")))
    if name == "get_note":
        hit = tools.get_note(str(args.get("id") or ""))
        return [hit] if hit else []
    return []


def _block_param(block: Any) -> dict[str, Any]:
    kind = getattr(block, "type", None)
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "text":
        return {"type": "text", "text": block.text}
    dump = block.model_dump(exclude_none=True) if hasattr(block, "model_dump") else dict(block)
    return dict(json.loads(json.dumps(dump, default=str)))


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return f"{name} (HTTP {status})" if status else name
