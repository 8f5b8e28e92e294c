"""Attack 8: data readable by other local users (``ragchat.db`` was 0644 in a 0755 data dir). The data
dir is made 0700 and the database and every blob 0600, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from ragchat.adapters.local.files import FileBlobStore
from ragchat.adapters.local.sqlite_store import SqliteDatabase
from ragchat.bootstrap import Container
from ragchat.config import load_settings


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0o000)  # the loosest umask: anything made with default modes is world-writable
    try:
        yield
    finally:
        os.umask(previous)


def test_the_data_dir_database_and_blobs_are_private_whatever_the_umask(
    tmp_path: Path, open_umask: None
) -> None:
    data = tmp_path / "data"
    container = Container(load_settings({"RAGCHAT_DATA_DIR": str(data), "RAGCHAT_CHAT_MODEL": "extractive"}))
    container.documents  # opens (creates) the database  # noqa: B018
    container.blobs.put("documents/local/d1/body.txt", b"secret body")
    container.counters.increment("k", ttl_seconds=60, now=0.0)  # a write: the WAL exists now
    assert _mode(data) == 0o700
    db_files = [p for p in data.iterdir() if p.name.startswith("ragchat.db")]
    assert {p.name for p in db_files} >= {"ragchat.db", "ragchat.db-wal"}
    for path in db_files:
        assert _mode(path) == 0o600, path
    blobs = [p for p in (data / "blobs").rglob("*")]
    assert blobs and all(_mode(p) == (0o700 if p.is_dir() else 0o600) for p in blobs), [
        (p, oct(_mode(p))) for p in blobs
    ]


def test_an_existing_world_readable_database_is_tightened(tmp_path: Path) -> None:
    data = tmp_path / "old"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    SqliteDatabase(data / "ragchat.db").close()
    os.chmod(data / "ragchat.db", 0o644)  # as an earlier version left it
    SqliteDatabase(data / "ragchat.db").close()
    assert _mode(data / "ragchat.db") == 0o600 and _mode(data) == 0o700


def test_the_upload_secret_is_private(tmp_path: Path, open_umask: None) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    blobs.presign_post("uploads/u/1/a.txt", content_type="text/plain", min_bytes=1, max_bytes=9,
                       expires_in=60, metadata={})  # fmt: skip
    assert _mode(tmp_path / "blobs" / ".upload-secret") == 0o600
    assert _mode(tmp_path / "blobs") == 0o700
