"""One model cache for every command (issue 21): the prepared MiniLM lives in the per-user cache
(``$XDG_CACHE_HOME`` or ``~/.cache`` + ``/ragchat/models``), ``RAGCHAT_MODEL_DIR`` overrides it, the
data dir never moves it, and a missing model is one line naming the command that prepares it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from ragchat.adapters.local.onnx_embedder import ModelNotPreparedError, OnnxMiniLMEmbedder
from ragchat.config import load_settings
from typer.testing import CliRunner


@pytest.fixture(autouse=True)
def _no_model_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings also read the process environment: the developer's own cache must not leak in."""
    monkeypatch.delenv("RAGCHAT_MODEL_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)


def test_the_model_cache_is_per_user_and_ignores_the_data_dir(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for data_dir in ("/somewhere", ".ragchat", str(tmp_path / "data")):
        settings = load_settings({"XDG_CACHE_HOME": str(cache), "RAGCHAT_DATA_DIR": data_dir})
        assert settings.models_path == cache / "ragchat" / "models"


def test_without_xdg_the_cache_is_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("sys.platform", "linux")
    assert load_settings({}).models_path == tmp_path / ".cache" / "ragchat" / "models"
    # a relative XDG_CACHE_HOME is ignored, as the XDG spec says
    assert load_settings({"XDG_CACHE_HOME": "rel"}).models_path == tmp_path / ".cache" / "ragchat" / "models"


def test_ragchat_model_dir_overrides_and_is_resolved_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "RAGCHAT_MODEL_DIR": "/work/models"}
    assert load_settings(env).models_path == Path("/work/models")
    monkeypatch.chdir(tmp_path)
    # relative: taken against the working directory when the settings are read (then absolute)
    assert load_settings({"RAGCHAT_MODEL_DIR": "m"}).models_path == tmp_path / "m"


def test_a_missing_model_is_one_line_with_the_command(tmp_path: Path) -> None:
    with pytest.raises(ModelNotPreparedError) as caught:
        OnnxMiniLMEmbedder.from_cache(tmp_path / "empty")
    message = str(caught.value)
    assert "\n" not in message
    assert "run `make install`" in message
    assert str(tmp_path / "empty" / "all-MiniLM-L6-v2") in message
    assert caught.value.status == 503  # the API answers "service unavailable" with the same line


def test_cli_without_a_model_prints_one_line_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragchat.cli import app

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("RAGCHAT_MODEL_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("RAGCHAT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAGCHAT_CHAT_MODEL", "extractive")
    try:
        result = CliRunner().invoke(app, ["ask", "What do ferns use to reproduce?"])
    finally:
        logging.disable(logging.NOTSET)  # `ask` silences logging for the process: not for later tests
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "run `make install`" in lines[0]
    assert str(tmp_path / "cache" / "ragchat" / "models") in lines[0]


def test_a_blank_ragchat_model_dir_means_the_user_cache(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path), "RAGCHAT_MODEL_DIR": ""}
    assert load_settings(env).models_path == tmp_path / "ragchat" / "models"
