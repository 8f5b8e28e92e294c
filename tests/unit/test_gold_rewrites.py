"""The conversation sets' gold rewrites (``bench/conversations/rewrites.json``), which the
recorded-prompt benchmark's ``--rewrites gold`` answers the condense step with: one standalone
question per turn of every split, the first turn as asked, and never the fact the turn asks for."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
CONVERSATIONS = BENCH / "conversations"
REWRITES = json.loads((CONVERSATIONS / "rewrites.json").read_text(encoding="utf-8"))["splits"]
sys.path.insert(0, str(BENCH))
from bench_recorded_prompts import SPLITS, StandIn, sweep  # noqa: E402


def _split(name: str) -> list[dict[str, object]]:
    data = json.loads((CONVERSATIONS / f"{name}.json").read_text(encoding="utf-8"))
    return list(data["conversations"])


@pytest.mark.parametrize("split", SPLITS)
def test_every_turn_has_its_rewrite(split: str) -> None:
    conversations = _split(split)
    assert set(REWRITES[split]) == {c["id"] for c in conversations}
    for conv in conversations:
        turns, rewrites = conv["turns"], REWRITES[split][conv["id"]]
        assert isinstance(turns, list)
        assert len(rewrites) == len(turns), conv["id"]
        assert rewrites[0] == turns[0]["q"], conv["id"]  # a first turn is searched as asked
        for turn, rewrite in zip(turns, rewrites, strict=True):
            assert rewrite.strip(), conv["id"]
            facts = [e for p in turn.get("parts") or [turn] for e in p.get("expect", [])]
            leaked = [f for f in facts if f.lower() in rewrite.lower() and f.lower() not in turn["q"].lower()]
            assert leaked == [], f"{conv['id']}: the rewrite gives away {leaked}"


def test_the_stand_in_answers_a_condense_request_with_the_gold_rewrite() -> None:
    import httpx2
    from ragchat.domain.prompts import CONDENSE_PROMPT

    stand_in = StandIn()
    body = {"model": "m", "system": CONDENSE_PROMPT, "messages": [{"role": "user", "content": "x"}]}
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages", json=body)
    stand_in.gold = "How much is a normal appointment at Thistlecombe vets?"
    reply = stand_in.handler(request).json()
    assert reply["content"][0]["text"] == stand_in.gold


def test_the_sweep_counts_kept_answers_and_refused_off_topic_turns() -> None:
    def row(kind: str, p: float, *, refused: bool = False, carried: bool = True) -> dict[str, object]:
        answerable = kind == "first"
        return {"set": "dev", "kind": kind, "answerable": answerable, "carried": carried and answerable,
                "refused": refused, "decision": {"p": p}}  # fmt: skip

    rows = [row("first", 0.9), row("first", 0.3), row("offtopic", 0.2), row("offtopic", 0.9, refused=True)]
    at = {w["cutoff"]: w for w in sweep(rows)}
    assert at[0.25] == {"cutoff": 0.25, "answerable_kept": 1.0, "offtopic_refused": 1.0}
    assert at[0.45] == {"cutoff": 0.45, "answerable_kept": 0.5, "offtopic_refused": 1.0}
    assert at[0.16]["offtopic_refused"] == 0.5
