"""Run every benchmark (``bench/bench_*.py``), then refresh the results section of docs/benchmarks.md.

Each benchmark module has a ``main()`` that writes ``bench/results/<name>.json`` (raw figures and
machine info) and ``bench/results/<name>.md`` (a short markdown table). This script runs them one
after another (``--only NAME`` to pick some) and copies the markdown files into docs/benchmarks.md between
the ``<!-- bench:start -->`` and ``<!-- bench:end -->`` markers.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import traceback
from pathlib import Path

from benchdata import results_dir, smoke

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = results_dir()
README = BENCH_DIR.parent / "docs" / "benchmarks.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def _load(path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def benchmarks() -> list[Path]:
    """Every benchmark ``make bench`` runs: ``bench/bench_*.py``, in name order."""
    return sorted(BENCH_DIR.glob("bench_*.py"))


def with_command(table: str, name: str) -> str:
    """A results file under its heading (at level 3 or below) with the command that wrote it."""
    line = (
        f"Command: `python bench/bench_{name}.py` (`make bench` runs it so; the arguments of the run "
        f"recorded here are in [Reproduce](#reproduce)), table `bench/results/{name}.md`."
    )
    if table.startswith("# "):  # a page of its own: its summary, one level down (the details stay there)
        summary, _, details = table.partition("\n## ")
        table = "##" + summary.rstrip()
        if details:
            line += " Details (each split's misses) in that file."
    head, _, rest = table.partition("\n")
    if not head.startswith("#"):
        return f"{line}\n\n{table}"
    return f"{head}\n\n{line}\n{rest}"


def tables() -> list[str]:
    """The tables of the benchmarks ``make bench`` runs (``bench/results/<name>.md`` of each
    ``bench_<name>.py``; the other files there are named in docs/benchmarks.md where they are used)."""
    parts = []
    for path in benchmarks():
        name = path.stem.removeprefix("bench_")
        md = RESULTS / f"{name}.md"
        if md.is_file():
            parts.append(with_command(md.read_text(encoding="utf-8").strip(), name))
    return parts


def refresh_readme() -> None:
    if smoke() or not README.exists():  # a smoke run's figures mean nothing
        return
    parts = tables()
    text = README.read_text(encoding="utf-8")
    if START not in text or END not in text:
        return
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    body = "\n\n".join(parts) if parts else "_No results recorded yet: run `make bench`._"
    README.write_text(f"{head}{START}\n{body}\n{END}{tail}", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", action="append", default=[], help="run only bench_<NAME>.py")
    parser.add_argument(
        "--readme-only", action="store_true", help="only refresh the table in docs/benchmarks.md"
    )
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    failed = []
    if not args.readme_only:
        for path in benchmarks():
            name = path.stem.removeprefix("bench_")
            if args.only and name not in args.only:
                continue
            print(f"== bench {name}", flush=True)
            started = time.perf_counter()
            argv, sys.argv = sys.argv, [str(path)]  # each runs as with no arguments (not run_all's)
            try:
                _load(path).main()
            except SystemExit as exc:  # an argparse error or sys.exit: that benchmark failed
                if exc.code not in (0, None):
                    traceback.print_exc()
                    failed.append(name)
            except Exception:
                traceback.print_exc()
                failed.append(name)
            finally:
                sys.argv = argv
            print(f"== bench {name}: {time.perf_counter() - started:.1f} s", flush=True)
    refresh_readme()
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
