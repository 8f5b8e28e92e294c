"""Grounding on the project's own set (``bench/grounding/``, see ``grounding_set.py``): are answerable
questions answered from the right document, and are off-topic and near-topic questions refused?

The 20 documents are ingested through the real pipeline (a throwaway local data directory, the
configured embedder — MiniLM by default, ``RAGCHAT_EMBEDDER=titan|cohere`` with AWS credentials for
Bedrock — and the extractive answerer). Then:

1. *Signals*: every question goes through the retriever once with passage embedding switched on,
   recording the answerability signals (``ragchat.domain.answerability``).
2. *Fit*: a class-balanced, L2-regularised logistic regression on the **dev** split only, and the
   highest probability cutoff that still answers ≥ 93 % of dev's answerable questions and refuses
   every off-topic one; with ``--fit``/``--select`` (MiniLM) the cutoff is then raised until dev's
   near-topic refusals reach half and SQuAD 2.0's balanced accuracy (``bench_calibration.py``'s
   folds) is not below the top-1 rule's 92.2 %. ``--select`` does this for every set of one to
   three signals and keeps the one answering the most dev questions. The coefficients are printed
   as a ``Coefficients(...)`` literal to paste into ``CALIBRATED`` for the embedder's model id
   (``--fit`` and ``--select`` write nothing else); the evaluation below uses the coefficients in
   code, or the fresh fit when the model has none yet.
3. *Answers*: every question is asked through ``AskService`` (``GET /?text=``'s path) with the
   seeds' rule (top-1 ≥ MIN_SIMILARITY) and with the calibrated decision, in ``vector`` and
   ``hybrid`` retrieval modes. *Answered right* = not refused and the right document among the cited
   sources; *citation precision* = cited sources from the right document / all cited sources
   (answered answerable questions).

``--precision fp32|int8`` picks the local MiniLM's weights (default: ``EMBEDDER_PRECISION``); a run with
the other precision than the default writes only ``grounding-<precision>.json``.

``--reader on`` (or ``READER=on``; the model: ``RAGCHAT_MODEL_DIR``'s ``ragchat-reader/``, else the
package's): the extractive reader decides (docs/reader.md). Every question's best margin (best span
− no answer) is recorded; a sweep of thresholds on the **dev** split is printed (the operating point
is calibrated there: ``READER_THRESHOLDS`` in ``ragchat/domain/answerability.py``), and the questions
are answered in both retrieval modes at the operating point (``READER_THRESHOLD``, else the model's).
Writes only bench/results/grounding-reader.json.

Usage: ``python bench/bench_grounding.py [--fit | --select] [--precision fp32|int8] [--reader on|off]``.
Writes bench/results/grounding.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchdata import models_path, results_dir, smoke
from grounding_set import Question, documents, questions, smoke_questions

ROOT = Path(__file__).resolve().parent.parent
RESULTS = results_dir()
OWNER = "bench"
# Chosen by ``--select``: each set of signals fitted on dev with its SQuAD-checked cutoff; the set
# answering the most dev answerable questions with every off-topic and ≥ half the near-topic ones
# refused.
FEATURES = ("passage", "sentence_coverage")
# ``coverage`` is left out: bench_calibration.py does not compute it for SQuAD (every paragraph is its
# own chunk there), so a set using it could not be checked against SQuAD.
SIGNALS = ["top", "passage", "sentence_coverage", "margin"]
THRESHOLD = 0.40  # MIN_SIMILARITY the model is fitted at: all-MiniLM-L6-v2's default
L2 = 0.1
CUTOFFS = [round(0.1 + 0.01 * i, 2) for i in range(81)]  # 0.10 … 0.90
# Dev answerable questions to answer at the cutoff: above the 0.90 goal because "answered right" also
# needs the right document cited, and a cutoff fitted on dev answers a little less on unseen questions.
GOAL_ANSWERED = 0.93


def build(tmp: str, precision: str | None = None, wanted: set[str] | None = None) -> Any:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    models = str(models_path())
    passed = (
        "RAGCHAT_",
        "AWS_",
        "COHERE_",
        "TITAN_",
        "CHUNK_",
        "EVIDENCE_",
        "PRECOMPUTE_",
        "EMBEDDER_",
        "EXTRACTIVE_",
        "READER",
    )
    env = {k: v for k, v in os.environ.items() if k.startswith(passed)}
    env |= {"RAGCHAT_DATA_DIR": tmp, "RAGCHAT_MODEL_DIR": models, "RAGCHAT_CHAT_MODEL": "extractive"}
    if precision:
        env["EMBEDDER_PRECISION"] = precision
    container = Container(load_settings(env))
    names: dict[str, str] = {}
    for name, data in documents().items():
        if wanted is not None and name not in wanted:
            continue
        doc = container.ingestion.submit_file(OWNER, data=data, filename=name)
        names[doc.id] = name
    container.launcher.wait_idle(600)
    wait_warm = getattr(container.launcher, "wait_warm", None)
    if wait_warm is not None:  # evidence vectors precomputed, as a serving instance has them
        wait_warm(600)
    return container, names


def fit(x: Any, y: Any) -> tuple[float, list[float]]:
    """Class-balanced logistic regression with an L2 penalty on the weights (Newton's method)."""
    import numpy as np

    xb = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(xb.shape[1])
    sample = np.where(y == 1, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum())))
    penalty = np.eye(xb.shape[1]) * L2
    penalty[0, 0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-(xb @ w)))
        grad = xb.T @ (sample * (p - y)) + penalty @ w
        hess = (xb * (sample * p * (1 - p))[:, None]).T @ xb + penalty
        w -= np.linalg.solve(hess, grad)
    return float(w[0]), [float(v) for v in w[1:]]


