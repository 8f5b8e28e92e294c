"""What thinking costs a RAG answer's first token, per thinking / effort setting (docs/chat.md,
"Models"; docs/benchmarks.md, "Thinking and the first token").

Each of SciFact's 300 test claims is asked as a question through the product's Bedrock adapter
(``BedrockConverseChatModel.stream``) against the contract fake of Claude on Bedrock
(``tests/contract/fake_bedrock_claude.py``), which answers as the real API does: a reasoning block
before the text when the model thinks, thinking tokens billed as output. Time is the fake's
latency model, not a measurement of Bedrock: 0.35 s to the first event, then 180 output tokens
per second, thinking tokens included, and per effort the thinking a RAG answer takes (low 120
tokens on a quarter of the questions, medium 350 on 90 %, high 900 on all): assumptions, stated
in the fake. What the bench shows is structural: every thinking token comes before the first word,
so any setting that thinks on most questions misses a 500 ms first token whatever the real speeds.

Cost per 1,000 answers at Haiku 5.5's list price ($0.10 / $0.50 per million input / output
tokens), with the turn of docs/deploy.md's cost table (2,500 input and 300 output tokens as
counted by the earlier tokenizer, x 1.3 for Haiku 5.5's) plus the thinking tokens.

Usage: ``python bench/bench_thinking.py`` (no model, no network; a few seconds).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from benchdata import bench_data_dir, results_dir, smoke_sample

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [p for p in (str(ROOT),) if p not in sys.path]  # the fake lives with the tests
RESULTS = results_dir()
MODEL = "us.anthropic.claude-haiku-5-5"
GOAL_S = 0.5
INPUT_TOKENS, OUTPUT_TOKENS = 2500 * 1.3, 300 * 1.3  # a turn, in Haiku 5.5's tokens
PRICE_IN, PRICE_OUT = 0.10, 0.50  # USD per million tokens (prompts up to 100k tokens)

# (label, thinking, effort); thinking None = nothing sent: the model's own default
SETTINGS: list[tuple[str, str | None, str]] = [
    ("nothing sent (Haiku 5.5's default: adaptive, medium)", None, "medium"),
    ("adaptive, high", "adaptive", "high"),
    ("adaptive, medium", "adaptive", "medium"),
    ("adaptive, low", "adaptive", "low"),
    ("off, low (MODEL_THINKING=off, MODEL_EFFORT=low: the default)", "off", "low"),
]


def questions() -> list[str]:
    path = bench_data_dir() / "scifact" / "queries.jsonl"
    qrels = bench_data_dir() / "scifact" / "qrels" / "test.tsv"
    test_ids = {line.split("\t")[0] for line in qrels.read_text(encoding="utf-8").splitlines()[1:]}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return smoke_sample([r["text"] for r in rows if r["_id"] in test_ids], 10)


def run(label: str, thinking: str | None, effort: str, texts: list[str]) -> dict[str, Any]:
    """Each question streamed; the virtual time of its first text. ``thinking`` None: the request
    the adapter builds, minus its thinking fields (a client that leaves the model to its default)."""
    from ragchat.adapters.aws.bedrock_chat import BedrockConverseChatModel
    from ragchat.domain.models import ChatTurn, ModelRequest

    from tests.contract.fake_bedrock_claude import FakeBedrockClaude
    from tests.fakes.clock import FakeClock

    clock = FakeClock(0.0)
    fake = FakeBedrockClaude(clock, clock.advance)
    model = BedrockConverseChatModel(fake, MODEL, sleep=lambda s: None, clock=clock,
                                     thinking=thinking or "off", effort=effort)  # type: ignore[arg-type]  # fmt: skip
    firsts, thought = [], []
    for text in texts:
        req = ModelRequest(
            system="You are a helpful AI assistant.\nSources:\n[Source id=n1] ...",
            messages=[ChatTurn("user", text)],
            sources=[],
            question=text,
        )
        start = clock()
        if thinking is None:
            kwargs = model._request(req)
            kwargs.pop("additionalModelRequestFields")
            events = fake.converse_stream(**kwargs)["stream"]
            texts_out = (e["contentBlockDelta"]["delta"]["text"] for e in events
                         if e.get("contentBlockDelta", {}).get("delta", {}).get("text"))  # fmt: skip
        else:
            texts_out = model.stream(req)
        next(texts_out)
        firsts.append(clock() - start)
        list(texts_out)
        op, params = fake.calls[-1]
        thought.append(fake._check(op, params)[1])  # the same deterministic draw, read again
        fake.calls.pop()
    mean_thinking = statistics.fmean(thought)
    cost = (INPUT_TOKENS * PRICE_IN + (OUTPUT_TOKENS + mean_thinking) * PRICE_OUT) / 1e6 * 1000
    firsts_ms = sorted(f * 1000 for f in firsts)
    return {
        "setting": label,
        "questions": len(texts),
        "first_token_ms_p50": round(statistics.median(firsts_ms)),
        "first_token_ms_p95": round(firsts_ms[int(0.95 * (len(firsts_ms) - 1))]),
        "within_500ms": round(sum(f <= GOAL_S for f in firsts) / len(firsts), 3),
        "thinking_tokens_mean": round(mean_thinking),
        "usd_per_1000_answers": round(cost, 3),
    }


def main(argv: list[str] | None = None) -> None:
    texts = questions()
    rows = []
    for label, thinking, effort in SETTINGS:
        rows.append(run(label, thinking, effort, texts))
        print(rows[-1], flush=True)
    (RESULTS / "thinking.json").write_text(json.dumps({"model": MODEL, "rows": rows}, indent=2) + "\n")
    lines = [
        "### Thinking and the first token: Haiku 5.5 through the Bedrock adapter, the fake's latency model",
        "",
        "| setting | first token p50 | p95 | within 500 ms | thinking tokens (mean) | $ per 1,000 answers |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['setting']} | {r['first_token_ms_p50']} ms | {r['first_token_ms_p95']} ms "
            f"| {r['within_500ms']:.0%} | {r['thinking_tokens_mean']} | ${r['usd_per_1000_answers']:.3f} |"
        )
    lines += [
        "",
        f"{rows[0]['questions']} SciFact test claims asked as questions. Latency model (an assumption, "
        "not a Bedrock measurement): 0.35 s to the first event, 180 output tokens/s, thinking per effort "
        "as in tests/contract/fake_bedrock_claude.py. `python bench/bench_thinking.py`.",
    ]
    (RESULTS / "thinking.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
