"""``ragchat calibrate`` end to end with the real MiniLM embedder (issue 36 item 4): a small set in the
grounding set's format is ingested into a throwaway knowledge base, fitted, printed, and stored in
the data directory's file, which the next container's retriever reads. Needs the prepared model
(``make model``); skipped without it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.e2e.conftest import REPO, model_ready, models_path

pytestmark = pytest.mark.skipif(
    not model_ready(models_path()), reason="MiniLM ONNX model not prepared: run `make model`"
)

GROUNDING = REPO / "bench" / "grounding"
DOCS = ("support-sla.html", "accounts-faq.md", "expense-policy.md")


def _small_set(folder: Path) -> None:
    (folder / "docs").mkdir(parents=True)
    for name in DOCS:
        shutil.copy(GROUNDING / "docs" / name, folder / "docs" / name)
    rows = json.loads((GROUNDING / "questions.json").read_text(encoding="utf-8"))["questions"]
    kept = [q for q in rows if q["split"] == "dev" and (q["document"] in DOCS or q["kind"] == "off_topic")]
    (folder / "questions.json").write_text(json.dumps({"questions": kept}), encoding="utf-8")


def test_calibrate_fits_prints_and_stores_where_the_chat_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragchat.bootstrap import Container
    from ragchat.cli import app
    from ragchat.config import load_settings

    _small_set(tmp_path / "set")
    data = tmp_path / "data"
    monkeypatch.setenv("RAGCHAT_DATA_DIR", str(data))
    monkeypatch.setenv("RAGCHAT_MODEL_DIR", str(models_path()))
    monkeypatch.delenv("ANSWERABILITY_PARAMETER", raising=False)
    result = CliRunner().invoke(app, ["calibrate", "--set", str(tmp_path / "set")])
    assert result.exit_code == 0, result.output
    assert "embedding model: all-MiniLM-L6-v2" in result.output
    assert "cutoffs: extractive" in result.output and "reader (Claude)" in result.output
    assert f"stored in {data / 'answerability.json'}" in result.output
    stored = json.loads((data / "answerability.json").read_text())["all-MiniLM-L6-v2"]
    assert stored["readerCutoff"] <= stored["cutoff"] and stored["figures"]["questions"] > 5

    container = Container(load_settings())
    try:
        assert container.retriever.calibration is not None
        assert container.retriever.calibration.reader_cutoff == stored["readerCutoff"]
    finally:
        container.close()


def test_calibrate_without_the_set_says_where_to_run_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragchat.cli import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["calibrate"])
    assert result.exit_code == 1
    assert "bench/grounding/questions.json not found" in result.output
