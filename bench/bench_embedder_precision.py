"""fp32 vs int8 MiniLM (``EMBEDDER_PRECISION``) and embedder options, alternated A/B rounds on the
same SciFact passages.

Usage: ``python bench/bench_embedder_precision.py [--passages 64] [--rounds 6] [--variants fp32 int8]``
(``RAGCHAT_BENCH_DATA`` points at the data). Each round embeds the passages with every variant, the
order reversed every other round, so all see the same machine load; the figures are medians, with
the 1-minute load average after every round, and per-round ratios to the first variant.

A variant is a precision, optionally with one option after a colon:

- ``int8:spin``: onnxruntime's intra-op threads spin between operators instead of sleeping
  (``session.intra_op.allow_spinning=1``; the embedder turns it off);
- ``int8:tb4096``: a padded-token budget per onnxruntime call other than the embedder's 2,048;
- ``int8:par``: one thread per core each running whole batches on a single-threaded session
  (instead of one session splitting every operator over the cores); ``int8:par2``: the same
  threads on the embedder's own session (one intra-op thread per core).

Writes ``bench/results/embedder_precision.{json,md}`` for the default variants, else
``bench/results/embedder_options.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from benchdata import bench_data_dir, models_path, results_dir, smoke  # noqa: E402

DEFAULT_VARIANTS = ["fp32", "int8"]


def _passages(n: int) -> list[str]:
    texts: list[str] = []
    with (bench_data_dir() / "scifact" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            texts.append(doc["title"] + "\n" + doc["text"])
            if len(texts) >= n:
                break
    return texts


def _embedder(variant: str, models_path: Path) -> Any:
    """The embedder for ``precision[:option]`` (see the module docstring)."""
    import onnxruntime as ort
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

    precision, _, option = variant.partition(":")
    kwargs: dict[str, Any] = {}
    if option.startswith("tb"):
        kwargs["token_budget"] = int(option[2:])
    if option == "par":
        kwargs["threads"] = 1
    embedder = OnnxMiniLMEmbedder.from_cache(models_path, precision=precision, **kwargs)
    if option == "spin":
        from ragchat.adapters.local.onnx_embedder import MODEL_FILES, model_dir

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = embedder.threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1")
        path = model_dir(models_path) / MODEL_FILES[precision]
        embedder._session = ort.InferenceSession(
            str(path), sess_options=opts, providers=["CPUExecutionProvider"]
        )
    if option in ("par", "par2"):
        return _Parallel(embedder, os.cpu_count() or 1)
    return embedder


class _Parallel:
    """Whole batches spread over ``workers`` threads of a single-threaded session (each run holds
    one core; onnxruntime releases the GIL while it runs)."""

    def __init__(self, inner: Any, workers: int) -> None:
        self.inner, self.workers = inner, workers

    def embed_array(self, texts: list[str]) -> Any:
        import numpy as np
        from ragchat.adapters.local.onnx_embedder import _mean_pool_normalize

        e = self.inner
        encodings = e._tokenizer.encode_batch(texts, add_special_tokens=True)
        lengths = np.fromiter((len(x.ids) for x in encodings), dtype=np.int64, count=len(encodings))
        batches = e._batches(np.argsort(lengths, kind="stable"), lengths)
        out = np.empty((len(texts), e.dimension), dtype=np.float32)
        pending = list(reversed(batches))
        lock = threading.Lock()

        def work() -> None:
            while True:
                with lock:
                    if not pending:
                        return
                    rows = pending.pop()
                width = int(lengths[rows].max())
                ids = np.zeros((len(rows), width), dtype=np.int64)
                mask = np.zeros_like(ids)
                for r, index in enumerate(rows):
                    n = len(encodings[index].ids)
                    ids[r, :n], mask[r, :n] = encodings[index].ids, 1
                feed = {"input_ids": ids, "attention_mask": mask}
                if "token_type_ids" in e._input_names:
                    feed["token_type_ids"] = np.zeros_like(ids)
                (hidden,) = e._session.run([e._output_name], feed)
                out[rows] = _mean_pool_normalize(hidden, mask)

        threads = [threading.Thread(target=work) for _ in range(self.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out


def markdown(result: dict[str, Any]) -> str:
    """The table of one run (``embedder_precision.md`` / ``embedder_options.md``)."""
    variants, base = result["variants"], result["variants"][0]
    loads = result["load_average_1min"]
    command = "python bench/bench_embedder_precision.py"
    command += f" --passages {result['passages']} --rounds {result['rounds']}"
    if variants != DEFAULT_VARIANTS:
        command += " --variants " + " ".join(variants)
    lines = [
        f"### MiniLM variants: {' vs '.join(variants)}",
        "",
        f"Measured with `{command}`.",
        "",
        f"{result['passages']} SciFact passages ({result['tokens']:,} tokens), {result['rounds']} alternated "
        f"rounds, medians; {result['cpus']} CPUs, 1-min load {min(loads):.1f}–{max(loads):.1f}, "
        f"{result['measured_at']}.",
        "",
        f"| variant | median s | passages/s | tokens/s | speed-up vs {base} (per round) "
        f"| min cosine vs {base} |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for v in variants:
        rounds = ", ".join(f"{x:.2f}" for x in result["per_round_speedup_vs_first"][v])
        lines.append(
            f"| {v} | {result['median_seconds'][v]:.2f} | {result['passages_per_second'][v]:.1f} | "
            f"{result['tokens_per_second'][v]:,.0f} | {result['speedup_of_medians_vs_first'][v]:.2f}× "
            f"({rounds}) | {result['min_cosine_vs_first'][v]:.4f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS)
    if smoke():  # tiny data: the run proves the code path, its figures mean nothing
        parser.set_defaults(passages=8, rounds=1)
    args = parser.parse_args([] if argv is None else argv)  # run_all.py calls main() with no args
    texts = _passages(args.passages)
    path = models_path()
    variants: list[str] = args.variants
    embedders = {v: _embedder(v, path) for v in variants}
    tokenizer = embedders[variants[0]]
    tokenizer = getattr(tokenizer, "inner", tokenizer)._tokenizer
    tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts))
    for e in embedders.values():
        e.embed_array(texts[:16])  # warm-up
    first = embedders[variants[0]].embed_array(texts)
    agreement = {v: float((e.embed_array(texts) * first).sum(axis=1).min()) for v, e in embedders.items()}
    times: dict[str, list[float]] = {v: [] for v in variants}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for v in variants if r % 2 == 0 else variants[::-1]:
            started = time.perf_counter()
            embedders[v].embed_array(texts)
            times[v].append(time.perf_counter() - started)
        loads.append(os.getloadavg()[0])
        print(r, {v: round(t[-1], 2) for v, t in times.items()}, f"load {loads[-1]:.2f}", flush=True)
    median = {v: statistics.median(t) for v, t in times.items()}
    base = variants[0]
    result: dict[str, Any] = {
        "passages": args.passages,
        "tokens": tokens,
        "rounds": args.rounds,
        "variants": variants,
        "seconds": times,
        "median_seconds": median,
        "passages_per_second": {v: args.passages / m for v, m in median.items()},
        "tokens_per_second": {v: tokens / m for v, m in median.items()},
        "speedup_of_medians_vs_first": {v: median[base] / m for v, m in median.items()},
        "per_round_speedup_vs_first": {
            v: [a / b for a, b in zip(times[base], t, strict=True)] for v, t in times.items()
        },
        "min_cosine_vs_first": agreement,
        "load_average_1min": loads,
        "cpus": os.cpu_count(),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if variants == DEFAULT_VARIANTS:
        result["speedup_of_medians"] = median["fp32"] / median["int8"]
        name = "embedder_precision.json"
    else:
        name = "embedder_options.json"
    out = results_dir() / name
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(markdown(result), encoding="utf-8")
    print(
        json.dumps(
            {k: result[k] for k in ("median_seconds", "tokens_per_second", "speedup_of_medians_vs_first")},
            indent=2,
        )
    )
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
