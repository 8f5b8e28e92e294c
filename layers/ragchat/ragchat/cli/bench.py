"""``ragchat bench``: every benchmark of the current checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer

from ragchat.cli.common import fail


def bench() -> None:
    """Run every benchmark (bench/run_all.py in the current checkout); results go to bench/results/."""
    runner = Path("bench/run_all.py")
    if not runner.is_file():
        raise fail("bench/run_all.py not found: run this from the ragchat repository root")
    raise typer.Exit(subprocess.call([sys.executable, str(runner)]))
