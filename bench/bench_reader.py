"""The extractive reader on the evaluation-only answerability sets (docs/reader.md), and what it costs.

The sets (``answerability/`` in the bench data, its README: "evaluation only", written by other people
for other purposes; no threshold is tuned on them): SubjQA dev (questions over product, hotel,
restaurant, book and movie reviews; the review is the passage, ``ANSWERNOTFOUND`` marks the
unanswerable ones), WikiQA dev (a question's candidate sentences rebuild its Wikipedia summary: the
passage; answerable when one sentence is labelled), ACE-whQA (news; has-answer and the two IDK
files). Each question is read with its passage as the product reads a note
(``ragchat.domain.read_answers.passage_of``: the passage's sentences), through the product's
``OnnxReader``.

Per set: the question AUC of the reader's best margin (answerable vs unanswerable), and at the
operating point (``READER_THRESHOLD``, else the model's calibrated one): accuracy, answerable
answered, unanswerable refused. ``--reader off`` measures the same with the product's decision
without a reader (the calibrated similarity decision of ``ragchat.domain.answerability`` over the
MiniLM embedder's signals for that one passage), the baseline a reader must beat.

Cost (``--reader on``): resident memory of the loaded model, and the time to read a question with
three and with five notes of 1,000 characters (the product's topK and adaptive topK; median of 21,
one thread as a request thread runs it).

Writes bench/results/reader-eval.json (``--reader off``: reader-eval-off.json). ``--limit N``: N
questions of each set, spread over it. Smoke mode (``RAGCHAT_BENCH_SMOKE=1``): 12 questions per set.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchdata import bench_data_dir, models_path, results_dir, smoke

SMOKE_QUESTIONS = 12


@dataclass(frozen=True, slots=True)
class Item:
    question: str
    passage: str
    answerable: bool
    title: str | None = None  # read on the passage's first line, as the product reads a note's title


# ------------------------------------------------------------------------------------------ the sets
def subjqa(folder: Path) -> list[Item]:
    csv.field_size_limit(1 << 30)
    out: list[Item] = []
    for path in sorted(folder.glob("*-dev.csv")):
        with path.open(encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                review = row["review"].removesuffix("ANSWERNOTFOUND").strip()
                spans = row["human_ans_spans"].strip()
                out.append(Item(row["question"].strip(), review, spans != "ANSWERNOTFOUND"))
    return out


def wikiqa(folder: Path) -> list[Item]:
    sentences: dict[str, list[str]] = defaultdict(list)
    labels: dict[str, bool] = defaultdict(bool)
    asked: dict[str, str] = {}
    titles: dict[str, str] = {}
    with (folder / "WikiQA-dev.tsv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
            qid = row["QuestionID"]
            asked[qid] = row["Question"].strip()
            titles[qid] = row["DocumentTitle"].strip()
            sentences[qid].append(row["Sentence"].strip())
            labels[qid] |= row["Label"] == "1"
    return [Item(asked[q], " ".join(sentences[q]), labels[q], titles[q]) for q in asked]


def ace_whqa(folder: Path) -> list[Item]:
    out: list[Item] = []
    for path in sorted(folder.glob("ACE-whQA-*.json")):
        for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    answerable = not qa.get("is_impossible") and bool(qa.get("answers"))
                    out.append(Item(" ".join(str(qa["question"]).split()), paragraph["context"], answerable))
    return out


SETS: dict[str, tuple[str, Callable[[Path], list[Item]]]] = {
    "subjqa-dev": ("subjqa", subjqa),
    "wikiqa-dev": ("wikiqa", wikiqa),
    "ace-whqa": ("ace-whqa", ace_whqa),
}


# ------------------------------------------------------------------------------------------ figures
def auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """P(an answerable question scores above an unanswerable one); ties count half."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    ranked = sorted((s, i) for i, s in enumerate(scores))
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(ranked):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[ranked[k][1]] = (i + j) / 2 + 1
        i = j + 1
    pos_ranks = sum(r for r, y in zip(ranks, labels, strict=True) if y)
    return (pos_ranks - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))


def figures(items: Sequence[Item], scores: Sequence[float], answered: Sequence[bool]) -> dict[str, object]:
    labels = [it.answerable for it in items]
    has = [a for a, y in zip(answered, labels, strict=True) if y]
    no = [a for a, y in zip(answered, labels, strict=True) if not y]
    right = sum(a == y for a, y in zip(answered, labels, strict=True))
    return {
        "questions": len(items),
        "answerable": len(has),
        "unanswerable": len(no),
        "question_auc": round(auc(scores, labels), 4),
        "accuracy": round(right / max(1, len(items)), 4),
        "answerable_answered": round(sum(has) / max(1, len(has)), 4),
        "unanswerable_refused": round(1 - sum(no) / max(1, len(no)), 4),
    }


# ------------------------------------------------------------------------------------------ deciders
def reader_decider(reader, threshold: float):  # type: ignore[no-untyped-def]
    """(score, answered) of a question and its passage: the reader's best margin against the threshold."""
    from ragchat.domain.models import Hit
    from ragchat.domain.read_answers import answers, best_found, passage_of

    def decide(item: Item) -> tuple[float, bool]:
        passage = passage_of(Hit(id="p", score=1.0, text=item.passage), item.title)
        found = best_found([passage], reader.read(item.question, [passage.text]))
        score = found.margin if found is not None else -1e9
        return score, answers(found, threshold)

    return decide