def choose_cutoff(p: Any, kinds: list[str]) -> float:
    """The highest cutoff at which ≥ GOAL_ANSWERED of the answerable questions are answered and every
    off-topic question is refused (dev split); 0.5 when none qualifies."""
    import numpy as np

    k = np.asarray(kinds)
    for cut in sorted(CUTOFFS, reverse=True):
        if (p[k == "answerable"] >= cut).mean() >= GOAL_ANSWERED and (p[k == "off_topic"] < cut).all():
            return cut
    return 0.5


def feature_matrix(signals: list[dict[str, Any]], names: tuple[str, ...], threshold: float) -> Any:
    import numpy as np
    from ragchat.domain import answerability

    feats = [answerability.features(answerability.Signals(**s), threshold) for s in signals]
    return np.array([[f[n] for n in names] for f in feats])


SQUAD_FLOOR = 0.922  # SQuAD 2.0 balanced accuracy of the seeds' top-1 rule: the decision must not fall below
NEAR_FLOOR = 0.5  # near-topic questions refused on dev, at least (the goal)


def squad_accuracy(
    names: tuple[str, ...], intercept: float, weights: list[float], cut: float, squad: Any
) -> float:
    """SQuAD 2.0's balanced accuracy (in-KB answerable answered, out-of-KB refused; mean of the two
    folds) of the logistic model at ``cut``."""
    import numpy as np

    accuracies = []
    for signals, classes in squad:
        p = 1 / (1 + np.exp(-(intercept + feature_matrix(signals, names, THRESHOLD) @ np.asarray(weights))))
        accuracies.append(((p[classes == "in"] >= cut).mean() + (p[classes == "out"] < cut).mean()) / 2)
    return float(np.mean(accuracies))


def fit_coefficients(
    qs: list[Question],
    signals: list[dict[str, Any]],
    names: tuple[str, ...] = FEATURES,
    squad: Any = None,
) -> Any:
    """Fit ``names`` on the dev split and pick the cutoff (``Coefficients``): the highest answering
    ≥ GOAL_ANSWERED of dev's answerable questions and refusing every off-topic one; with ``squad``
    (:func:`bench_calibration.squad_signals`) then raised until SQuAD's balanced accuracy is at least
    SQUAD_FLOOR and dev's near-topic refusals at least NEAR_FLOOR."""
    import numpy as np
    from ragchat.domain import answerability

    x = feature_matrix(signals, names, THRESHOLD)
    y = np.array([q.kind == "answerable" for q in qs], dtype=float)
    dev = np.array([q.split == "dev" for q in qs])
    intercept, weights = fit(x[dev], y[dev])
    p_dev = 1 / (1 + np.exp(-(intercept + x[dev] @ np.asarray(weights))))
    kinds = np.array([q.kind for q in qs if q.split == "dev"])
    cutoff = choose_cutoff(p_dev, list(kinds))
    if squad is not None:
        for cut in (c for c in CUTOFFS if c >= cutoff):
            cutoff = cut
            near = (p_dev[kinds == "near_topic"] < cut).mean()
            squad_ok = squad is None or squad_accuracy(names, intercept, weights, cut, squad) >= SQUAD_FLOOR
            if near >= NEAR_FLOOR and squad_ok:
                break
    return answerability.Coefficients(
        THRESHOLD, round(intercept, 3), {n: round(w, 3) for n, w in zip(names, weights, strict=True)}, cutoff
    )


