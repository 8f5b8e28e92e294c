"""What reaches Claude: a recorded-prompt run over the grounding set and every conversation split.

A local stand-in for the Anthropic Messages API (``httpx2.MockTransport`` behind the real
``AnthropicChatModel``: no network) records every request. It answers the condense step of a
follow-up with a *naive* rewrite (the latest user message that was answered, then the message
itself: no knowledge of the answer), a summary request with a fixed line, and an answer request
with a line citing its first source. The documents are ingested through the real pipeline (a
throwaway local data directory, MiniLM), and questions go through the real paths with Claude as the
answerer, so the guard runs its ``reader`` policy (``ragchat.domain.answerability``).

Per set:
- *carried*: answerable turns whose answer request's system prompt holds their expected fact (one
  of the turn's ``expect`` strings; a two-part turn needs each part's) — for the grounding set,
  which has no facts, a source line of the expected document;
- *refused before the model*: turns answered with the guard reply, no answer request sent, counted
  apart for answerable turns (wrongly refused), clearly unrelated ones (*off-topic*: conversations'
  ``offtopic``, the grounding set's ``off_topic``; the goal is 100 %) and questions about the
  documents' subject that they do not answer (*unknown / near-topic*: conversations' ``unknown``, a
  name no note mentions, and the grounding set's ``near_topic``; with Claude these may reach the
  model, which says the notes do not cover them);
- *prompt tokens*: the answer request's system prompt and messages, estimated as characters / 4
  (median per turn), with the source lines' ``(document: …)`` titles and without them (before).

With ``--rewrites gold`` the condense step is answered instead with the turn's *gold* rewrite
(``bench/conversations/rewrites.json``: every turn written as a standalone question, from the
conversation and its documents only, blind to the method; never holding the fact the turn asks
for). That is the issue's own measure, "a stand-in that rewrites follow-ups perfectly": what is then
missed is retrieval and the guard, not the rewrite. The product still decides whether a turn is
condensed at all.

Usage: ``python bench/bench_recorded_prompts.py [--sets grounding,dev,heldout7,...] [--rewrites
naive|gold]``. Writes bench/results/recorded_prompts.{json,md} (``-gold`` before the suffix with
gold rewrites). Needs the prepared MiniLM model (``RAGCHAT_MODEL_DIR``, by
default the per-user cache).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import statistics
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdata import results_dir, smoke, smoke_sample
from grounding_set import documents as grounding_documents
from grounding_set import questions as grounding_questions
from grounding_set import smoke_questions

BENCH = Path(__file__).resolve().parent
CONVERSATIONS = BENCH / "conversations"
RESULTS = results_dir()
OWNER = "bench"
SPLITS = ("dev", "test", "heldout", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7")
BLIND = ("test", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7")
ANSWERABLE = ("first", "ellipsis", "pronoun", "shift", "two_part")
#: clearly unrelated questions (conversations' ``offtopic``, the grounding set's ``off_topic``): the
#: goal is that every one is refused before the model
OFF_TOPIC = ("offtopic", "off_topic")
#: about the documents' subject but asking what they do not say: names no note mentions
#: (conversations' ``unknown``) and the grounding set's ``near_topic`` questions. With Claude they may
#: reach the model, which says the notes do not cover them; reported on their own
UNKNOWN = ("unknown", "near_topic")
GOAL_CARRIED = 0.97
_TITLE = re.compile(r" \(document: [^)]*\)")
_SOURCE_ID = re.compile(r"\[Source id=([^\]\s]+)\]")


class GuardReasons(logging.Handler):
    """The ``chat.guard`` events' reasons (why a turn was refused before the model), and the last
    ``chat.retrieval`` event's decision (its signals and probability, kept with each row)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.reasons: list[str] = []
        self.decision: dict[str, Any] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "chat.guard":
            self.reasons.append(str(getattr(record, "reason", "?")))
        elif record.getMessage() == "chat.retrieval":
            self.decision = {
                "p": getattr(record, "answerProbability", None),
                "signals": getattr(record, "signals", None),
            }

    def take_decision(self) -> dict[str, Any]:
        out, self.decision = self.decision, {}
        return out

    def last_since(self, start: int) -> str | None:
        return self.reasons[-1] if len(self.reasons) > start else None


