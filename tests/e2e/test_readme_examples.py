"""Every shell example in README.md runs as written against a real ``ragchat serve --samples``.

Blocks are run in order (later ones use what earlier ones added), each with ``bash -e -o pipefail``
in a scratch folder that has the repository's ``.venv`` (so ``source .venv/bin/activate`` works) and
with ``RAGCHAT_DATA_DIR`` pointing at the server's data, the way a reader's second terminal would be.
``http://127.0.0.1:8000`` becomes the test server's address. A block is skipped only when the line
before its fence says so, with the reason: ``<!-- doc-test: skip (needs make) -->`` (or AWS).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port, model_ready, models_path, stop

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SHELLS = ("bash", "sh", "shell", "console")
SKIP = re.compile(r"<!--\s*doc-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->")
ALLOWED_SKIPS = ("needs make", "needs AWS")
# What a reader must see from a block, beyond it succeeding (a substring of the block → of its output).
EXPECTED = {
    'ragchat ask "When is the office open on Saturdays?"': "10:00",
    "curl -s -H \"$AUTH\" 'http://127.0.0.1:8000/?text=When+is+the+office+open+on+Saturdays%3F'": "10:00",
    'ragchat ask "How are citations checked?"': "[1]",
    "ragchat chat --persona teacher": "assistant>",
}


@dataclass(frozen=True)
class Block:
    line: int
    code: str
    skip: str | None  # the reason, when the README marks the block as not runnable here


def shell_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w+)?\s*$", lines[i])
        if fence is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if fence.group(1) in SHELLS:
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            mark = SKIP.search(before)
            blocks.append(Block(i + 1, "\n".join(lines[i + 1 : end]), mark.group("reason") if mark else None))
        i = end + 1
    return blocks


def test_the_readme_marks_what_it_does_not_run() -> None:
    blocks = shell_blocks(README.read_text(encoding="utf-8"))
    assert len([b for b in blocks if b.skip is None]) >= 3
    assert all(b.skip in ALLOWED_SKIPS for b in blocks if b.skip), [b.skip for b in blocks]


@dataclass
class Served:
    url: str
    env: dict[str, str]
    workdir: Path


def _get_json(url: str, data: Path) -> object:
    """GET with the token the server made for its run, read from its file as the README does."""
    token = (data / "serve.token").read_text(encoding="ascii").strip()
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    models = models_path()
    if not model_ready(models):
        pytest.skip(f"the MiniLM model is not prepared in {models} (run `make model`)")
    root = tmp_path_factory.mktemp("readme")
    workdir = root / "reader"
    workdir.mkdir()
    (workdir / ".venv").symlink_to(Path(sys.executable).parents[1])
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "RAGCHAT_API_TOKEN")}
    data = workdir / ".ragchat"  # where `make run` keeps it, so the README's `.ragchat/serve.token` is it
    env.update(
        RAGCHAT_DATA_DIR=str(data),
        RAGCHAT_MODEL_DIR=str(models),
        RAGCHAT_CHAT_MODEL="extractive",
        COLUMNS="100",
    )
    port = free_port()
    log = root / "server.log"
    cli = Path(sys.executable).with_name("ragchat")
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(cli), "serve", "--host", "127.0.0.1", "--port", str(port), "--samples"],
            env=env,
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:  # up, and the samples ingested (what `make run` leaves a reader with)
            if proc.poll() is not None:
                raise AssertionError(f"ragchat serve exited:\n{log.read_text()}")
            try:
                items = _get_json(f"{url}/documents", data)["items"]  # type: ignore[index]
                if items and all(d["status"] == "READY" for d in items):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the samples did not become READY:\n{log.read_text()}")
            time.sleep(0.2)
        yield Served(url, env, workdir)
    finally:
        stop(proc)


def test_every_readme_example_runs_as_written(served: Served) -> None:
    ran = []
    for block in shell_blocks(README.read_text(encoding="utf-8")):
        if block.skip:
            continue
        code = block.code.replace("http://127.0.0.1:8000", served.url)
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", code],
            cwd=served.workdir,
            env=served.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        where = f"README.md line {block.line}:\n{block.code}\n--- stdout\n{done.stdout}"
        where += f"\n--- stderr\n{done.stderr}"
        assert done.returncode == 0, where
        assert not re.search(r'"error"\s*:\s*"', done.stdout) and "error:" not in done.stderr, where
        for snippet, shown in EXPECTED.items():
            if snippet in block.code:
                assert shown in done.stdout, f"expected {shown!r}\n{where}"
        ran.append(block.line)
    assert len(ran) >= 3
