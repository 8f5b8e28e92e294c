"""Every benchmark entry point runs, in smoke mode, on a fresh machine (issue 35).

Each ``bench/bench_*.py`` (found in the folder, so a new benchmark is covered without a change
here) is started as ``python bench/bench_<name>.py``, its documented command, with
``RAGCHAT_BENCH_SMOKE=1`` (tiny data: a few documents and questions, seconds). ``make bench``'s
runner, ``bench/run_all.py``, must run exactly that list. The other scripts in ``bench/`` that load
the model run too (``SCRIPTS``); every other file there says why it is not run (``NOT_RUN``).

The machine is a fresh one after ``make install``: an empty working directory, a fresh data dir
and temp dir, and an empty home whose per-user model cache (``~/.cache/ragchat/models``) links to
the prepared model, with no ``RAGCHAT_MODEL_DIR`` and no ``XDG_CACHE_HOME``. So a benchmark that
looks for the model anywhere else than the product does (the repository's old
``.ragchat/models``, say) fails here. The data sets (SciFact, SQuAD 2.0) are generated below, a few
entries each, and handed over through ``RAGCHAT_BENCH_DATA``; results go to a temporary
``RAGCHAT_BENCH_RESULTS``, never into ``bench/results``.

A benchmark that needs what a CI machine does not have (ChromaDB, which is never a ragchat
dependency) must say so: it prints why it skipped and writes nothing, and the test checks that
message when, and only when, the prerequisite is really missing here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
LAYER = REPO / "layers" / "ragchat"


def _benchmarks() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in BENCH.glob("bench_*.py"))


def _chromadb_missing() -> str | None:
    """Why bench_chroma cannot run here (its interpreter, ``make bench-chroma-env``), or None."""
    python = REPO / ".venv-chroma" / "bin" / "python"
    if not python.exists():
        return "chromadb is not installed"
    probe = subprocess.run([str(python), "-c", "import chromadb"], capture_output=True, check=False)
    return None if probe.returncode == 0 else "chromadb is not installed"


# benchmark -> (why it may be unavailable here, or None; the line it then prints)
def _reader_missing() -> str | None:
    """The reader is the models cache's (shared with this machine's), else the package's."""
    sys.path.insert(0, str(LAYER))
    from ragchat.adapters.local.reader import find_reader
    from ragchat.config import load_settings

    try:
        find_reader(load_settings().models_path)
    except Exception:
        return "the reader model is not prepared"
    return None


UNAVAILABLE = {
    "chroma": (_chromadb_missing, "bench chroma: SKIPPED: chromadb is not installed"),
    "reader": (_reader_missing, "bench reader: SKIPPED: the reader model is not prepared (make reader)"),
    "ocr": (
        lambda: None if shutil.which("tesseract") else "tesseract is not installed",
        "bench ocr: SKIPPED: the tesseract program is not installed",
    ),
}

# The scripts in bench/ that make bench does not run, with the arguments of a smoke run and what it
# writes (a results file, or a line it prints); the others, with why they are not run here.
SCRIPTS = {
    "evidence_latency.py": (["--docs", "6", "--rounds", "1"], "evidence_latency.md"),
    "chroma_tokens.py": ([], '"ratio_ragchat_to_chroma"'),
    "ingest_breakdown.py": (["--docs", "6"], '"accept_to_last_ready_s"'),
    "scifact_product.py": (["--label", "smoke"], '"tokens_embedded"'),
}
NOT_RUN = {
    "benchdata.py": "the library every benchmark uses",
    "run_all.py": "make bench: test_make_bench_runs_every_benchmark_…",
    "grounding_set.py": "the grounding set's loader (bench_grounding, bench_recorded_prompts)",
    "real_vectors.py": "run by bench_ann_choice and bench_vector_store",
    "first_answer.py": "run by bench_first_answer",
    "store_load.py": "random vectors, no model or data set; 300,000 rows take minutes",
    "profile_top.py": "reads a py-spy recording",
    "train_reader.py": "make reader: trains for minutes (its smoke run: tests/unit/test_reader_training.py)",
    "reader_qa_data.py": "the reader's training data (train_reader.py)",
    "chroma_before_after.py": "bench_chroma's phases from two checkouts: needs chromadb and a second tree",
}