REASONS = GuardReasons()


class StandIn:
    """The Anthropic Messages API, recorded: every request's system prompt and messages."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        #: the current turn's gold rewrite (``--rewrites gold``); ``None``: the naive rewrite
        self.gold: str | None = None

    def handler(self, request: Any) -> Any:
        import httpx2
        from ragchat.domain.prompts import CONDENSE_PROMPT

        body = json.loads(request.content)
        self.requests.append(body)
        system = body.get("system") or ""
        last = body["messages"][-1]["content"]
        if system == CONDENSE_PROMPT:
            text = (
                self.gold if self.gold is not None else _naive_rewrite(last if isinstance(last, str) else "")
            )
        elif "[Source id=" in system:
            ids = _SOURCE_ID.findall(system)
            text = f"From the sources. [source: {ids[0]}]\n\nSources: {ids[0]}"
        else:
            text = "The user asked questions about their documents."
        reply = {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": tokens(json.dumps(body)), "output_tokens": tokens(text)},
        }
        return httpx2.Response(200, json=reply)

    def answers_since(self, start: int) -> list[dict[str, Any]]:
        return [
            r for r in self.requests[start:] if "[Source id=" in (r.get("system") or "") or _no_sources(r)
        ]


def _no_sources(body: dict[str, Any]) -> bool:
    return "(no sources retrieved)" in (body.get("system") or "")


def _naive_rewrite(transcript: str) -> str:
    """The condense stand-in: the latest user message that was answered (not refused), then the last
    one — what a model would take as the subject, without knowing the answer."""
    from ragchat.domain.prompts import GUARD_REPLY

    lines = transcript.splitlines()
    last = transcript.rsplit("user (last message):", 1)[-1].strip()
    subject = ""
    for i, line in enumerate(lines):
        answered = i + 1 < len(lines) and not lines[i + 1].startswith(f"assistant: {GUARD_REPLY[:40]}")
        if line.startswith("user:") and answered:
            subject = line.split(":", 1)[1].strip()
    return f"{subject} {last}" if subject else last


def tokens(text: str) -> int:
    return (len(text) + 3) // 4


def prompt_tokens(body: dict[str, Any], *, titles: bool = True) -> int:
    system = body.get("system") or ""
    if not titles:
        system = _TITLE.sub("", system)
    messages = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    return tokens(system) + tokens(messages)


def build(tmp: str, paths: dict[str, bytes], stand_in: StandIn) -> tuple[Any, dict[str, str]]:
    import httpx2
    from ragchat.adapters.aws.anthropic_model import AnthropicChatModel
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    passed = ("RAGCHAT_", "CHUNK_", "EVIDENCE_", "PRECOMPUTE_", "EMBEDDER_", "READER")
    env = {k: v for k, v in os.environ.items() if k.startswith(passed)}
    env |= {"RAGCHAT_DATA_DIR": tmp, "RAGCHAT_CHAT_MODEL": "extractive"}
    container = Container(load_settings(env))
    client = httpx2.Client(transport=httpx2.MockTransport(stand_in.handler))
    # Claude answers: the stand-in behind the real adapter (set before the retriever is built, so the
    # guard's policy is the reader's)
    container.__dict__["chat_model"] = AnthropicChatModel(
        api_key="sk-ant-bench", model="claude-haiku-4-5", http_client=client
    )
    names: dict[str, str] = {}
    for name, data in paths.items():
        doc = container.ingestion.submit_file(OWNER, data=data, filename=name)
        names[doc.id] = name.split(".")[0]
    container.launcher.wait_idle(600)
    wait_warm = getattr(container.launcher, "wait_warm", None)
    if wait_warm is not None:
        wait_warm(600)
    return container, names


def documents_of(prompt: str, names: dict[str, str]) -> set[str]:
    docs = set()
    for source in _SOURCE_ID.findall(prompt):
        for doc_id, name in names.items():
            if source.startswith(doc_id + "-"):
                docs.add(name)
    return docs


def _has(text: str, expect: list[str]) -> bool:
    low = text.lower()
    return any(e.lower() in low for e in expect)


def summarize(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if r["answerable"]]
    refuse = [r for r in rows if r["kind"] in OFF_TOPIC]
    near = [r for r in rows if r["kind"] in UNKNOWN]
    with_prompt = [r for r in rows if r["tokens"] is not None]
    return {
        "set": name,
        "carried": [sum(r["carried"] for r in answerable), len(answerable)],
        "answerable_refused": sum(r["refused"] for r in answerable),
        "offtopic_refused": [sum(r["refused"] for r in refuse), len(refuse)],
        "refused_by": dict(Counter(r["reason"] for r in answerable if r["refused"])),
        "unknown_refused": [sum(r["refused"] for r in near), len(near)],
        "tokens_median": statistics.median(r["tokens"] for r in with_prompt) if with_prompt else None,
        "tokens_median_before": (
            statistics.median(r["tokens_before"] for r in with_prompt) if with_prompt else None
        ),
        "condense_calls": sum(r["condense"] for r in rows),
    }


def run_grounding(stand_in: StandIn) -> list[dict[str, Any]]:
    qs, docs = grounding_questions(), grounding_documents()
    if smoke():  # a few questions of each kind and their documents: the figures mean nothing
        qs = smoke_questions(qs)
        docs = {name: data for name, data in docs.items() if name in {q.document for q in qs}}
    with tempfile.TemporaryDirectory() as tmp:
        container, names = build(tmp, docs, stand_in)
        out = []
        for q in qs:
            start, said = len(stand_in.requests), len(REASONS.reasons)
            result = container.ask.ask(OWNER, q.question)
            answers = stand_in.answers_since(start)
            prompt = answers[-1]["system"] if answers else ""
            docs = documents_of(prompt, names)
            expected = (q.document or "").split(".")[0]
            out.append({
                "set": f"grounding-{q.split}", "q": q.question, "kind": q.kind,
                "answerable": q.kind == "answerable", "refused": result.guard_used and not answers,
                "reason": REASONS.last_since(said) if result.guard_used else None,
                "carried": expected in docs, "docs": sorted(docs), "condense": 0,
                "tokens": prompt_tokens(answers[-1]) if answers else None,
                "tokens_before": prompt_tokens(answers[-1], titles=False) if answers else None,
            })  # fmt: skip
        container.close()
        return out


def conversation_sets() -> dict[str | None, list[str]]:
    groups: dict[str | None, list[str]] = defaultdict(list)
    for split in SPLITS:
        groups[json.loads((CONVERSATIONS / f"{split}.json").read_text()).get("docs")].append(split)
    return groups


Rewrites = dict[str, dict[str, list[str]]]


def gold_rewrites() -> Rewrites:
    """``bench/conversations/rewrites.json``'s rewrites: split -> conversation id -> one per turn."""
    data: dict[str, dict[str, list[str]]] = json.loads((CONVERSATIONS / "rewrites.json").read_text())[
        "splits"
    ]
    return data


