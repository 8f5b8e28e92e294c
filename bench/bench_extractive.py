"""Extractive answerer quality on SQuAD 2.0 dev (answerable questions; read from
``RAGCHAT_BENCH_DATA`` or ``../shared/bench-data``).

Retrieval is taken out of the picture: each question gets three "hits", its own paragraph first
and the next two paragraphs of the same article as distractors (the answerer sees what a top-3
search would give when retrieval is right). Recorded: how often a gold answer string appears in
the answer (with the default 3 sentences and with 1), the answer length, and the time per answer.

By meaning (the local default, ``EXTRACTIVE_SENTENCES=meaning``): the same questions with MiniLM
similarities (question vs each sentence, embedded once and cached), at several values of
``RELATIVE_MARGIN`` (how far below the best sentence's score a sentence may be and still be quoted):
the completeness / length trade-off the default was chosen on (0.15: as complete as three BM25
sentences, a quarter shorter). Skipped when the model is not prepared.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from typing import Any

from benchdata import bench_data_dir, models_path, results_dir, smoke, smoke_sample
from ragchat.domain.extractive import extractive_answer
from ragchat.domain.models import Hit

RESULTS = results_dir()
DATA = bench_data_dir() / "squad2-dev.json"


def _cases() -> list[tuple[str, list[Hit], list[str]]]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    cases = []
    for article in data["data"]:
        paragraphs = article["paragraphs"]
        for i, para in enumerate(paragraphs):
            others = [paragraphs[(i + j) % len(paragraphs)]["context"] for j in (1, 2)]
            texts = [para["context"], *others]
            hits = [Hit(id=f"p{i}-{j}", score=0.9 - 0.05 * j, text=t) for j, t in enumerate(texts)]
            for qa in para["qas"]:
                if not qa["is_impossible"]:
                    cases.append((qa["question"], hits, [a["text"] for a in qa["answers"]]))
    return cases


MARGINS = (0.05, 0.10, 0.15, 0.20)


def _relevances(cases: list[tuple[str, list[Hit], list[str]]]) -> list[Any] | None:
    """For each case, a ``relevance`` callable over MiniLM vectors (``None``: no prepared model)."""
    try:
        from bench_scifact import embed_cached
        from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder
        from ragchat.domain.extractive import relevance_texts

        embedder = OnnxMiniLMEmbedder.from_cache(models_path())
    except Exception as exc:  # no model: the BM25 rows only
        if smoke():  # a smoke run proves the benchmark finds the model where the product does
            raise
        print(f"by meaning skipped: {exc}", flush=True)
        return None
    texts = sorted({t for _, hits, _ in cases for h in hits for t in relevance_texts(h.text)})
    vectors = embed_cached(embedder, texts, "squad-relevance")
    row = {t: i for i, t in enumerate(texts)}
    questions = embed_cached(embedder, [q for q, _, _ in cases], "squad-extractive-questions")

    def relevance(k: int) -> Any:
        return lambda ts: (vectors[[row[t] for t in ts]] @ questions[k]).tolist()

    return [relevance(k) for k in range(len(cases))]


def _run(
    cases: list[tuple[str, list[Hit], list[str]]],
    max_sentences: int,
    relevances: list[Any] | None = None,
    margin: float | None = None,
) -> dict[str, Any]:
    from ragchat.domain import extractive

    found = 0
    lengths = []
    saved = extractive.RELATIVE_MARGIN
    if margin is not None:
        extractive.RELATIVE_MARGIN = margin
    started = time.perf_counter()
    for k, (question, hits, answers) in enumerate(cases):
        relevance = relevances[k] if relevances is not None else None
        answer = extractive_answer(question, hits, max_sentences=max_sentences, relevance=relevance)
        body = answer.rpartition("\n\nSources:")[0] or answer
        lengths.append(len(body))
        found += any(a in body for a in answers)
    elapsed = time.perf_counter() - started
    extractive.RELATIVE_MARGIN = saved
    return {
        "sentences": "words (BM25)" if relevances is None else f"meaning, margin {margin:.2f}",
        "max_sentences": max_sentences,
        "questions": len(cases),
        "answer_contained": found / len(cases),
        "mean_answer_chars": statistics.fmean(lengths),
        "ms_per_answer": elapsed / len(cases) * 1000,
    }


def main() -> None:
    RESULTS.mkdir(exist_ok=True)
    cases = smoke_sample(_cases(), 12)  # a smoke run: tiny data, the figures mean nothing
    rows = [_run(cases, 3), _run(cases, 1)]
    relevances = _relevances(cases)
    if relevances is not None:
        rows += [_run(cases, 3, relevances, margin) for margin in MARGINS]
    result = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
        },
        "setup": "own paragraph + 2 distractor paragraphs of the same article as top-3 hits",
        "runs": rows,
    }
    (RESULTS / "extractive.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "### Extractive answerer (SQuAD 2.0 dev, answerable questions, right paragraph + 2 distractors)",
        "",
        "| sentences chosen by | max sentences | questions | gold answer in reply | mean reply chars | "
        "ms / answer |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['sentences']} | {r['max_sentences']} | {r['questions']} | {r['answer_contained']:.1%} | "
            f"{r['mean_answer_chars']:.0f} | {r['ms_per_answer']:.2f} |"
        )
    (RESULTS / "extractive.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