TOPICS = [
    ("Ferns", "Ferns reproduce with spores rather than seeds. The spores grow on the underside of fronds."),
    ("Insulin", "Insulin is a hormone made by the pancreas. It lowers the glucose level of the blood."),
    ("Volcanoes", "Volcanoes erupt when magma rises through the crust. Lava cools into basalt rock."),
    ("Tides", "Tides are caused by the gravity of the Moon. High tide comes twice a day on most coasts."),
    ("Bees", "Honey bees dance to tell other bees where flowers are. The waggle dance gives a direction."),
    ("Copper", "Copper conducts electricity well and is used in wires. It turns green when it weathers."),
]
PADDING = (
    "The study measured it in three groups over two years and reports the mean and the spread of "
    "every measurement, with the methods described in full in the appendix."
)
CLAIMS = [
    "Ferns grow from spores.",
    "The pancreas makes insulin.",
    "Magma rising through the crust makes volcanoes erupt.",
    "The Moon causes tides.",
    "Bees dance to show where flowers are.",
    "Copper is used in electric wires.",
]


def _write_data(root: Path) -> None:
    """A SciFact-shaped and a SQuAD-2.0-shaped data set, a few entries each."""
    scifact = root / "scifact"
    (scifact / "qrels").mkdir(parents=True)
    corpus, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for i, (title, text) in enumerate(TOPICS * 3):
        body = f"{text} {PADDING}"  # some benchmarks only index abstracts of 200+ characters
        corpus.append(json.dumps({"_id": str(100 + i), "title": f"{title} {i}", "text": body}))
    for i, claim in enumerate(CLAIMS):
        queries.append(json.dumps({"_id": str(i + 1), "text": claim}))
        qrels.append(f"{i + 1}\t{100 + i}\t1")
    queries.append(json.dumps({"_id": "99", "text": "A claim nobody judged."}))
    (scifact / "corpus.jsonl").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    (scifact / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (scifact / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    articles = []
    for a, (title, text) in enumerate(TOPICS):
        word = text.split()[0]
        qas = [
            {
                "id": f"q{a}a",
                "question": f"What does the passage say about {title.lower()}?",
                "answers": [{"text": word, "answer_start": text.index(word)}],
                "is_impossible": False,
            },
            {
                "id": f"q{a}b",
                "question": f"Who discovered {title.lower()} in 1492?",
                "answers": [],
                "plausible_answers": [{"text": word, "answer_start": 0}],
                "is_impossible": True,
            },
        ]
        articles.append({"title": title, "paragraphs": [{"context": text, "qas": qas}]})
    squad = json.dumps({"version": "v2.0", "data": articles})
    (root / "squad2-dev.json").write_text(squad, encoding="utf-8")


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh machine after ``make install``: the model in the per-user cache of an empty home,
    nothing else set. Returns its root folder and the environment."""
    sys.path.insert(0, str(LAYER))
    from ragchat.adapters.local.onnx_embedder import MODEL_FILES, model_dir
    from ragchat.config import load_settings

    prepared = load_settings().models_path
    if not (model_dir(prepared) / MODEL_FILES["fp32"]).is_file():
        pytest.skip(f"the MiniLM model is not prepared in {prepared} (run `make model`)")
    root = tmp_path_factory.mktemp("fresh-machine")
    cache = root / "home" / ".cache" / "ragchat"
    cache.mkdir(parents=True)
    (cache / "models").symlink_to(prepared.resolve(), target_is_directory=True)
    _write_data(root / "bench-data")
    (root / "tmp").mkdir()
    dropped = ("RAGCHAT_", "XDG_", "ANTHROPIC_", "AWS_", "EMBEDDER_", "CHUNK_", "EVIDENCE_", "FIRST_ANSWER_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env |= {
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "PYTHONPATH": os.pathsep.join([str(LAYER), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "RAGCHAT_BENCH_SMOKE": "1",
        "RAGCHAT_BENCH_DATA": str(root / "bench-data"),
        "RAGCHAT_DATA_DIR": str(root / "data"),
        "OMP_NUM_THREADS": "1",  # two benchmarks side by side under `pytest -n 2`
    }
    return root, env


def _run(
    root: Path, env: dict[str, str], name: str, *argv: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``argv`` from an empty working directory, results into ``<root>/results/<name>``."""
    results, work = root / "results" / name, root / "work" / name
    work.mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, *argv],
        cwd=work,
        env=env | {"RAGCHAT_BENCH_RESULTS": str(results)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert not any(work.iterdir()), f"{argv} wrote into its working directory: {sorted(work.iterdir())}"
    return proc, results


def _written_since(started: float) -> list[str]:
    return sorted(p.name for p in (BENCH / "results").iterdir() if p.stat().st_mtime >= started)


@pytest.mark.parametrize("name", _benchmarks())
def test_the_benchmark_runs_in_smoke_mode_on_a_fresh_machine(
    name: str, machine: tuple[Path, dict[str, str]]
) -> None:
    root, env = machine
    started = time.time()
    proc, results = _run(root, env, name, str(BENCH / f"bench_{name}.py"))
    output = f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert proc.returncode == 0, f"bench_{name}.py failed:\n{output}"
    assert _written_since(started) == [], "a smoke run wrote into bench/results"
    written = sorted(results.glob("*")) if results.exists() else []
    check, message = UNAVAILABLE.get(name, (lambda: None, ""))
    if check() is not None:  # really missing here: the benchmark must say so and write nothing
        assert message in proc.stdout, f"bench_{name}.py did not say why it skipped:\n{output}"
        assert not written, f"bench_{name}.py skipped but wrote {written}"
        return
    tables = [p for p in written if p.suffix == ".md"]
    assert tables, f"bench_{name}.py wrote no results table into {results}:\n{output}"
    for table in tables:
        text = table.read_text(encoding="utf-8")
        assert "|---" in text, f"{table.name} holds no table:\n{text}"
        assert (table.with_suffix(".json")).is_file(), f"{table.name} has no raw JSON next to it"


def test_make_bench_runs_every_benchmark_and_a_smoke_run_leaves_the_docs_alone(
    machine: tuple[Path, dict[str, str]],
) -> None:
    """``make bench`` (``bench/run_all.py``) runs every ``bench/bench_*.py`` by loading it and calling
    ``main()`` with no arguments, while its own argv (``--only …``) is in ``sys.argv``. A smoke run
    writes its tables into the smoke results folder and leaves docs/benchmarks.md as it is."""
    sys.path.insert(0, str(BENCH))
    try:
        import run_all
    finally:
        sys.path.remove(str(BENCH))
    assert [p.stem.removeprefix("bench_") for p in run_all.benchmarks()] == _benchmarks()
    root, env = machine
    docs = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    only = ("calibration", "extractive")
    argv = [str(BENCH / "run_all.py")] + [a for n in only for a in ("--only", n)]
    proc, results = _run(root, env, "run_all", *argv)
    assert proc.returncode == 0, f"run_all.py failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert sorted(p.name for p in results.glob("*.md")) == [f"{n}.md" for n in only]
    assert (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8") == docs


def test_every_script_in_bench_is_run_here_or_says_why_not() -> None:
    scripts = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("bench_")}
    assert scripts == set(SCRIPTS) | set(NOT_RUN)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_the_script_runs_in_smoke_mode_on_a_fresh_machine(
    script: str, machine: tuple[Path, dict[str, str]]
) -> None:
    root, env = machine
    argv, writes = SCRIPTS[script]
    proc, results = _run(root, env, script.removesuffix(".py"), str(BENCH / script), *argv)
    output = f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert proc.returncode == 0, f"{script} failed:\n{output}"
    if writes.endswith(".md"):
        assert "|---" in (results / writes).read_text(encoding="utf-8"), output
    else:
        assert writes in proc.stdout, output
