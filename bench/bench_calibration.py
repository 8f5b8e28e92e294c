"""Calibrate MIN_SIMILARITY for all-MiniLM-L6-v2 on SQuAD 2.0 dev (read at run time from
``RAGCHAT_BENCH_DATA`` or ``../shared/bench-data``).

Two folds: the paragraphs of half the articles (even positions, then odd) are the knowledge base,
searched by exact cosine with numpy; each paragraph is embedded as ingestion embeds a chunk (with
``CHUNK_HEADERS``: the article's title, a newline, the paragraph). For every question we record
the top-1 similarity:
*in-KB* = answerable questions about the indexed articles (should be answered), *out-of-KB* = all
questions about the other articles (should be refused). The chosen threshold maximises the
balanced accuracy ((in-KB answered + out-of-KB refused) / 2) averaged over both folds, on a 0.01
grid. Unanswerable questions about indexed articles are on-topic: a similarity threshold cannot
refuse them, so they are reported but not used for tuning. Needs ``make model``.

Usage: ``python bench/bench_calibration.py``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from bench_scifact import embed_cached
from benchdata import bench_data_dir, models_path, results_dir, smoke, smoke_sample

ROOT = Path(__file__).resolve().parent.parent
RESULTS = results_dir()
DATA = bench_data_dir() / "squad2-dev.json"
COMPARE = (0.35, 0.40, 0.65)  # the previous placeholder, the default, the seeds' (768-d BGE)


def _pct(values: Any) -> dict[str, float]:
    import numpy as np

    return {f"p{p}": round(float(np.percentile(values, p)), 3) for p in (5, 25, 50, 75, 95)} | {
        "mean": round(float(np.mean(values)), 3)
    }


def passage_table(
    embedder: Any, paragraphs: list[str], titles: list[str]
) -> tuple[Any, list[list[int]], list[list[set[str]]]]:
    """Every paragraph's two-sentence passages prefixed with its article's title, as the retriever
    prefixes a passage with its document's title (embedded once, cached), and its sentences' words."""
    from ragchat.domain.answerability import content_words, evidence_passages
    from ragchat.domain.extractive import split_sentences

    texts: list[str] = []
    owned: list[list[int]] = []
    words: list[list[set[str]]] = []
    for para, title in zip(paragraphs, titles, strict=True):
        passages = evidence_passages([para], limit=10_000, titles=[title])
        owned.append(list(range(len(texts), len(texts) + len(passages))))
        texts.extend(passages)
        words.append([content_words(s) for s in split_sentences(para)])
    return embed_cached(embedder, texts, "squad-passages"), owned, words


def fold_signals(
    questions: list[str],
    q_vecs: Any,
    scores: Any,
    kb_index: Any,
    table: tuple[Any, list[list[int]], list[list[set[str]]]],
) -> list[Any]:
    """Every question's answerability ``Signals`` against one fold's KB (its top 3 paragraphs as the
    top chunks; keyword ``coverage`` is not computed here and stays 0)."""
    import numpy as np
    from ragchat.domain.answerability import MAX_PASSAGES, Signals, content_words

    p_vecs, owned, words = table
    top3 = np.argsort(-scores, axis=1)[:, :3]
    out = []
    for i, question in enumerate(questions):
        paras = kb_index[top3[i]]
        sims = scores[i, top3[i]]
        rows = [r for p in paras for r in owned[p]][:MAX_PASSAGES]
        passage = float((p_vecs[rows] @ q_vecs[i]).max()) if rows else None
        asked = content_words(question)
        cover = (
            max((len(asked & w) / len(asked) for p in paras for w in words[p]), default=0.0) if asked else 0.0
        )
        out.append(Signals(float(sims[0]), passage, 0.0, cover, float(sims[0] - sims[1:].mean())))
    return out


def decision_answers(
    questions: list[str],
    q_vecs: Any,
    scores: Any,
    kb_index: Any,
    table: tuple[Any, list[list[int]], list[list[set[str]]]],
) -> Any:
    """The calibrated decision (default MIN_SIMILARITY) for every question against one fold's KB."""
    import numpy as np
    from ragchat.config import DEFAULT_MIN_SIMILARITY
    from ragchat.domain.answerability import CALIBRATED, decide

    model = "all-MiniLM-L6-v2"
    signals = fold_signals(questions, q_vecs, scores, kb_index, table)
    return np.array([decide(s, DEFAULT_MIN_SIMILARITY[model], CALIBRATED[model]).answer for s in signals])