def run_conversations(
    stand_in: StandIn,
    extra: str | None,
    splits: list[str],
    gold: dict[str, dict[str, list[str]]] | None = None,
) -> list[dict[str, Any]]:
    paths = {p.name: p.read_bytes() for p in sorted((CONVERSATIONS / "docs").glob("*.md"))}
    if extra:
        paths |= {p.name: p.read_bytes() for p in sorted((CONVERSATIONS / extra).glob("*.md"))}
    convs = {
        s: smoke_sample(json.loads((CONVERSATIONS / f"{s}.json").read_text())["conversations"], 2)
        for s in splits
    }
    if smoke():  # the documents the few conversations expect
        turns = [t for cs in convs.values() for c in cs for t in c["turns"]]
        wanted = {p["doc"] for t in turns for p in (t.get("parts") or [t]) if p.get("doc")}
        paths = {name: data for name, data in paths.items() if name.split(".")[0] in wanted}
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        container, names = build(tmp, paths, stand_in)
        for split in splits:
            for conv in convs[split]:
                cid = container.chat.conversations.create(OWNER).id
                rewrites = gold[split][conv["id"]] if gold is not None else None
                for i, turn in enumerate(conv["turns"]):
                    stand_in.gold = rewrites[i] if rewrites is not None else None
                    out.append(_turn(container, stand_in, names, split, cid, turn))
                stand_in.gold = None
        container.close()
    return out


