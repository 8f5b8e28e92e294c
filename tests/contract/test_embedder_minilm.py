"""The local MiniLM embedder (ONNX) against sentence-transformers' output for the same model.

Needs the model prepared by ``make model`` (``make test`` does it first): ``Settings.models_path``,
else the repository's ``.ragchat/models``. Skipped, with that reason, only when it is absent.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ragchat.adapters.local.onnx_embedder import (
    ModelNotPreparedError,
    OnnxMiniLMEmbedder,
    model_dir,
)
from ragchat.ports import Embedder

REPO = Path(__file__).resolve().parents[2]
MIN_COSINE = 0.999


def _models_path() -> Path | None:
    from ragchat.config import load_settings

    candidates = []
    # an unrelated bad variable in the environment: fall back to the repo cache
    with contextlib.suppress(Exception):
        candidates.append(load_settings().models_path)
    candidates.append(REPO / ".ragchat" / "models")
    for path in candidates:
        if (model_dir(path) / "model.onnx").is_file():
            return path
    return None


MODELS = _models_path()
needs_model = pytest.mark.skipif(
    MODELS is None, reason="MiniLM ONNX model not prepared: run `make model` (make test does it)"
)


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    """The fp32 export (the default, ``EMBEDDER_PRECISION=fp32``): parity with sentence-transformers."""
    assert MODELS is not None
    return OnnxMiniLMEmbedder.from_cache(MODELS, precision="fp32")


@pytest.fixture(scope="module")
def int8() -> OnnxMiniLMEmbedder:
    """``EMBEDDER_PRECISION=int8``: the model ``make install`` makes by quantizing the export."""
    assert MODELS is not None
    return OnnxMiniLMEmbedder.from_cache(MODELS, precision="int8")


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    assert MODELS is not None
    data: dict[str, Any] = json.loads((model_dir(MODELS) / "reference.json").read_text(encoding="utf-8"))
    return data


def cosine(a: list[float], b: list[float]) -> float:
    x, y = np.asarray(a), np.asarray(b)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def test_missing_model_names_make_install(tmp_path: Path) -> None:
    with pytest.raises(ModelNotPreparedError, match="run `make install`"):
        OnnxMiniLMEmbedder.from_cache(tmp_path)


@needs_model
def test_matches_sentence_transformers_reference(
    embedder: OnnxMiniLMEmbedder, reference: dict[str, Any]
) -> None:
    sentences = reference["sentences"]
    assert len(sentences) >= 30
    got = embedder.embed_documents(sentences)
    for text, vector, expected in zip(sentences, got, reference["embeddings"], strict=True):
        assert cosine(vector, expected) >= MIN_COSINE, f"parity lost for {text!r}"


@needs_model
def test_long_text_is_truncated_not_rejected(embedder: OnnxMiniLMEmbedder) -> None:
    long_text = " ".join(f"token{i}" for i in range(2000))
    longer = long_text + " and a tail that is cut off anyway"
    a, b = embedder.embed_documents([long_text, longer])
    assert cosine(a, b) > 0.9999  # only the first 256 tokens count


@pytest.mark.skipif(
    MODELS is None or importlib.util.find_spec("sentence_transformers") is None,
    reason="sentence-transformers not importable here (it lives in .venv-export); reference.json covers it",
)
def test_matches_sentence_transformers_directly(embedder: OnnxMiniLMEmbedder) -> None:
    from ragchat.adapters.local.model_prep import source_dir
    from sentence_transformers import SentenceTransformer

    texts = ["A quick check.", "Une phrase en français, avec des accents : éèà.", "x " * 400]
    model = SentenceTransformer(str(source_dir()), device="cpu")
    expected = model.encode(texts, normalize_embeddings=True)
    for vector, ref in zip(embedder.embed_documents(texts), expected, strict=True):
        assert cosine(vector, ref.tolist()) >= MIN_COSINE


@needs_model
def test_paraphrase_is_closer_than_unrelated(embedder: OnnxMiniLMEmbedder) -> None:
    query = embedder.embed_query("How do I change my password?")
    paraphrase, unrelated = embedder.embed_documents(
        ["Steps to reset the password of your account.", "The recipe needs two cups of flour."]
    )
    assert cosine(query, paraphrase) > cosine(query, unrelated) + 0.2


@needs_model
def test_vectors_are_unit_length_and_384_wide(embedder: OnnxMiniLMEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.model_id == "all-MiniLM-L6-v2"
    assert embedder.dimension == 384
    vectors = embedder.embed_documents(["one", "two words", "", "a much longer sentence " * 30])
    for vector in vectors:
        assert len(vector) == 384
        assert all(isinstance(x, float) for x in vector[:5])
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


@needs_model
def test_order_is_preserved_and_batching_does_not_change_vectors() -> None:
    assert MODELS is not None
    small_batches = OnnxMiniLMEmbedder.from_cache(MODELS, batch_size=4)
    # Varied lengths, so sorting by length inside the call reorders them; several batches.
    texts = [("word " * (i * 7 % 12)) + f"item {i}" for i in range(19)]
    together = small_batches.embed_documents(texts)
    for i in (0, 5, 11, 18):
        alone = small_batches.embed_query(texts[i])
        assert cosine(together[i], alone) > 0.99999
    reversed_vectors = small_batches.embed_documents(list(reversed(texts)))
    assert cosine(reversed_vectors[0], together[-1]) > 0.99999


@needs_model
def test_empty_input_gives_empty_output(embedder: OnnxMiniLMEmbedder) -> None:
    assert embedder.embed_documents([]) == []


@needs_model
def test_non_string_input_is_refused(embedder: OnnxMiniLMEmbedder) -> None:
    with pytest.raises(TypeError, match="text 1"):
        embedder.embed_documents(["fine", None])  # type: ignore[list-item]


@needs_model
def test_concurrent_calls_give_the_same_vectors(embedder: OnnxMiniLMEmbedder) -> None:
    texts = [f"concurrent sentence number {i} " + "pad " * i for i in range(10)]
    expected = embedder.embed_documents(texts)
    results: dict[int, list[list[float]]] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            results[n] = embedder.embed_documents(texts)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert len(results) == 4
    for got in results.values():
        for a, b in zip(got, expected, strict=True):
            assert cosine(a, b) > 0.99999


# ------------------------------------------------------------------ model preparation (make model)
def _fake_prepared(models: Path, *, version: str = "0.1.0", fmt: int | None = None) -> Path:
    from ragchat.adapters.local import model_prep

    folder = model_dir(models)
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"onnx")
    (folder / "tokenizer.json").write_text("{}")
    (folder / "reference.json").write_text("{}")
    manifest = {
        "format": model_prep.EXPORT_FORMAT if fmt is None else fmt,
        "source_version": version,
        "onnx_bytes": 4,
    }
    (folder / "model-int8.onnx").write_bytes(b"int8")
    manifest["int8"] = {"format": model_prep.INT8_FORMAT, "bytes": 4}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_prepared_cache_is_a_no_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragchat.adapters.local import model_prep

    folder = _fake_prepared(tmp_path)
    assert model_prep.is_prepared(folder, "0.1.0")
    assert model_prep.main(["--models-path", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "all-MiniLM-L6-v2 is ready" in out
    assert "model-int8.onnx is ready" in out
    assert (folder / "model.onnx").read_bytes() == b"onnx"  # untouched
    assert (folder / "model-int8.onnx").read_bytes() == b"int8"


def test_an_int8_model_of_another_format_or_size_is_made_again(tmp_path: Path) -> None:
    from ragchat.adapters.local import model_prep

    folder = _fake_prepared(tmp_path)
    assert model_prep.int8_ready(folder)
    (folder / "model-int8.onnx").write_bytes(b"int")
    assert not model_prep.int8_ready(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["int8"]["format"] = model_prep.INT8_FORMAT - 1
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "model-int8.onnx").write_bytes(b"int8")
    assert not model_prep.int8_ready(folder)


def test_stale_or_damaged_cache_is_not_prepared(tmp_path: Path) -> None:
    from ragchat.adapters.local import model_prep

    assert not model_prep.is_prepared(model_dir(tmp_path / "none"), "0.1.0")
    assert not model_prep.is_prepared(_fake_prepared(tmp_path / "old", version="0.0.9"), "0.1.0")
    assert not model_prep.is_prepared(_fake_prepared(tmp_path / "fmt", fmt=0), "0.1.0")
    truncated = _fake_prepared(tmp_path / "cut")
    (truncated / "model.onnx").write_bytes(b"on")
    assert not model_prep.is_prepared(truncated, "0.1.0")


# ------------------------------------------------------------------ the int8 model (EMBEDDER_PRECISION)
def _fixed_sample(reference: dict[str, Any]) -> list[str]:
    """The reference sentences, then every paragraph of the bundled sample documents."""
    samples = REPO / "layers" / "ragchat" / "ragchat" / "samples"
    paragraphs = [
        p.strip()
        for path in sorted(samples.glob("*.md"))
        for p in path.read_text(encoding="utf-8").split("\n\n")
        if len(p.strip()) > 20
    ]
    # Not the empty text: nothing ever embeds one (0.979 measured for it inside a batch, 0.983 alone).
    return [t for t in [*reference["sentences"], *paragraphs] if t.strip()]


@needs_model
def test_int8_agrees_with_fp32_on_every_text_of_a_fixed_sample(
    int8: OnnxMiniLMEmbedder, embedder: OnnxMiniLMEmbedder, reference: dict[str, Any]
) -> None:
    texts = _fixed_sample(reference)
    assert len(texts) > 50
    cosines = (int8.embed_array(texts) * embedder.embed_array(texts)).sum(axis=1)
    worst = int(cosines.argmin())
    assert cosines[worst] >= 0.98, (texts[worst], float(cosines[worst]))
    assert int8.precision == "int8"
    assert embedder.precision == "fp32"


@needs_model
def test_int8_ranks_a_paraphrase_above_an_unrelated_text(int8: OnnxMiniLMEmbedder) -> None:
    query = np.asarray(int8.embed_query("How do I change my password?"))
    paraphrase, unrelated = np.asarray(
        int8.embed_documents(
            ["Steps to reset the password of your account.", "The recipe needs two cups of flour."]
        )
    )
    assert query @ paraphrase > query @ unrelated + 0.2


def test_a_missing_int8_model_names_make_install(tmp_path: Path) -> None:
    folder = model_dir(tmp_path)
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"onnx")
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(
        ModelNotPreparedError, match=r"model-int8\.onnx missing\): run `make install`"
    ) as caught:
        OnnxMiniLMEmbedder.from_cache(tmp_path, precision="int8")
    # a cache prepared before the int8 model existed: the fp32 export is one setting away
    assert "EMBEDDER_PRECISION=fp32" in str(caught.value)
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="precision"):
        OnnxMiniLMEmbedder.from_cache(tmp_path, precision="int4")


@needs_model
def test_int8_vectors_depend_little_on_their_batch(int8: OnnxMiniLMEmbedder) -> None:
    """Dynamic quantization scales activations per call: a text embedded with others differs a
    little from the same text alone (fp32: identical), never by more than the fp32 tolerance."""
    texts = [("word " * (i * 7 % 12)) + f"item {i}" for i in range(19)]
    together = int8.embed_array(texts)
    alone = np.vstack([int8.embed_array([t]) for t in texts])
    assert float((together * alone).sum(axis=1).min()) >= 0.98


@needs_model
def test_the_default_settings_embed_with_fp32_and_int8_is_one_setting_away(tmp_path: Path) -> None:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    assert MODELS is not None
    env = {
        "RAGCHAT_DATA_DIR": str(tmp_path),
        "RAGCHAT_MODEL_DIR": str(MODELS),
        "RAGCHAT_CHAT_MODEL": "extractive",
    }
    containers = [
        Container(load_settings(env)),
        Container(load_settings({**env, "EMBEDDER_PRECISION": "int8"})),
    ]
    default, int8 = (c.embedder for c in containers)
    assert (default.precision, int8.precision) == ("fp32", "int8")  # type: ignore[attr-defined]
    text = "Ferns reproduce with spores rather than seeds."
    assert default.embed_query(text) != int8.embed_query(text)
    assert cosine(default.embed_query(text), int8.embed_query(text)) >= 0.98
    for c in containers:
        c.close()