def select_features(qs: list[Question], signals: list[dict[str, Any]], squad: Any) -> tuple[str, ...]:
    """Every set of one to three signals fitted on dev with the SQuAD-checked cutoff; prints the
    table and returns the set answering the most dev answerable questions (ties: more near-topic
    ones refused, then fewer signals)."""
    import itertools

    rows = []
    for size in (1, 2, 3):
        for names in itertools.combinations(SIGNALS, size):
            c = fit_coefficients(qs, signals, names, squad)
            rates = score_probabilities(qs, signals, c)
            weights = list(c.weights.values())
            ba = squad_accuracy(names, c.intercept, weights, c.cutoff, squad) if squad else float("nan")
            rows.append((rates, names))
            print(
                f"{' + '.join(names):38} cutoff {c.cutoff:.2f}  dev answered {rates['answerable']:.3f}  "
                f"near-topic refused {rates['near_topic']:.3f}  off-topic refused {rates['off_topic']:.3f}  "
                f"SQuAD {ba:.3f}",
                flush=True,
            )
    ok = [(r, n) for r, n in rows if r["off_topic"] == 1.0 and r["near_topic"] >= NEAR_FLOOR] or rows
    best = max(ok, key=lambda r: (r[0]["answerable"], r[0]["near_topic"], -len(r[1])))
    print(f"selected: {best[1]}", flush=True)
    return best[1]


def score_probabilities(qs: list[Question], signals: list[dict[str, Any]], c: Any) -> dict[str, float]:
    """Dev's answered (answerable) and refused (near-, off-topic) shares under coefficients ``c``."""
    from ragchat.domain import answerability

    out: dict[str, float] = {}
    for kind in ("answerable", "near_topic", "off_topic"):
        picked = [s for q, s in zip(qs, signals, strict=True) if q.split == "dev" and q.kind == kind]
        answered = [
            answerability.probability(answerability.Signals(**s), c, THRESHOLD) >= c.cutoff for s in picked
        ]
        share = sum(answered) / len(picked)
        out[kind] = share if kind == "answerable" else 1 - share
    return out


def record_signals(container: Any, qs: list[Question]) -> list[dict[str, Any]]:
    """The decision's signals for every question (sentences embedded whatever the coefficients)."""
    from ragchat.domain import answerability
    from ragchat.domain.models import SearchFilter

    model_id = container.embedder.model_id
    saved = answerability.CALIBRATED.get(model_id)
    answerability.CALIBRATED[model_id] = answerability.Coefficients(0.0, 0.0, {})
    try:
        rows = []
        for q in qs:
            r = container.retriever.retrieve(q.question, SearchFilter(owner=OWNER))
            rows.append(asdict(r.decision.signals) if r.decision else {})
        return rows
    finally:
        if saved is None:
            answerability.CALIBRATED.pop(model_id)
        else:
            answerability.CALIBRATED[model_id] = saved


