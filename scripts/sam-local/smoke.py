"""Check the functions in real Lambda containers (``sam local``) on the LOCAL backend.

    python scripts/sam-local/smoke.py invoke|api --template .aws-sam/local/build/template.yaml \
        --env-vars env.local.json

``invoke``: ``sam local invoke --skip-pull-image`` of every event in ``events/`` (each in a fresh
container, so each sees an empty store) and a check of each response. ``api``: ``sam local
start-api`` on 127.0.0.1 and a few requests: the open health route, a refused unsigned request, then
signed in with the local token (``env.local.json``): a note, a question it answers, a chat turn.
Run by ``scripts/sam_local.sh``; exits 1 with the failures listed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SAM = ROOT / ".venv-sam" / "bin" / "sam"
Check = Callable[[Any], "str | None"]
SKIPPED_FUNCTION = "ChatStreamFunction"
# Not Lambda events: the state machine's input (ingestion starts with the split step).
NOT_LAMBDA_EVENTS = {"ingest_execution_input.json"}


def api(status: int, needle: str | None = None) -> Check:
    """An API Gateway proxy response with ``status`` (and ``needle`` somewhere in its body)."""

    def check(response: Any) -> str | None:
        if not isinstance(response, dict) or "statusCode" not in response:
            return f"not an API Gateway response: {str(response)[:300]}"
        body = str(response.get("body") or "")
        if response["statusCode"] != status:
            return f"status {response['statusCode']} (want {status}): {body[:300]}"
        if needle and needle not in body:
            return f"{needle!r} not in the body: {body[:300]}"
        return None

    return check


def result(needle: str | None = None, **expected: Any) -> Check:
    """A plain (non-HTTP) result holding ``expected`` key/values (and ``needle`` somewhere)."""

    def check(response: Any) -> str | None:
        if not isinstance(response, dict) or "errorType" in response:
            return f"want a result with {expected}, got {str(response)[:300]}"
        wrong = {k: response.get(k) for k, v in expected.items() if response.get(k) != v}
        if wrong or (needle and needle not in json.dumps(response)):
            return f"want {expected} and {needle!r}, got {str(response)[:300]}"
        return None

    return check


def error(*error_types: str) -> Check:
    """The function raised one of ``error_types`` (what the state machine's Catch / Lambda's retry see)."""

    def check(response: Any) -> str | None:
        got = response.get("errorType") if isinstance(response, dict) else None
        return None if got in error_types else f"want error {error_types}, got {str(response)[:300]}"

    return check


# event file -> (function, expected response). Each runs against an empty local store.
CASES: dict[str, tuple[str, Check]] = {
    "health_get.json": ("WebUiFunction", api(200, '"status"')),
    # accepted; ingestion runs on (the local backend's inline pipeline)
    "notes_post.json": ("NotesApiFunction", api(202, '"PENDING"')),
    "machine_notes_post.json": ("NotesApiFunction", api(202, '"PENDING"')),
    "documents_list.json": ("NotesApiFunction", api(200, '"items"')),
    "ask_get.json": ("NotesApiFunction", api(200)),
    "conversation_create.json": ("ChatApiFunction", api(201, "Trip planning")),
    # chat_stream's route is served by ChatApiFunction locally; the conversation does not exist
    "message_post.json": ("ChatApiFunction", api(404)),
    "ingest_split.json": ("IngestStepsFunction", error("NotFound")),
    "ingest_embed_index.json": ("IngestStepsFunction", error("NotFound")),
    "ingest_finalize.json": ("IngestStepsFunction", error("NotFound")),
    "ingest_fail.json": ("IngestStepsFunction", result(status="FAILED", error="Bedrock embedding failed")),
    # the reconciler (EventBridge: a run ended TIMED_OUT); its document is not in the empty store
    "ingest_execution_timed_out.json": ("IngestStepsFunction", result(status="UNCHANGED")),
    # The local backend reads uploads from its file store: in a fresh container the object is not
    # there, so the trigger reports it rejected (a permanent problem: no retry) and ingests nothing.
    "s3_upload_put.json": ("S3IngestFunction", result("no longer exists", accepted=[])),
}


def sam(*args: str, **kwargs: Any) -> Any:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1"}
    env.setdefault("AWS_REGION", "us-east-1")
    return subprocess.run([str(SAM), *args], env=env, cwd=ROOT, **kwargs)


def invoke(template: Path, env_vars: Path, image: str, function: str, event: Path) -> Any:
    proc = sam(
        "local", "invoke", function, "--template", str(template), "--env-vars", str(env_vars),
        "--event", str(event), "--skip-pull-image", "--invoke-image", image,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    try:
        return json.loads(lines[-1]) if lines else {"errorType": "NoOutput", "stderr": proc.stderr[-2000:]}
    except json.JSONDecodeError:
        return {"errorType": "NotJSON", "stdout": proc.stdout[-2000:], "stderr": proc.stderr[-2000:]}


def run_invokes(template: Path, env_vars: Path, image: str) -> list[str]:
    """Every event, ``SAM_LOCAL_JOBS`` (default 2) at a time; a line per event as it finishes."""
    events = sorted(p for p in (ROOT / "events").glob("*.json") if p.name not in NOT_LAMBDA_EVENTS)
    failures = [f"{e.name}: no expected response in smoke.py CASES" for e in events if e.name not in CASES]

    def one(event: Path) -> tuple[str, str | None]:
        function, check = CASES[event.name]
        started = time.monotonic()
        problem = check(invoke(template, env_vars, image, function, event))
        took = time.monotonic() - started
        print(f"  {'FAIL' if problem else 'ok  '} {event.name} -> {function} ({took:.1f} s)", flush=True)
        return f"{event.name} ({function})", problem

    jobs = max(1, int(os.environ.get("SAM_LOCAL_JOBS", "2")))
    known = [e for e in events if e.name in CASES]
    # The first invocation runs alone: `sam local` builds its own image on top of the runtime image
    # the first time, and two invocations racing to build it made one fail ("image already exists").
    outcomes = [one(known[0])] if known else []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes += list(pool.map(one, known[1:]))
    failures += [f"{label}: {problem}" for label, problem in outcomes if problem]
    print(f"  skipped {SKIPPED_FUNCTION}: its Lambda Web Adapter layer is a remote layer `sam local`")
    print("  cannot fetch without AWS credentials; its route is served by ChatApiFunction locally.")
    return failures


def request(base: str, method: str, path: str, token: str | None = None, body: Any = None) -> tuple[int, Any]:
    """One HTTP request; (status, parsed JSON body or text)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=180) as resp:
            status, raw = resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read().decode()
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_listening(port: int, proc: subprocess.Popen[str], deadline_s: float = 180) -> None:
    """``start-api`` is ready when it accepts connections (it starts no container before a request)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"sam local start-api exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"sam local start-api did not listen on {port} within {deadline_s:.0f} s")


def wait_for_status(base: str, path: str, token: str, deadline_s: float = 120) -> tuple[int, Any]:
    """Poll a document until its ingestion (inline, in the function's container) leaves PENDING."""
    end = time.monotonic() + deadline_s
    while True:
        got = request(base, "GET", path, token)
        state = got[1].get("status") if isinstance(got[1], dict) else None
        if got[0] != 200 or state not in ("PENDING", "PROCESSING") or time.monotonic() > end:
            return got
        time.sleep(1)


def api_requests(base: str, token: str) -> list[str]:
    """The smoke requests; a list of what went wrong."""
    failures: list[str] = []

    def expect(label: str, got: tuple[int, Any], status: int, needle: str | None = None) -> Any:
        ok = got[0] == status and (needle is None or needle in json.dumps(got[1]))
        print(f"  {'ok  ' if ok else 'FAIL'} {label} -> {got[0]}", flush=True)
        if not ok:
            failures.append(f"{label}: want {status} {needle or ''}, got {got[0]} {str(got[1])[:300]}")
        return got[1]

    expect("GET /health (open)", request(base, "GET", "/health"), 200, '"status"')
    expect("GET /notes without a token", request(base, "GET", "/notes"), 401)
    expect("GET /notes with a wrong token", request(base, "GET", "/notes", "not-the-token"), 403)
    note = {"title": "Eiffel Tower", "text": "The Eiffel Tower is 330 metres tall. It opened in 1889."}
    posted = expect("POST /notes (signed in)", request(base, "POST", "/notes", token, note), 202, "PENDING")
    doc = f"/documents/{posted.get('documentId') if isinstance(posted, dict) else None}"
    status = wait_for_status(base, doc, token)
    expect(f"GET {doc} until ingested", status, 200, '"READY"')
    expect("GET /notes", request(base, "GET", "/notes", token), 200, "Eiffel Tower")
    ask = "/?text=How%20tall%20is%20the%20Eiffel%20Tower%3F"
    expect("GET /?text=... (answered from the note)", request(base, "GET", ask, token), 200, "330 metres")
    conv = expect(
        "POST /chat/conversations",
        request(base, "POST", "/chat/conversations", token, {"title": "Smoke"}),
        201,
    )
    conv_id = conv.get("id") if isinstance(conv, dict) else None
    turn = {"content": "Hello?", "messageId": "smoke-0001"}
    path = f"/chat/conversations/{conv_id}/messages"
    expect("POST .../messages (ChatApiFunction locally)", request(base, "POST", path, token, turn), 200)
    return failures


def run_api(template: Path, env_vars: Path, image: str) -> list[str]:
    token = json.loads(env_vars.read_text())["Parameters"]["RAGCHAT_API_TOKEN"]
    port = free_port()
    log = (ROOT / ".aws-sam" / "local" / "start-api.log").open("w")
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1"}
    proc = subprocess.Popen(
        [str(SAM), "local", "start-api", "--template", str(template), "--env-vars", str(env_vars),
         "--skip-pull-image", "--invoke-image", image, "--host", "127.0.0.1", "--port", str(port),
         "--warm-containers", "LAZY"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until_listening(port, proc)
        return api_requests(f"http://127.0.0.1:{port}", token)
    except RuntimeError as exc:
        return [f"{exc} (see .aws-sam/local/start-api.log)"]
    finally:
        stop(proc)
        log.close()


def stop(proc: subprocess.Popen[str]) -> None:
    """Ctrl-C (``start-api`` then removes its warm containers), harder if it does not stop."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["invoke", "api"])
    parser.add_argument("--template", type=Path, required=True)
    parser.add_argument("--env-vars", type=Path, default=ROOT / "env.local.json")
    parser.add_argument("--invoke-image", required=True, help="the runtime image (sam_local.sh)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    what = "sam local invoke of events/*.json" if args.what == "invoke" else "sam local start-api"
    print(f"sam-local: {what}", flush=True)
    run = run_invokes if args.what == "invoke" else run_api
    failures = run(args.template.resolve(), args.env_vars.resolve(), args.invoke_image)
    print(f"sam-local: {args.what}: {len(failures)} failure(s) in {time.monotonic() - started:.0f} s")
    for failure in failures:
        print(f"  - {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
