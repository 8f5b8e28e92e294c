"""The model cache found from anywhere (issue 21): ``ragchat ask`` and ``make model``'s step run from
an unrelated directory, with a data dir of their own and no ``RAGCHAT_MODEL_DIR``, use the per-user
cache (here ``$XDG_CACHE_HOME/ragchat/models`` pointing at the prepared model)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import model_ready, models_path

pytestmark = pytest.mark.e2e


def _env(tmp_path: Path) -> dict[str, str]:
    if not model_ready(models_path()):
        pytest.skip(f"the MiniLM model is not prepared in {models_path()} (run `make install`)")
    cache = tmp_path / "cache"
    (cache / "ragchat").mkdir(parents=True)
    (cache / "ragchat" / "models").symlink_to(models_path())
    env = {k: v for k, v in os.environ.items() if k not in ("RAGCHAT_MODEL_DIR", "ANTHROPIC_API_KEY")}
    env.update(
        XDG_CACHE_HOME=str(cache),
        RAGCHAT_DATA_DIR=str(tmp_path / "somewhere"),
        RAGCHAT_CHAT_MODEL="extractive",
    )
    return env


def test_commands_find_the_user_cache_from_any_directory(tmp_path: Path) -> None:
    env = _env(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ragchat = str(Path(sys.executable).with_name("ragchat"))
    note = elsewhere / "ferns.md"
    note.write_text("# Ferns\n\nFerns reproduce with spores rather than seeds.\n", encoding="utf-8")
    ingest = subprocess.run(
        [ragchat, "ingest", str(note)], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120
    )
    assert ingest.returncode == 0, ingest.stderr
    asked = subprocess.run(
        [ragchat, "ask", "How do ferns reproduce?"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert asked.returncode == 0, asked.stderr
    assert "spores" in asked.stdout
    # `make install`'s model step, from the same place: the cache is found and already prepared
    prep = subprocess.run(
        [sys.executable, "-m", "ragchat.adapters.local.model_prep"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert prep.returncode == 0, prep.stderr
    assert f"ready in {tmp_path / 'cache' / 'ragchat' / 'models'}" in prep.stdout