def ask_all(container: Any, names: dict[str, str], qs: list[Question], mode: str) -> list[dict[str, Any]]:
    """Every question through ``AskService`` in retrieval ``mode`` (with the reader when it is on)."""
    from ragchat.services.answering import Answerer, AskService
    from ragchat.services.model_calls import ModelCaller
    from ragchat.services.retrieval import Retriever

    settings = container.settings.model_copy(update={"retrieval_mode": mode})
    retriever = Retriever(
        container.embedder,
        container.index,
        settings,
        titles=container.retriever.titles,
        answer_titles=container.retriever.answer_titles,
        reader=container.reader,
        reader_threshold=container.reader_threshold(),
    )
    ask = AskService(retriever, Answerer(ModelCaller(container.chat_model), settings), settings)
    rows = []
    for q in qs:
        result = ask.ask(OWNER, q.question)
        notes = container.documents.get_notes(OWNER, [s.id for s in result.sources])
        cited = [names.get(n.document_id or "", "?") for n in notes]
        rows.append({"refused": result.guard_used, "cited": cited, "answer": result.answer})
    return rows


def score(qs: list[Question], rows: list[dict[str, Any]], split: str) -> dict[str, Any]:
    def rate(kind: str, ok: Any) -> tuple[int, int]:
        picked = [(q, r) for q, r in zip(qs, rows, strict=True) if q.kind == kind and q.split == split]
        return sum(1 for q, r in picked if ok(q, r)), len(picked)

    right = rate("answerable", lambda q, r: not r["refused"] and q.document in r["cited"])
    off = rate("off_topic", lambda q, r: r["refused"])
    near = rate("near_topic", lambda q, r: r["refused"])
    cited = [
        (q.document, r["cited"])
        for q, r in zip(qs, rows, strict=True)
        if q.kind == "answerable" and q.split == split and not r["refused"]
    ]
    total = sum(len(c) for _, c in cited)
    precision = sum(c.count(d) for d, c in cited) / total if total else 0.0
    return {
        "answered_right": right,
        "off_topic_refused": off,
        "near_topic_refused": near,
        "citation_precision": round(precision, 3),
    }


def run_modes(container: Any, names: dict[str, str], qs: list[Question], coefficients: Any) -> dict[str, Any]:
    """Every question asked with the seeds' rule and with ``coefficients``, in both retrieval modes."""
    from ragchat.domain import answerability

    model_id = container.embedder.model_id
    saved = answerability.CALIBRATED.pop(model_id, None)
    runs: dict[str, Any] = {}
    try:
        for mode in ("vector", "hybrid"):
            answerability.CALIBRATED.pop(model_id, None)
            seeds = ask_all(container, names, qs, mode)
            answerability.CALIBRATED[model_id] = coefficients
            calibrated = ask_all(container, names, qs, mode)
            for label, rows in (("seeds", seeds), ("calibrated", calibrated)):
                run: dict[str, Any] = {s: score(qs, rows, s) for s in ("dev", "test")}
                run["answers"] = [
                    {"question": q.question, "kind": q.kind, "split": q.split, **r}
                    for q, r in zip(qs, rows, strict=True)
                ]
                runs[f"{mode}/{label}"] = run
    finally:
        answerability.CALIBRATED.pop(model_id, None)
        if saved is not None:
            answerability.CALIBRATED[model_id] = saved
    return runs


def reader_margins(container: Any, qs: list[Question]) -> list[float | None]:
    """The reader's best margin (best span − no answer) over each question's retrieved notes
    (``None``: no span at all)."""
    from ragchat.domain.models import SearchFilter

    out: list[float | None] = []
    for q in qs:
        r = container.retriever.retrieve(q.question, SearchFilter(owner=OWNER))
        out.append(None if r.found is None else round(r.found.margin, 4))
    return out


