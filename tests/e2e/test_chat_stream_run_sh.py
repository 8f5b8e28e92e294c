"""``functions/chat_stream/run.sh`` (the Lambda Web Adapter's startup command) as a real subprocess:
local backend in a throwaway data directory, waited on through ``/health`` like the adapter's readiness
check, then one streamed chat turn sent the way the adapter sends it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, Server, free_port, model_ready, models_path, stop

pytestmark = pytest.mark.e2e

OWNER = "cognito-sub-7f3a"
NOTE = (
    "Honey bees communicate the direction of flowers with the waggle dance. The angle of the dance "
    "relative to vertical shows the direction of the food relative to the sun."
)


def test_run_sh_serves_a_streamed_turn(tmp_path: Path) -> None:
    if not model_ready(models_path()):
        pytest.skip(f"the MiniLM model is not prepared in {models_path()} (run `make model`)")
    data_dir = tmp_path / "data"
    env = {
        **os.environ,
        "RAGCHAT_DATA_DIR": str(data_dir),
        "RAGCHAT_MODEL_DIR": str(models_path()),
        "RAGCHAT_CHAT_MODEL": "extractive",
        "RAGCHAT_LOCAL_USER": OWNER,  # `ragchat ingest` stores the note under the caller's id
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "LAMBDA_RUNTIME_DIR": str(tmp_path / "runtime"),  # what the Lambda runtime sets; empty here
    }
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("PYTHONPATH", None)
    (tmp_path / "bees.txt").write_text(NOTE)
    cli = Path(sys.executable).with_name("ragchat")
    done = subprocess.run(
        [str(cli), "ingest", str(tmp_path / "bees.txt")], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr

    port = free_port()
    log = tmp_path / "chat_stream.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(REPO / "functions" / "chat_stream" / "run.sh")],
            env={**env, "AWS_LWA_PORT": str(port), "RAGCHAT_LOCAL_USER": "never-used"},
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    srv = Server(f"http://127.0.0.1:{port}", None, log)
    context = {
        "requestId": "apigw-e2e-1",
        "stage": "Prod",
        "resourcePath": "/chat/conversations/{id}/messages",
        "identity": {"sourceIp": "198.51.100.20"},
        "authorizer": {"claims": {"sub": OWNER}},
    }
    adapter_headers = {
        "x-amzn-request-context": json.dumps(context),
        "x-amzn-lambda-context": json.dumps({"request_id": "lambda-e2e-1"}),
    }
    try:
        deadline = time.monotonic() + 60
        while True:  # the adapter's readiness check
            if proc.poll() is not None:
                raise AssertionError(f"run.sh exited early:\n{log.read_text()}")
            try:
                if srv.request("GET", "/health").status == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"run.sh did not come up:\n{log.read_text()}")
            time.sleep(0.05)

        assert srv.request("POST", "/chat/conversations", body={}).status == 401  # no context
        conv = srv.request("POST", "/chat/conversations", body={}, headers=adapter_headers).json()["id"]
        res = srv.request(
            "POST",
            f"/chat/conversations/{conv}/messages",
            body={"content": "What does the honey bees' waggle dance tell about flowers?"},
            headers={**adapter_headers, "Accept": "text/event-stream"},
        )
        assert res.status == 200 and res.headers["content-type"].startswith("text/event-stream")
        assert res.headers["x-request-id"] == "apigw-e2e-1"
        raw = res.body.decode()
        frames = [f for f in raw.split("\n\n") if f.strip()]
        names = [f.split("\n")[0].removeprefix("event: ") for f in frames]
        assert names[0] == "answer_start" and names[-2:] == ["sources", "answer_end"], raw
        assert "answer_delta" in names
        assert "apigw-e2e-1" in log.read_text()  # logs on stdout, correlated by the API Gateway request id
    finally:
        stop(proc)
    assert proc.returncode == 0, log.read_text()  # SIGTERM is a clean shutdown
