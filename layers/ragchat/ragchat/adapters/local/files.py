"""``BlobStore`` on the local disk: one file per key under a root folder (``<data dir>/blobs``).

Keys are ``/``-separated relative paths (``documents/<owner>/<id>/body``). A key that is empty,
absolute, contains ``.``/``..``/empty segments, a backslash or a NUL byte is rejected with
``ValueError`` before anything touches the disk, so no key can reach outside the root. Writes are
atomic: the data goes to a temporary file under ``<root>/.tmp`` and is renamed into place, so a
reader sees the old or the new content, never half a file.

Direct uploads (``presign_post``): the "presigned POST" is a route of the local server itself,
``/uploads/local/<token>``, where the token is the grant signed with a secret kept in
``<root>/.upload-secret`` (made on first use, shared by every process on the same data dir).

Private to their user whatever the umask (docs/security.md): folders are made 0700
(:func:`private_dir`) and files 0600 (``mkstemp``, renamed into place).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import tempfile
from pathlib import Path

from ragchat.domain.clock import Clock, system_clock
from ragchat.domain.uploads import PresignedUpload, UploadGrant, sign_grant, verify_grant

_TMP = ".tmp"
_SECRET = ".upload-secret"
LOCAL_UPLOAD_PATH = "/uploads/local/"


def private_dir(path: Path) -> Path:
    """``path`` (and missing parents) as a folder only its user can open: made 0700, and tightened
    to 0700 if it already existed (a umask cannot loosen it)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    return path


def _make_dirs(root: Path, directory: Path) -> None:
    """Each missing folder from ``root`` down to ``directory`` made 0700 (``mkdir(parents=True)``
    would give the parents the umask's default)."""
    for part in [*reversed(directory.relative_to(root).parents), directory.relative_to(root)]:
        if str(part) != ".":
            (root / part).mkdir(exist_ok=True, mode=0o700)


def private_file(path: Path) -> Path:
    """``path`` created if missing, and set 0600 (only its user may read or write it)."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o600)
    return path


# Passes of _remove_tree over a folder a writer may still be adding to (the ingestion worker writing
# a document's batches while the document is deleted): each pass removes what the last one missed.
_REMOVE_PASSES = 5


def _remove_tree(directory: Path) -> int:
    """Delete ``directory`` and everything in it; how many files went. Files that vanish meanwhile
    are fine and files that appear meanwhile are removed by the next pass; a writer still adding
    after :data:`_REMOVE_PASSES` passes leaves the folder (the ingestion worker notices the document is
    gone and removes its batches itself). Never raises "Directory not empty" (issue 30, finding 8)."""
    deleted = 0
    for _ in range(_REMOVE_PASSES):
        for sub in sorted(directory.rglob("*"), reverse=True):
            try:
                if sub.is_dir() and not sub.is_symlink():
                    os.rmdir(sub)
                else:
                    sub.unlink()
                    deleted += 1
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
        try:
            os.rmdir(directory)
            return deleted
        except FileNotFoundError:
            return deleted
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    return deleted


class FileBlobStore:
    def __init__(self, root: str | Path, *, clock: Clock = system_clock) -> None:
        self.root = Path(root)
        self.clock = clock

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
        if parts[0] in (_TMP, _SECRET):
            raise ValueError(f"blob keys may not start with {parts[0]}: {key!r}")
        return parts

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*self._segments(key))

    # ------------------------------------------------------------------ BlobStore
    def put(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> None:
        target = self._path(key)
        private_dir(self.root)
        _make_dirs(self.root, target.parent)
        tmp_dir = self.root / _TMP
        _make_dirs(self.root, tmp_dir)
        fd, tmp_name = tempfile.mkstemp(dir=tmp_dir, prefix="blob-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.replace(tmp_name, target)
            except FileNotFoundError:  # its folder was removed meanwhile (a delete_prefix): make it again
                _make_dirs(self.root, target.parent)
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
            if entry in (self.root / _TMP, self.root / _SECRET):
                continue
            if entry.is_dir() and not entry.is_symlink():
                deleted += _remove_tree(entry)
            else:
                with contextlib.suppress(FileNotFoundError):  # deleted meanwhile by another caller
                    entry.unlink()
                    deleted += 1
        self._prune(directory)
        return deleted

    def link(self, key: str, *, content_type: str, expires_in: int) -> None:
        """No links: ``ragchat serve`` has no response size limit and sends a body inline."""
        if not self._path(key).is_file():
            raise KeyError(key)
        return None

    def presign_post(
        self,
        key: str,
        *,
        content_type: str,
        min_bytes: int,
        max_bytes: int,
        expires_in: int,
        metadata: dict[str, str],
    ) -> PresignedUpload:
        """A relative URL on the local server; the form fields mirror S3's (``key``, ``Content-Type``,
        ``x-amz-meta-*``) so one client works against both."""
        self._segments(key)
        grant = UploadGrant(
            key=key,
            content_type=content_type,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            expires=self.clock() + expires_in,
            metadata=dict(metadata),
        )
        fields = {"key": key, "Content-Type": content_type}
        fields.update({f"x-amz-meta-{name}": value for name, value in metadata.items()})
        return PresignedUpload(url=LOCAL_UPLOAD_PATH + sign_grant(grant, self._secret()), fields=fields)

    def upload_grant(self, token: str) -> UploadGrant:
        return verify_grant(token, self._secret(), self.clock())

    def _secret(self) -> bytes:
        path = self.root / _SECRET
        try:
            return path.read_bytes()
        except FileNotFoundError:
            pass
        private_dir(self.root)
        fd, tmp_name = tempfile.mkstemp(dir=self.root, prefix=".secret-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(32))
            os.link(tmp_name, path)  # atomic; fails if another process made it first
        except FileExistsError:
            pass
        finally:
            Path(tmp_name).unlink(missing_ok=True)
        return path.read_bytes()

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