def fold_figures(
    parity: int,
    n_articles: int,
    labels: tuple[Any, Any, Any, Any],
    p_vecs: Any,
    q_vecs: Any,
    questions: list[str],
    table: Any,
    grid: Any,
) -> dict[str, Any]:
    """One fold: the articles at even (``parity`` 0) or odd positions are the knowledge base.
    ``labels``: each paragraph's article, each question's article, paragraph and answerability."""
    import numpy as np

    pa, qa_art, qp, ans = labels
    kb_articles = [a for a in range(n_articles) if a % 2 == parity]
    kb_index = np.flatnonzero(np.isin(pa, kb_articles))
    scores = q_vecs @ p_vecs[kb_index].T
    top1 = scores.max(axis=1)
    in_kb_q = np.isin(qa_art, kb_articles)
    in_kb = top1[in_kb_q & ans]
    in_kb_unanswerable = top1[in_kb_q & ~ans]
    out_kb = top1[~in_kb_q]
    # does the best hit come from the question's own paragraph? (answerable in-KB questions)
    order = np.argsort(-scores[in_kb_q & ans], axis=1)[:, :3]
    gold = qp[in_kb_q & ans]
    decided = decision_answers(questions, q_vecs, scores, kb_index, table)
    answered = (in_kb[:, None] >= grid[None, :]).mean(axis=0)
    refused = (out_kb[:, None] < grid[None, :]).mean(axis=0)
    return {
        "kb_articles": len(kb_articles),
        "kb_paragraphs": len(kb_index),
        "in_kb_questions": len(in_kb),
        "out_of_kb_questions": len(out_kb),
        "in_kb_unanswerable_questions": len(in_kb_unanswerable),
        "gold_paragraph_top1": round(float(np.mean(kb_index[order[:, 0]] == gold)), 4),
        "gold_paragraph_top3": round(float(np.mean((kb_index[order] == gold[:, None]).any(axis=1))), 4),
        "in_kb_top1": _pct(in_kb),
        "out_of_kb_top1": _pct(out_kb),
        "in_kb_unanswerable_top1": _pct(in_kb_unanswerable),
        "_in": in_kb,
        "_out": out_kb,
        "_unans": in_kb_unanswerable,
        "_balanced": (answered + refused) / 2,
        "decision": {
            "in_kb_answered": round(float(decided[in_kb_q & ans].mean()), 4),
            "out_of_kb_refused": round(float((~decided[~in_kb_q]).mean()), 4),
            "in_kb_unanswerable_answered": round(float(decided[in_kb_q & ~ans].mean()), 4),
        },
    }


def squad_articles() -> list[Any]:
    """SQuAD's articles; a smoke run's: two (one per fold), a few paragraphs and questions each."""
    articles: list[Any] = json.loads(DATA.read_text(encoding="utf-8"))["data"]
    if smoke():  # tiny data: the figures mean nothing
        articles = [
            {**a, "paragraphs": [{**p, "qas": p["qas"][:4]} for p in a["paragraphs"][:3]]}
            for a in smoke_sample(articles, 2)
        ]
    return articles


def squad_signals() -> list[tuple[list[dict[str, Any]], Any]]:
    """For each fold (even / odd articles indexed): every question's answerability signals
    (:func:`fold_signals`) and its class: ``in`` (answerable, in the KB), ``out`` (about an article
    not indexed) or ``unans`` (unanswerable, in the KB). Used by ``bench_grounding.py --select`` to
    keep SQuAD's balanced accuracy while choosing signals."""
    import dataclasses

    import numpy as np
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

    articles = squad_articles()
    paragraphs, para_article, questions, q_article, _, q_answerable = load_squad(articles)
    embedder = OnnxMiniLMEmbedder.from_cache(models_path())
    p_vecs = embed_cached(embedder, indexed_texts(articles, paragraphs, para_article), "squad-paragraphs")
    q_vecs = embed_cached(embedder, questions, "squad-questions")
    table = passage_table(embedder, paragraphs, [articles[a]["title"] for a in para_article])
    pa, qa, ans = np.asarray(para_article), np.asarray(q_article), np.asarray(q_answerable)
    folds = []
    for parity in (0, 1):
        kb = np.flatnonzero(np.isin(pa, [a for a in range(len(articles)) if a % 2 == parity]))
        signals = fold_signals(questions, q_vecs, q_vecs @ p_vecs[kb].T, kb, table)
        in_kb = np.isin(qa, pa[kb])
        classes = np.where(in_kb & ans, "in", np.where(~in_kb, "out", "unans"))
        folds.append(([dataclasses.asdict(x) for x in signals], classes))
    return folds


