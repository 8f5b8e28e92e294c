"""The extractive reader's adapter and switch (``READER=on``, docs/reader.md): the bootstrap builds
none when off and names the command when the model is missing; the real trained model (the models
cache's, or the one shipped in the package) reads the answering passage's span above the others —
skipped when no model is prepared, like the other model-dependent tests. What the product makes of
readings is tested with a fake reader in test_reader_answers.py; the smoke model end to end in
tests/e2e/test_reader_smoke.py."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from ragchat.config import load_settings


def test_reader_off_builds_no_reader_and_on_without_the_model_names_the_command(tmp_path: Path) -> None:
    from ragchat.adapters.local.onnx_embedder import ModelNotPreparedError
    from ragchat.adapters.local.reader import MODEL_FILE, PACKAGED_MODELS, reader_dir
    from ragchat.bootstrap.models import Models

    off = Models(load_settings({"RAGCHAT_DATA_DIR": str(tmp_path / "d"), "RAGCHAT_MODEL_DIR": str(tmp_path)}))
    assert off.reader is None
    on = Models(
        load_settings(
            {"RAGCHAT_DATA_DIR": str(tmp_path / "d"), "RAGCHAT_MODEL_DIR": str(tmp_path), "READER": "on"}
        )
    )
    if (reader_dir(PACKAGED_MODELS) / MODEL_FILE).is_file():  # shipped: the package's copy is read
        assert on.reader is not None
        return
    with pytest.raises(ModelNotPreparedError, match="make reader"):
        _ = on.reader


# ------------------------------------------------------------------------- the real trained model
def _reader_models() -> Path | None:
    from ragchat.adapters.local.reader import find_reader

    with contextlib.suppress(Exception):
        return find_reader(load_settings().models_path)
    return None


READER_FOLDER = _reader_models()


@pytest.mark.skipif(READER_FOLDER is None, reason="reader model not prepared: run `make reader`")
def test_the_trained_reader_finds_the_span_in_the_answering_passage() -> None:
    from ragchat.adapters.local.reader import MODEL_FILE, TOKENIZER_FILE, OnnxReader

    assert READER_FOLDER is not None
    reader = OnnxReader(READER_FOLDER / MODEL_FILE, READER_FOLDER / TOKENIZER_FILE)
    question = "How long do refunds take to reach the customer?"
    answering = (
        "Refunds are requested from the orders page. "
        "They reach the customer's card within five business days."
    )
    unrelated = "Tomatoes grow well on a sunny balcony in large pots."
    readings = reader.read(question, [answering, unrelated])
    assert len(readings) == 2
    first = readings[0]
    assert first.found and 0 <= first.start < first.end <= len(answering)
    assert readings[0].margin > readings[1].margin


def test_ragchat_serve_says_at_start_up_that_the_reader_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragchat.adapters.local.reader import MODEL_FILE, PACKAGED_MODELS, reader_dir
    from ragchat.bootstrap import Container
    from ragchat.cli.serve import _prepare

    from tests.fakes import FakeEmbedder

    if (reader_dir(PACKAGED_MODELS) / MODEL_FILE).is_file():
        pytest.skip("a reader is shipped in the package: it is never missing")
    env = {"RAGCHAT_DATA_DIR": str(tmp_path / "d"), "RAGCHAT_MODEL_DIR": str(tmp_path), "READER": "on"}
    container = Container(load_settings(env), embedder=FakeEmbedder(dimension=64))
    try:
        _prepare(container, samples=False)
    finally:
        container.close()
    err = capsys.readouterr().err
    assert "the reader model is not prepared" in err and "make reader" in err
