"""Schemathesis against a real ``ragchat serve`` (issue 8): every operation of the published OpenAPI
document, generated inputs (bounded: 25 examples per operation, deterministic generation), no server
error and every documented response matching its schema. About a minute here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import TOKEN, run_server

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 25


def test_generated_requests_never_get_a_server_error_and_match_the_schema(tmp_path: Path) -> None:
    st = Path(sys.executable).with_name("st")
    if not st.exists():  # pragma: no cover
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    with run_server(tmp_path) as server:
        run = subprocess.run(
            [
                str(st), "run", f"{server.url}/openapi.json",
                "--header", f"Authorization: Bearer {TOKEN}",
                "--checks", "not_a_server_error,response_schema_conformance",
                "--max-examples", str(MAX_EXAMPLES),
                "--generation-deterministic",
                "--workers", "2",
                "--request-timeout", "30",
                "--no-color",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )  # fmt: skip
    summary = run.stdout[run.stdout.find("SUMMARY") - 40 :]
    assert run.returncode == 0, f"{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    assert "Tested: " in summary and "Server error" not in summary