def sweep(qs: list[Question], margins: list[float | None], split: str = "dev") -> list[dict[str, float]]:
    """Each threshold's shares on ``split``: answerable answered, near- and off-topic refused (the
    decision only: whether the right document is cited is the runs' measure)."""
    found = sorted({m for m in margins if m is not None})
    rows = []
    for t in sorted({-2.0, 0.0, *found[:: max(1, len(found) // 60)]}):
        row: dict[str, float] = {"threshold": t}
        for kind in ("answerable", "near_topic", "off_topic"):
            picked = [m for q, m in zip(qs, margins, strict=True) if q.split == split and q.kind == kind]
            answered = sum(m is not None and m >= t for m in picked) / max(1, len(picked))
            row[kind] = round(answered if kind == "answerable" else 1 - answered, 3)
        rows.append(row)
    return rows


def suggested(rows: list[dict[str, float]]) -> float:
    """The dev threshold with every off-topic question refused that answers the most answerable and
    refuses the most near-topic questions (sum of the shares; ties: the lower threshold)."""
    ok = [r for r in rows if r["off_topic"] == 1.0] or rows
    return max(ok, key=lambda r: (r["answerable"] + r["near_topic"], -r["threshold"]))["threshold"]


def run_reader(container: Any, names: dict[str, str], qs: list[Question]) -> dict[str, Any]:
    """``--reader on``: margins, the dev sweep, and the answers at the operating point."""
    margins = reader_margins(container, qs)
    rows = sweep(qs, margins)
    print("threshold | dev answerable answered | near-topic refused | off-topic refused", flush=True)
    for r in rows:
        print(f"{r['threshold']:9.3f} | {r['answerable']:.3f} | {r['near_topic']:.3f} | {r['off_topic']:.3f}")
    runs: dict[str, Any] = {}
    for mode in ("vector", "hybrid"):
        answers = ask_all(container, names, qs, mode)
        run: dict[str, Any] = {s: score(qs, answers, s) for s in ("dev", "test")}
        run["answers"] = [
            {"question": q.question, "kind": q.kind, "split": q.split, "margin": m, **a}
            for q, m, a in zip(qs, margins, answers, strict=True)
        ]
        runs[f"{mode}/reader"] = run
        print(f"{mode}: dev {run['dev']}  test {run['test']}", flush=True)
    threshold = container.reader_threshold()
    return {"threshold": threshold, "suggested_dev_threshold": suggested(rows), "sweep": rows, "runs": runs}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fit", action="store_true", help="only fit and print the coefficients")
    parser.add_argument(
        "--select",
        action="store_true",
        help="fit every set of signals on dev (SQuAD-checked cutoff) and print the best",
    )
    parser.add_argument("--precision", choices=("fp32", "int8"), help="default: EMBEDDER_PRECISION")
    parser.add_argument("--no-squad", action="store_true", help="fit without the SQuAD 2.0 check")
    parser.add_argument("--features", help="fit and evaluate this set of signals (comma-separated)")
    parser.add_argument("--reader", choices=("on", "off"), help="the extractive reader (default: READER)")
    args = parser.parse_args([] if argv is None else argv)
    if args.reader:
        os.environ["READER"] = args.reader

    from ragchat.config import load_settings
    from ragchat.domain import answerability

    RESULTS.mkdir(exist_ok=True)
    qs = questions()
    wanted = None
    if smoke():  # a few questions of each kind and their documents: the figures mean nothing
        qs = smoke_questions(qs)
        wanted = {q.document for q in qs if q.document}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-grounding-") as tmp:
        container, names = build(tmp, args.precision, wanted)
        try:
            model_id = container.embedder.model_id
            precision = container.settings.embedder_precision
            threshold = container.settings.similarity_threshold
            if container.reader is not None:  # the reader decides: no signals to fit
                read = run_reader(container, names, qs)
                read |= {"model_id": model_id, "seconds": round(time.perf_counter() - started, 1)}
                read["reader_sha256"] = getattr(container.reader, "sha256", None)
                text = json.dumps(read, indent=1) + "\n"
                (RESULTS / "grounding-reader.json").write_text(text, encoding="utf-8")
                return
            signals = record_signals(container, qs)
            squad = None  # SQuAD is checked with the local model only (bench_calibration.py embeds with it)
            if (args.fit or args.select) and model_id == "all-MiniLM-L6-v2" and not args.no_squad:
                from bench_calibration import squad_signals

                squad = squad_signals()
            chosen = select_features(qs, signals, squad) if args.select else FEATURES
            if args.features:
                chosen = tuple(args.features.split(","))
            fitted = fit_coefficients(qs, signals, chosen, squad)
            print(f"fitted on dev for {model_id!r}: {fitted!r}", flush=True)
            if args.fit or args.select:
                return
            in_code = answerability.CALIBRATED.get(model_id)
            coefficients = in_code or fitted
            runs = run_modes(container, names, qs, coefficients)
        finally:
            container.launcher.close()
    result = {
        "model_id": model_id,
        "embedder_precision": precision,
        "threshold": threshold,
        "coefficients": {"source": "code" if in_code else "fitted now", **asdict(coefficients)},
        "fitted_now": asdict(fitted),
        "questions": {
            k: sum(1 for q in qs if q.kind == k) for k in ("answerable", "off_topic", "near_topic")
        },
        "documents": len(names),
        "signals": [
            {"question": q.question, "kind": q.kind, "split": q.split, **s}
            for q, s in zip(qs, signals, strict=True)
        ],
        "runs": runs,
        "seconds": round(time.perf_counter() - started, 1),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
        },
    }
    # the default precision's figures are the table in docs/benchmarks.md; the other one's JSON goes aside
    if precision != load_settings({}).embedder_precision:
        (RESULTS / f"grounding-{precision}.json").write_text(
            json.dumps(result, indent=1) + "\n", encoding="utf-8"
        )
        return
    (RESULTS / "grounding.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    write_md(result)


def write_md(result: dict[str, Any]) -> None:
    def frac(pair: list[int] | tuple[int, int]) -> str:
        return f"{pair[0]}/{pair[1]} ({pair[0] / pair[1]:.0%})"

    def count(split: str, kind: str) -> int:
        return sum(
            1 for a in result["runs"]["vector/seeds"]["answers"] if a["split"] == split and a["kind"] == kind
        )

    def table(split: str) -> list[str]:
        lines = [
            "| retrieval | decision | answered right | off-topic refused | near-topic refused "
            "| citation precision |",
            "|---|---|---|---|---|---|",
        ]
        for key, run in result["runs"].items():
            mode, label = key.split("/")
            t = run[split]
            decision = (
                f"top-1 ≥ MIN_SIMILARITY ({result['threshold']:.2f})"
                if label == "seeds"
                else "calibrated (default)"
            )
            lines.append(
                f"| {mode} | {decision} | {frac(t['answered_right'])} | {frac(t['off_topic_refused'])} "
                f"| {frac(t['near_topic_refused'])} | {t['citation_precision']:.2f} |"
            )
        return lines

    c = result["coefficients"]
    precision = f" ({result['embedder_precision']})" if result.get("embedder_precision") else ""
    lines = [
        f"### Grounding: the project's own set, {result['model_id']}{precision}, extractive answerer",
        "",
        f"{result['documents']} documents (policy, how-to, API reference, meeting notes, FAQ, HTML, PDF). "
        f"**Test split** ({count('test', 'answerable')} answerable, {count('test', 'off_topic')} off-topic, "
        f"{count('test', 'near_topic')} near-topic questions, 4 of the documents): written blind after the "
        "decision was tuned, never used to choose anything; the evidence sentence of each answerable "
        "question and why each near-topic one is unanswered are in `bench/grounding/test-answers.md`.",
        "",
        *table("test"),
        "",
        "**Dev split** (the same run of `bench/bench_grounding.py`; "
        f"{count('dev', 'answerable')} answerable, {count('dev', 'off_topic')} off-topic, "
        f"{count('dev', 'near_topic')} near-topic; what the decision was fitted and chosen on, so these "
        "figures are optimistic):",
        "",
        *table("dev"),
        "",
        "Answered right = not refused and the right document among the cited sources; citation precision = "
        "cited sources from the right document / all cited sources. The calibrated decision is a logistic "
        f"model over {' and '.join(c['weights'])} (cutoff {c['cutoff']:.2f}): the best similarity of the "
        "question to a two-sentence passage of the top chunks prefixed with its document's title, and the "
        "share of the question's words found in one sentence. `python bench/bench_grounding.py --select` "
        "fits every set of signals on dev and keeps the one answering the most dev questions at a cutoff "
        "that refuses every off-topic and half the near-topic dev questions and keeps SQuAD 2.0's balanced "
        "accuracy at least the top-1 rule's 92.2 %. The extractive answerer quotes the sentences closest "
        "in meaning to the question (MiniLM cosine + 0.1 × BM25). Chunks are embedded with their contextual "
        "header (`CHUNK_HEADERS`, the default).",
    ]
    (RESULTS / "grounding.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
