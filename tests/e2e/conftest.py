"""``ragchat serve`` as a real subprocess on a free port with a throwaway data directory.

The server needs the prepared MiniLM model (``make model``): ``RAGCHAT_MODEL_DIR`` if set, else the
repository's ``.ragchat/models``. Without it the e2e tests are skipped with that reason.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TOKEN = "e2e-secret-token"
# ``run_server(token=PER_RUN)``: no RAGCHAT_API_TOKEN, as ``make run``: the server makes a token for its
# run; the test reads it where its user's commands do (``<data dir>/serve.token``).
PER_RUN = "per-run"


def models_path() -> Path:
    """The model cache every command uses (``RAGCHAT_MODEL_DIR``, else the per-user cache)."""
    from ragchat.config import load_settings

    try:
        return load_settings().models_path
    except Exception:  # an unrelated bad variable in the environment
        env = os.environ.get("RAGCHAT_MODEL_DIR")
        return Path(env) if env else REPO / ".ragchat" / "models"


def model_ready(path: Path) -> bool:
    """The model files the default settings load (``EMBEDDER_PRECISION``'s) are prepared."""
    from ragchat.adapters.local.onnx_embedder import MODEL_FILES, TOKENIZER_FILE, model_dir
    from ragchat.config import load_settings

    try:
        precision = load_settings().embedder_precision
    except Exception:  # an unrelated bad variable in the environment
        precision = load_settings({}).embedder_precision
    folder = model_dir(path)
    needed = (MODEL_FILES[precision], TOKENIZER_FILE)
    return all((folder / name).is_file() for name in needed)


def stop(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within 20 s."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:  # pragma: no cover
        proc.kill()
        proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Server:
    url: str
    token: str | None
    log: Path
    proc: subprocess.Popen[Any] | None = None  # the ``ragchat serve`` process (to kill it)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        token: str | bool | None = True,
    ) -> Reply:
        hdrs = dict(headers or {})
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        use = self.token if token is True else (token or None)
        if use:
            hdrs["Authorization"] = f"Bearer {use}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return Reply(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read())

    def wait_document(self, doc_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """Poll the document's status until READY/FAILED (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            doc = self.request("GET", f"/documents/{doc_id}").json()
            if doc["status"] in ("READY", "FAILED"):
                return dict(doc)
            if time.monotonic() > deadline:
                raise AssertionError(f"{doc_id} still {doc['status']} after {timeout} s")
            time.sleep(0.05)


@contextmanager
def run_server(
    data_dir: Path, *, token: str | None = TOKEN, env: dict[str, str] | None = None, port: int | None = None
) -> Iterator[Server]:
    """``ragchat serve`` on a free port over ``data_dir`` (``token``: its ``RAGCHAT_API_TOKEN``, or
    ``PER_RUN`` for the token the server makes, or ``None`` for none at all: ``--insecure-no-auth``;
    ``env``: more variables; ``port``: the one of an earlier run, to restart it), stopped on exit."""
    models = models_path()
    if not model_ready(models):
        pytest.skip(f"the MiniLM model is not prepared in {models} (run `make install`)")
    port = port or free_port()
    inherited = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    full_env = {
        **inherited,
        "RAGCHAT_DATA_DIR": str(data_dir),
        "RAGCHAT_MODEL_DIR": str(models),
        "RAGCHAT_CHAT_MODEL": "extractive",
        "MAX_BODY_BYTES": str(2 * 1024 * 1024),
        **(env or {}),  # may set ANTHROPIC_API_KEY (a test's fake Claude)
    }
    full_env.pop("RAGCHAT_API_TOKEN", None)
    if token and token != PER_RUN:
        full_env["RAGCHAT_API_TOKEN"] = token
    args = [] if token else ["--insecure-no-auth"]
    log = data_dir / "server.log"
    cli = Path(sys.executable).with_name("ragchat")
    with log.open("ab") as out:  # appended: a restarted server keeps the earlier log
        proc = subprocess.Popen(
            [str(cli), "serve", "--host", "127.0.0.1", "--port", str(port), *args],
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=data_dir,
        )
    srv = Server(f"http://127.0.0.1:{port}", None if token == PER_RUN else token, log, proc)
    try:
        deadline = time.monotonic() + 180  # a cold start on a loaded 2-core machine
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"ragchat serve exited early:\n{log.read_text()}")
            try:
                if srv.request("GET", "/health", token=False).status == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"ragchat serve did not come up:\n{log.read_text()}")
            time.sleep(0.1)
        if token == PER_RUN:  # written before the server answers
            srv.token = (data_dir / "serve.token").read_text(encoding="ascii").strip()
        yield srv
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with run_server(tmp_path_factory.mktemp("ragchat-e2e")) as srv:
        yield srv