def _turn(
    container: Any, stand_in: StandIn, names: dict[str, str], split: str, cid: str, turn: dict[str, Any]
) -> dict[str, Any]:
    from ragchat.domain.prompts import CONDENSE_PROMPT

    start, said = len(stand_in.requests), len(REASONS.reasons)
    REASONS.take_decision()
    result = container.chat.turns.send(OWNER, cid, turn["q"])
    answers = stand_in.answers_since(start)
    condense = sum(1 for r in stand_in.requests[start:] if r.get("system") == CONDENSE_PROMPT)
    prompt = answers[-1]["system"] if answers else ""
    parts = turn.get("parts") or [turn]
    carried = bool(answers) and all(_has(prompt, p.get("expect", [])) for p in parts)
    return {
        "set": split, "q": turn["q"], "kind": turn["kind"], "answerable": turn["kind"] in ANSWERABLE,
        "refused": result.guard_used and not answers, "carried": carried,
        "reason": REASONS.last_since(said) if result.guard_used else None,
        "docs": sorted(documents_of(prompt, names)), "query": result.message.query, "condense": condense,
        "expect": [e for p in parts for e in p.get("expect", [])],
        "tokens": prompt_tokens(answers[-1]) if answers else None,
        "tokens_before": prompt_tokens(answers[-1], titles=False) if answers else None,
        "decision": REASONS.take_decision(),
    }  # fmt: skip


SWEEP = (0.16, 0.25, 0.35, 0.45, 0.6, 0.8, 0.9, 0.95)


def sweep(rows: list[dict[str, Any]]) -> list[dict[str, float]]:
    """What one cutoff on the decision's probability would do over every conversation split: the
    share of the answerable turns carried today that it keeps, and the share of off-topic turns
    refused (those refused today, plus those reaching the model below it). An estimate from the
    recorded decisions (nothing is run again)."""
    convs = [r for r in rows if not r["set"].startswith("grounding")]
    kept = [r["decision"]["p"] for r in convs if r["answerable"] and r["carried"] and r.get("decision")]
    kept = [p for p in kept if p is not None]
    off = [r for r in convs if r["kind"] in OFF_TOPIC]
    out = []
    for cut in SWEEP:
        refused = sum(1 for r in off if r["refused"] or ((r.get("decision") or {}).get("p") or 0.0) < cut)
        out.append({
            "cutoff": cut,
            "answerable_kept": round(sum(1 for p in kept if p >= cut) / len(kept), 3) if kept else 0.0,
            "offtopic_refused": round(refused / len(off), 3) if off else 0.0,
        })  # fmt: skip
    return out


def _cell(pair: list[int]) -> str:
    ok, n = pair
    return f"{ok}/{n} ({ok / n:.1%})" if n else "–"


