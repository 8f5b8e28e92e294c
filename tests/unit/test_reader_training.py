"""The extractive reader's training data (bench/reader_qa_data.py) and script (bench/train_reader.py):
split by article, spans where the answer is, hard negatives from the same article, never the
project's own grounding or conversation sets; the dry run; and the smoke run, whose model the
product's ``OnnxReader`` loads and reads with (one reading per passage, offsets inside it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reader_smoke import EXPORT_PYTHON, minilm_source, smoke_reader, tiny_bench_data

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import reader_qa_data as rd  # noqa: E402


def _full_squad() -> Path | None:
    for candidate in (os.environ.get("RAGCHAT_BENCH_DATA", ""), str(REPO.parent / "shared" / "bench-data")):
        if candidate and (Path(candidate) / rd.SQUAD_FULL).is_file():
            return Path(candidate)
    return None


def test_the_split_is_by_whole_article_seeded_and_order_free(tmp_path: Path) -> None:
    articles = rd.load_squad(tiny_bench_data(tmp_path) / rd.SQUAD_FULL)
    parts = rd.split_articles(list(articles), seed=7)
    assert len(parts["test"]) >= 1 and len(parts["dev"]) >= 1 and parts["train"]
    assert sorted(a for part in parts.values() for a in part) == sorted(articles)  # each in one part
    again = rd.split_articles(list(reversed(list(articles))), seed=7)
    assert again == parts


def test_an_answer_span_is_where_the_answer_is_and_hard_negatives_come_from_the_article(
    tmp_path: Path,
) -> None:
    articles = {
        "River": [
            ("The river is blue. People swim there.", [_qa("q1", "What colour is the river?", "blue", 13)]),
            ("The bridge is old. Carts cross it.", []),
        ]
    }
    examples = rd.squad_examples(articles, ["River"], hard_negatives=1.0)
    [answered] = [e for e in examples if e.source == "squad"]
    assert answered.answer is not None
    assert answered.passage.startswith("River\n")  # the title on the first line, as a note's header
    assert answered.passage[answered.answer[0] : answered.answer[1]] == "blue"
    [negative] = [e for e in examples if e.source == "squad-hard-negative"]
    assert negative.answer is None and "bridge" in negative.passage and negative.group == "River"


def _qa(qid: str, question: str, text: str, start: int) -> dict[str, object]:
    return {"id": qid, "question": question, "answers": [{"text": text, "answer_start": start}]}


def test_no_training_text_comes_from_the_grounding_or_conversation_sets() -> None:
    bench = _full_squad()
    if bench is None:
        pytest.skip("SQuAD 2.0 (full dev) bench data not available")
    data = rd.datasets(bench)
    ours = " ".join(
        p.read_text(encoding="utf-8", errors="replace").lower()
        for folder in ("grounding", "conversations")
        for p in (REPO / "bench" / folder).rglob("*")
        if p.is_file()
    )
    questions = {e.question.lower().strip() for e in data["train"]}
    assert not [q for q in questions if len(q) > 25 and q in ours]
    train_articles = {e.group for e in data["train"] if e.source.startswith("squad")}
    held = {e.group for part in ("dev", "test") for e in data[part]}
    assert train_articles and held and not train_articles & held


def test_the_dry_run_prints_the_split(tmp_path: Path) -> None:
    data = tiny_bench_data(tmp_path)
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "train_reader.py"), "--dry-run", "--data", str(data)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "layers" / "ragchat")},
    )
    summary = json.loads(run.stdout.split("] ", 1)[1])
    split = summary["articles"]
    assert sum(len(v) for v in split.values()) == 8
    assert not set(split["train"]) & (set(split["dev"]) | set(split["test"]))
    assert summary["unanswerable"]["train"] >= 1


@pytest.mark.slow
@pytest.mark.skipif(not EXPORT_PYTHON.is_file(), reason="the export virtualenv (torch) is not there")
def test_the_smoke_run_makes_a_reader_the_product_reads_with(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    if minilm_source() is None:
        pytest.skip("the all-MiniLM-L6-v2 weights package is not installed")
    base = tmp_path_factory.getbasetemp() / "reader-smoke"
    out = smoke_reader(base)
    assert out is not None
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert (out / "model-int8.onnx").stat().st_size == manifest["bytes"] <= 35 * 1024 * 1024
    assert (base / "results" / "reader_train-smoke.jsonl").read_text(encoding="utf-8").count("loss") >= 1

    from ragchat.adapters.local.reader import OnnxReader

    reader = OnnxReader.from_cache(out.parent)
    assert reader.sha256 == manifest["sha256"] and reader.threshold == manifest["threshold"]
    passages = ["The river number 3 is blue. People swim there.", "Bridges " * 400, ""]
    readings = reader.read("What colour is river 3?", passages)
    assert len(readings) == len(passages)  # one per passage, a long one read in windows
    for passage, reading in zip(passages[:2], readings[:2], strict=True):
        assert reading.found and 0 <= reading.start < reading.end <= len(passage)
    assert not readings[2].found  # an empty passage has no span
