"""OCR with Tesseract (issue 45): the ``TextRecognizer`` of ``ragchat serve`` and ``ragchat ingest``.

The ``tesseract`` program (Debian's ``tesseract-ocr``, Homebrew's ``tesseract``; ``make install``
installs it when it can) is run as a subprocess, from the parsing child
(:mod:`ragchat.adapters.local.parse_process`), so it inherits the child's limits: its address space
(``PARSE_MEMORY_MB``) and CPU time (``PARSE_CPU_SECONDS``, by ``RLIMIT_CPU``); its wall-clock time is
the CPU budget left, after which it is killed. The picture goes in on standard input and the text
comes back on standard output: nothing is written to disk. One thread (``OMP_THREAD_LIMIT=1``): the
server's other work keeps its cores. The picture's header was checked first
(:func:`ragchat.domain.images.check_image`): no image bomb reaches the decoder.

Tesseract's plain-text output keeps the picture's lines as lines and puts a blank line between
blocks (paragraphs); the pages of a multi-page TIFF end with a form feed each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

from ragchat.domain.errors import ExtractionError
from ragchat.domain.file_errors import too_slow_to_read
from ragchat.domain.images import ImageInfo, OcrTooSlow

INSTALL = (
    "install it (Debian or Ubuntu: sudo apt-get install tesseract-ocr; macOS: brew install tesseract; "
    "or make install as root) and start ragchat again, or add the text itself"
)
#: the refusal of a picture where the ``tesseract`` program is not installed
TESSERACT_MISSING = (
    f"OCR (reading pictures and scanned pages) needs Tesseract, which is not installed here: {INSTALL}."
)


@dataclass
class TesseractOcr:
    """:class:`ragchat.ports.TextRecognizer` over the ``tesseract`` program (module docstring).
    Picklable: the parsing child gets its own copy."""

    languages: str = "eng"  # the ``OCR`` setting: Tesseract's ``-l`` (``eng+deu``)
    binary: str = "tesseract"
    engine: str = "tesseract"
    _missing: list[str | None] = field(default_factory=list, repr=False)  # the answer, once known

    def missing(self) -> str | None:
        if not self._missing:
            self._missing.append(self._check())
        return self._missing[0]

    def _check(self) -> str | None:
        path = shutil.which(self.binary)
        if path is None:
            return TESSERACT_MISSING
        try:
            listed = subprocess.run(
                [path, "--list-langs"], capture_output=True, timeout=30, check=False, env=_env()
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"OCR needs Tesseract, which does not start here ({exc}): {INSTALL}."
        have = {line.strip() for line in listed.stdout.decode("utf-8", "replace").splitlines()[1:]}
        lacking = [lang for lang in self.languages.split("+") if lang not in have]
        if lacking:
            packages = " ".join(f"tesseract-ocr-{lang.lower()}" for lang in lacking)
            return (
                f"OCR needs Tesseract's language data for {', '.join(lacking)}, which is not installed "
                f"(OCR={self.languages}): install {packages} and start ragchat again."
            )
        return None

    def refuses(self, image: ImageInfo, size: int) -> str | None:
        return None  # every format and size the header check lets through

    def read(self, image: bytes, content_type: str, seconds: float) -> list[str]:
        path = shutil.which(self.binary)
        if path is None:
            raise ExtractionError(TESSERACT_MISSING)
        command = [path, "stdin", "stdout", "-l", self.languages, "--psm", "3"]
        try:
            done = subprocess.run(command, input=image, capture_output=True, timeout=seconds, env=_env())
        except subprocess.TimeoutExpired:
            raise OcrTooSlow(too_slow_to_read(seconds)) from None
        except OSError as exc:
            raise ExtractionError(f"Tesseract could not be started to read the picture: {exc}.") from None
        if done.returncode != 0:
            raise ExtractionError(_failure(done.returncode, done.stderr, seconds))
        text = done.stdout.decode("utf-8", "replace")
        pages = text.split("\f")
        if len(pages) > 1 and not pages[-1].strip():
            pages.pop()  # every page ends with a form feed
        return pages


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TESSDATA_PREFIX")}
    env["OMP_THREAD_LIMIT"] = "1"
    return env


def _failure(code: int, stderr: bytes, seconds: float) -> str:
    """What Tesseract's exit says; stopped by the CPU limit (``SIGXCPU``) or killed: :class:`OcrTooSlow`."""
    import signal

    if code == -signal.SIGXCPU:  # the CPU limit inherited from the parsing child
        raise OcrTooSlow(too_slow_to_read(seconds))
    if code in (-signal.SIGKILL, -signal.SIGABRT):  # the memory limit (an allocation failed), or killed
        return (
            f"OCR could not read the picture: Tesseract was stopped (signal {-code}), most likely out "
            "of memory (PARSE_MEMORY_MB). Scale the picture down and upload it again."
        )
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    said = lines[-1] if lines else f"exit status {code}"
    return f"OCR could not read the picture (Tesseract: {said[:200]})."