def markdown(
    summaries: list[dict[str, Any]], rows: list[dict[str, Any]], load: str, rewrites: str = "naive"
) -> str:
    condense = (
        "the condense step answered with the turn's gold rewrite (`bench/conversations/rewrites.json`: "
        "each turn as a standalone question, written blind to the method; `--rewrites gold`)"
        if rewrites == "gold"
        else "the condense step answered with a naive rewrite (the latest answered user message + "
        "the message)"
    )
    lines = [
        "# What reaches Claude: recorded prompts",
        "",
        "`python bench/bench_recorded_prompts.py` — a local stand-in for the Anthropic Messages API "
        f"records every request (no network); MiniLM, Claude mode (the guard's reader policy), {condense}. "
        "*carried*: answerable turns whose answer prompt holds the expected fact (grounding set: a "
        "source of the expected document); *refused*: guard reply, no answer request sent. "
        "*off-topic*: clearly unrelated questions (conversations' `offtopic`, the grounding set's "
        "`off_topic`), the goal's 100 %; *unknown / near-topic*: questions about the documents' "
        "subject that they do not answer (conversations' `unknown`: a name no note mentions; the "
        "grounding set's `near_topic`), which with Claude may reach the model (it says the notes "
        "do not cover them), reported on their own. Tokens: "
        "characters / 4 of the answer request (system + messages), median per answered turn, with "
        "the source lines' document titles and without them.",
        "",
        f"Machine: {platform.machine()}, load {load}. Blind splits: grounding-test, {', '.join(BLIND)}.",
        "",
        "| set | carried | answerable refused | off-topic refused | unknown / near-topic refused | "
        "tokens (titles) | tokens (before) | condense calls |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        lines.append(
            f"| {s['set']} | {_cell(s['carried'])} | {s['answerable_refused']} | "
            f"{_cell(s['offtopic_refused'])} | {_cell(s['unknown_refused'])} | "
            f"{s['tokens_median']} | {s['tokens_median_before']} | {s['condense_calls']} |"
        )
    lines += ["", f"Goals: carried ≥ {GOAL_CARRIED:.0%} on every blind split; off-topic refused 100 %.", ""]
    swept = sweep(rows)
    if swept:
        lines += [
            "## One cutoff on the decision's probability (every conversation split)",
            "",
            "An estimate from the recorded decisions: the answerable turns carried today that a cutoff "
            "would keep, and the off-topic turns it would refuse before the model.",
            "",
            "| cutoff | answerable kept | off-topic refused |",
            "|---|---|---|",
            *(f"| {w['cutoff']} | {w['answerable_kept']:.1%} | {w['offtopic_refused']:.1%} |" for w in swept),
            "",
        ]
    for s in summaries:
        misses = [r for r in rows if r["set"] == s["set"] and r["answerable"] and not r["carried"]]
        let = [r for r in rows if r["set"] == s["set"] and r["kind"] in OFF_TOPIC and not r["refused"]]
        if not misses and not let:
            continue
        lines += [f"## {s['set']}", ""]
        for r in misses:
            what = f"refused ({r['reason']})" if r["refused"] else f"prompt docs {r['docs']}"
            lines.append(f"- not carried ({r['kind']}): “{r['q']}” — {what}; query “{r.get('query')}”")
        for r in let:
            lines.append(f"- off-topic reached the model: “{r['q']}” — docs {r['docs']}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="all", help="grounding and/or conversation splits, comma-separated")
    ap.add_argument("--rewrites", choices=("naive", "gold"), default="naive", help="the condense stand-in")
    ap.add_argument("--reader", choices=("on", "off"), help="the extractive reader guards (default: READER)")
    args = ap.parse_args([] if argv is None else argv)  # run_all.py calls main() with no args
    if args.reader:
        os.environ["READER"] = args.reader
    every = {"grounding", "dev"} if smoke() else {"grounding", *SPLITS}  # smoke: one split of each kind
    wanted = set(args.sets.split(",")) if args.sets != "all" else every
    stand_in = StandIn()
    log = logging.getLogger("ragchat")
    log.addHandler(REASONS)
    log.setLevel(logging.INFO)
    rows: list[dict[str, Any]] = []
    if "grounding" in wanted:
        rows += run_grounding(stand_in)
    for extra, splits in conversation_sets().items():
        chosen = [s for s in splits if s in wanted]
        if chosen:
            gold = gold_rewrites() if args.rewrites == "gold" else None
            rows += run_conversations(stand_in, extra, chosen, gold)
    names = list(dict.fromkeys(r["set"] for r in rows))
    summaries = [summarize(n, [r for r in rows if r["set"] == n]) for n in names]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    for s in summaries:
        print(json.dumps(s))
    RESULTS.mkdir(exist_ok=True)
    out = {"load": load, "python": sys.version.split()[0], "summaries": summaries, "rows": rows}
    name = "recorded_prompts" + ("-gold" if args.rewrites == "gold" else "")
    name += "-reader" if os.environ.get("READER") == "on" else ""  # the reader's figures go aside
    out["rewrites"] = args.rewrites
    out["sweep"] = sweep(rows)
    (RESULTS / f"{name}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown(summaries, rows, load, args.rewrites) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