SquadLists = tuple[list[str], list[int], list[str], list[int], list[int], list[bool]]


def load_squad(articles: list[Any]) -> SquadLists:
    """Paragraphs with their article; questions with their article, paragraph and answerability."""
    paragraphs: list[str] = []
    para_article: list[int] = []
    questions: list[str] = []
    q_article: list[int] = []
    q_para: list[int] = []
    q_answerable: list[bool] = []
    for a, article in enumerate(articles):
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                questions.append(qa["question"])
                q_article.append(a)
                q_para.append(len(paragraphs))
                q_answerable.append(not qa["is_impossible"])
            paragraphs.append(para["context"])
            para_article.append(a)
    return paragraphs, para_article, questions, q_article, q_para, q_answerable


def indexed_texts(articles: list[Any], paragraphs: list[str], para_article: list[int]) -> list[str]:
    """What ingestion embeds for each paragraph: with ``CHUNK_HEADERS`` (the default) the article's
    title as the contextual header, then the paragraph (``ragchat.domain.context``)."""
    from ragchat.config import Settings
    from ragchat.domain.context import chunk_header, embedding_text

    if not Settings().chunk_headers:
        return paragraphs
    return [
        embedding_text(chunk_header(articles[a]["title"], text=p), p)
        for p, a in zip(paragraphs, para_article, strict=True)
    ]


def rates(folds: list[dict[str, Any]], t: float) -> dict[str, float]:
    """Refusal and answer rates of the threshold ``t`` pooled over the folds."""
    import numpy as np

    in_all = np.concatenate([f["_in"] for f in folds])
    out_all = np.concatenate([f["_out"] for f in folds])
    unans = np.concatenate([f["_unans"] for f in folds])
    in_refused = float(np.mean(in_all < t))
    out_answered = float(np.mean(out_all >= t))
    return {
        "threshold": t,
        "in_kb_refused": round(in_refused, 4),
        "out_of_kb_answered": round(out_answered, 4),
        "balanced_accuracy": round(1 - (in_refused + out_answered) / 2, 4),
        "in_kb_unanswerable_answered": round(float(np.mean(unans >= t)), 4),
    }


