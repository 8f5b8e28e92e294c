"""``BlobStore`` on the local disk: one file per key under a root folder (``<data dir>/blobs``).

Keys are ``/``-separated relative paths (``documents/<owner>/<id>/body``). A key that is empty,
absolute, contains ``.``/``..``/empty segments, a backslash or a NUL byte is rejected with
``ValueError`` before anything touches the disk, so no key can reach outside the root. Writes are
atomic: the data goes to a temporary file under ``<root>/.tmp`` and is renamed into place, so a
reader sees the old or the new content, never half a file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_TMP = ".tmp"


class FileBlobStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # ------------------------------------------------------------------ key → path
    @staticmethod
    def _segments(key: str, *, allow_trailing_slash: bool = False) -> list[str]:
        if not isinstance(key, str) or not key:
            raise ValueError("blob key must be a non-empty string")
        if "\\" in key or "\x00" in key:
            raise ValueError(f"invalid blob key: {key!r}")
        if key.startswith("/"):
            raise ValueError(f"blob key must be relative: {key!r}")
        body = key[:-1] if allow_trailing_slash and key.endswith("/") else key
        parts = body.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"invalid blob key: {key!r}")
        if parts[0] == _TMP:
            raise ValueError(f"blob keys may not start with {_TMP}/: {key!r}")
        return parts

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*self._segments(key))

    # ------------------------------------------------------------------ BlobStore
    def put(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp_dir = self.root / _TMP
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=tmp_dir, prefix="blob-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp_name, target)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise KeyError(key) from None

    def get_with_metadata(self, key: str) -> tuple[bytes, dict[str, str]]:
        """Files keep no user metadata."""
        return self.get(key), {}

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            path.unlink()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return
        self._prune(path.parent)

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key starting with ``prefix`` (a string prefix, as in S3); returns how many."""
        if prefix == "":
            raise ValueError("refusing to delete every blob: give a non-empty prefix")
        if prefix.endswith("/"):
            directory = self.root.joinpath(*self._segments(prefix, allow_trailing_slash=True))
            name_prefix = ""
        else:
            parts = self._segments(prefix)
            directory = self.root.joinpath(*parts[:-1])
            name_prefix = parts[-1]
        if not directory.is_dir():
            return 0
        deleted = 0
        for entry in list(directory.iterdir()):
            if not entry.name.startswith(name_prefix):
                continue
            if entry == self.root / _TMP:
                continue
            if entry.is_dir() and not entry.is_symlink():
                for sub in sorted(entry.rglob("*"), reverse=True):
                    if sub.is_dir() and not sub.is_symlink():
                        sub.rmdir()
                    else:
                        sub.unlink()
                        deleted += 1
                entry.rmdir()
            else:
                entry.unlink()
                deleted += 1
        self._prune(directory)
        return deleted

    def _prune(self, directory: Path) -> None:
        """Remove now-empty folders between ``directory`` and the root."""
        root = self.root.resolve()
        current = directory
        while current.resolve() != root and root in current.resolve().parents:
            try:
                current.rmdir()
            except OSError:
                return
            current = current.parent