def similarity_decider(embedder, threshold: float):  # type: ignore[no-untyped-def]
    """(probability, answered) of the product's decision without a reader for one passage."""
    import numpy as np
    from ragchat.domain import answerability as a

    coefficients = a.CALIBRATED.get(embedder.model_id)

    def decide(item: Item) -> tuple[float, bool]:
        q = np.asarray(embedder.embed_query(item.question), dtype=np.float32)
        top = float(np.asarray(embedder.embed_documents([item.passage])[0], dtype=np.float32) @ q)
        pieces = a.evidence_passages([item.passage])
        sims = None
        if coefficients is not None and pieces:
            sims = (np.asarray(embedder.embed_documents(pieces), dtype=np.float32) @ q).tolist()
        decision = a.decide(
            a.compute_signals(item.question, [top], [item.passage], sims), threshold, coefficients
        )
        score = decision.probability if decision.probability is not None else top
        return score, decision.answer

    return decide


# ------------------------------------------------------------------------------------------ cost
def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


NOTE = (
    "Refunds are requested from the orders page by the account owner. Staff approve them within two "
    "working days, and the money reaches the customer's card within five business days. Card fees are "
    "kept. A refund for a damaged item needs a photo of the damage. Items bought in a sale are refunded "
    "at the price paid. Gift cards are never refunded, but they can be exchanged once. "
)


def cost(reader) -> dict[str, float]:  # type: ignore[no-untyped-def]
    question = "How long does a refund take to reach the customer's card?"
    note = (NOTE * 4)[:1000]
    out: dict[str, float] = {}
    for k in (3, 5):
        passages = [note] * k
        reader.read(question, passages)
        times = []
        for _ in range(21):
            t = time.perf_counter()
            reader.read(question, passages)
            times.append((time.perf_counter() - t) * 1000)
        out[f"read_{k}_notes_ms_median"] = round(statistics.median(times), 1)
    return out


# ------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reader", choices=("on", "off"), default=os.environ.get("READER", "on"))
    ap.add_argument("--limit", type=int, help="the first N questions of each set")
    args = ap.parse_args([] if argv is None else argv)  # make bench calls main() with its own argv
    import onnxruntime  # noqa: F401  (loaded before the baseline: the embedder has it anyway)
    from ragchat.adapters.local.onnx_embedder import ModelNotPreparedError
    from ragchat.bootstrap.models import Models
    from ragchat.config import load_settings

    limit = SMOKE_QUESTIONS if smoke() else args.limit
    data = bench_data_dir() / "answerability"
    settings = load_settings({"RAGCHAT_MODEL_DIR": str(models_path()), "READER": args.reader, **_knobs()})
    models = Models(settings)
    before = rss_mb()
    result: dict[str, object] = {"reader": args.reader}
    if args.reader == "on":
        try:
            reader = models.reader
        except ModelNotPreparedError:  # the reader is trained by `make reader` (or shipped)
            print("bench reader: SKIPPED: the reader model is not prepared (make reader)")
            return 0
        threshold = models.reader_threshold()
        result |= {"threshold": threshold, "model_sha256": getattr(reader, "sha256", None)}
        result["rss_mb_loaded"] = round(rss_mb() - before, 1)
        decide = reader_decider(reader, threshold)
    else:
        embedder = models.embedder
        decide = similarity_decider(embedder, settings.similarity_threshold)
        result["embedder"] = embedder.model_id
    sets: dict[str, object] = {}
    print(f"{'set':12} {'n':>5} {'AUC':>6} {'acc':>6} {'answered':>9} {'refused':>8}  (reader {args.reader})")
    for name, (folder, load) in SETS.items():
        if not (data / folder).exists():
            print(f"{name}: SKIPPED ({data / folder} missing)")
            continue
        items = load(data / folder)
        if limit:  # spread over the set (its files come one kind after the other)
            items = items[:: max(1, len(items) // limit)][:limit]
        t = time.perf_counter()
        decided = [decide(it) for it in items]
        got = figures(items, [s for s, _ in decided], [a for _, a in decided])
        got["seconds"] = round(time.perf_counter() - t, 1)
        sets[name] = got
        print(
            f"{name:12} {got['questions']:>5} {got['question_auc']:>6} {got['accuracy']:>6} "
            f"{got['answerable_answered']:>9} {got['unanswerable_refused']:>8}",
            flush=True,
        )
    result["sets"] = sets
    if args.reader == "on":
        result |= cost(reader)
        result["rss_mb_after_reading"] = round(rss_mb() - before, 1)
        print(json.dumps({k: v for k, v in result.items() if k.startswith(("read_", "rss_"))}))
    result["load"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    name = "reader-eval" if args.reader == "on" else "reader-eval-off"
    (results_dir() / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (results_dir() / f"{name}.md").write_text(table(result), encoding="utf-8")
    return 0


def table(result: dict[str, object]) -> str:
    """The figures as a Markdown table (bench/results/reader-eval.md)."""
    lines = [
        f"Reader {result['reader']}"
        + (f", threshold {result.get('threshold')}" if result["reader"] == "on" else "")
        + f" (load {result['load']})",
        "",
        "| set | questions | question AUC | accuracy | answerable answered | unanswerable refused |",
        "|---|---|---|---|---|---|",
    ]
    for name, got in dict(result["sets"]).items():  # type: ignore[call-overload]
        lines.append(
            f"| {name} | {got['questions']} | {got['question_auc']} | {got['accuracy']} "
            f"| {got['answerable_answered']} | {got['unanswerable_refused']} |"
        )
    return "\n".join(lines) + "\n"


def _knobs() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(("READER_", "EMBEDDER_", "MIN_SIMILARITY"))}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