def main() -> None:
    import numpy as np
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

    RESULTS.mkdir(exist_ok=True)
    articles = squad_articles()
    paragraphs, para_article, questions, q_article, q_para, q_answerable = load_squad(articles)

    embedder = OnnxMiniLMEmbedder.from_cache(models_path())
    started = time.perf_counter()
    p_vecs = embed_cached(embedder, indexed_texts(articles, paragraphs, para_article), "squad-paragraphs")
    q_vecs = embed_cached(embedder, questions, "squad-questions")
    embed_s = time.perf_counter() - started

    pa, qa_art = np.asarray(para_article), np.asarray(q_article)
    qp, ans = np.asarray(q_para), np.asarray(q_answerable)
    grid = np.round(np.arange(0.0, 1.0001, 0.01), 2)
    table = passage_table(embedder, paragraphs, [articles[a]["title"] for a in para_article])
    folds = [
        fold_figures(parity, len(articles), (pa, qa_art, qp, ans), p_vecs, q_vecs, questions, table, grid)
        for parity in (0, 1)
    ]

    mean_balanced = np.mean([f["_balanced"] for f in folds], axis=0)
    best = float(grid[int(np.argmax(mean_balanced))])

    at = [rates(folds, best), *(rates(folds, t) for t in COMPARE if t != best)]
    decided = {
        key: round(float(np.mean([f["decision"][key] for f in folds])), 4)
        for key in ("in_kb_answered", "out_of_kb_refused", "in_kb_unanswerable_answered")
    }
    decided["balanced_accuracy"] = round((decided["in_kb_answered"] + decided["out_of_kb_refused"]) / 2, 4)
    for f in folds:
        for key in ("_in", "_out", "_unans", "_balanced"):
            f.pop(key)
    result = {
        "model_id": embedder.model_id,
        "data": "SQuAD 2.0 dev (first half: 16 articles, 646 paragraphs, 6,078 questions)",
        "method": "2 folds (even/odd articles as KB); threshold maximising mean balanced accuracy, grid 0.01",
        "chosen_threshold": best,
        "at": at,
        "calibrated_decision": decided,
        "folds": folds,
        "embed_seconds": round(embed_s, 1),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
        },
    }
    (RESULTS / "calibration.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    write_md(result)


def write_md(result: dict[str, Any]) -> None:
    (f0, f1), at, best = result["folds"], result["at"], result["chosen_threshold"]
    decided = result["calibrated_decision"]
    lines = [
        "### MIN_SIMILARITY calibration: all-MiniLM-L6-v2 on SQuAD 2.0 dev",
        "",
        "Top-1 cosine similarity of a question against the indexed paragraphs of half the articles "
        "(two folds: even / odd articles indexed). In-KB = answerable questions about the indexed "
        "articles; out-of-KB = every question about the other articles. Paragraphs are embedded as "
        "ingestion embeds a chunk: the article's title as contextual header, then the text "
        "(`CHUNK_HEADERS`, the default).",
        "",
        "| top-1 similarity | p5 | p25 | median | p75 | p95 |",
        "|---|---|---|---|---|---|",
    ]
    for label, key in (
        ("in-KB (answerable)", "in_kb_top1"),
        ("out-of-KB", "out_of_kb_top1"),
        ("in-KB unanswerable (on-topic)", "in_kb_unanswerable_top1"),
    ):
        d = f0[key]
        e = f1[key]
        lines.append(
            f"| {label} | {d['p5']} / {e['p5']} | {d['p25']} / {e['p25']} | {d['p50']} / {e['p50']} "
            f"| {d['p75']} / {e['p75']} | {d['p95']} / {e['p95']} |"
        )
    lines += [
        "",
        "(fold 1 / fold 2)",
        "",
        "| MIN_SIMILARITY | in-KB refused | out-of-KB answered | balanced accuracy "
        "| in-KB unanswerable answered |",
        "|---|---|---|---|---|",
    ]
    for r in at:
        mark = " (chosen)" if r["threshold"] == best else ""
        lines.append(
            f"| {r['threshold']:.2f}{mark} | {r['in_kb_refused']:.1%} | {r['out_of_kb_answered']:.1%} "
            f"| {r['balanced_accuracy']:.1%} | {r['in_kb_unanswerable_answered']:.1%} |"
        )
    lines.append(
        "| calibrated decision (default; ragchat.domain.answerability) "
        f"| {1 - decided['in_kb_answered']:.1%} "
        f"| {1 - decided['out_of_kb_refused']:.1%} | {decided['balanced_accuracy']:.1%} "
        f"| {decided['in_kb_unanswerable_answered']:.1%} |"
    )
    chosen, seeds = at[0], next(r for r in at if r["threshold"] == 0.65)
    lines += [
        "",
        f"Chosen default for all-MiniLM-L6-v2: **{best:.2f}** (maximum balanced accuracy averaged over "
        f"both folds): {chosen['in_kb_refused']:.1%} of answerable in-KB questions would be refused and "
        f"{chosen['out_of_kb_answered']:.1%} of out-of-KB questions answered. The seeds' 0.65 was set for a "
        f"768-d BGE model; on MiniLM's lower cosine scale it refuses {seeds['in_kb_refused']:.1%} of the "
        "questions the knowledge base can answer. Unanswerable questions about indexed articles are "
        "on-topic and score almost like answerable ones (see the last row of the first table): no "
        "threshold refuses them without refusing good questions. "
        f"The gold paragraph is the top-1 hit for {f0['gold_paragraph_top1']:.1%} / "
        f"{f1['gold_paragraph_top1']:.1%} of in-KB questions, and in the top 3 for "
        f"{f0['gold_paragraph_top3']:.1%} / {f1['gold_paragraph_top3']:.1%}.",
    ]
    (RESULTS / "calibration.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
