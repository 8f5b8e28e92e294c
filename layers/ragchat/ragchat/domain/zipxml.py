"""Reading the insides of Office and e-book files safely: a zip archive and the XML parts in it
(docs/ingestion.md, docs/security.md). Standard library only (``zipfile``, ``pyexpat``).

A .docx, .pptx, .xlsx, .odt or .epub file is a zip of XML parts. A hostile one can be small on the
wire and huge inside; each is refused with an :class:`ExtractionError` (a 400 at intake, ``FAILED``
in the pipeline) that says which limit it passed:

- a zip bomb: more than :data:`MAX_ENTRIES` entries, more than :data:`MAX_TOTAL_BYTES` uncompressed
  in all, a part over :data:`MAX_PART_BYTES`, or a part that inflates more than
  :data:`MAX_RATIO` times its compressed size (past the first :data:`RATIO_GRACE_BYTES`). The sizes
  the archive declares are checked first, and the bytes actually inflated are counted while reading
  (a lying header stops at the limit, not after it);
- an XML bomb: any ``<!DOCTYPE`` or entity declaration is refused (these formats never need one,
  and entity expansion, "billion laughs", and external entities both start there), as is element
  nesting deeper than :data:`MAX_XML_DEPTH`.

XML is parsed by expat (no recursion: depth costs nothing until the tree is walked) into an
``ElementTree`` whose tags and attribute names are local names (``w:p`` → ``p``).
"""

from __future__ import annotations

import io
import zipfile
import zlib
from typing import IO
from xml.etree import ElementTree as ET
from xml.parsers import expat

from ragchat.domain.errors import ExtractionError

MAX_ENTRIES = 10_000
MAX_PART_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_RATIO = 200
RATIO_GRACE_BYTES = 1024 * 1024
MAX_XML_DEPTH = 256
_READ = 1024 * 1024


def _refuse(what: str, reason: str) -> ExtractionError:
    return ExtractionError(f"Could not read the {what}: {reason}.")


class SafeZip:
    """A zip archive opened with its central directory checked against the limits above."""

    def __init__(self, data: bytes, what: str) -> None:
        self.what = what
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
            raise _refuse(what, f"it is not a valid zip archive ({exc})") from exc
        if len(infos) > MAX_ENTRIES:
            raise _refuse(what, f"it holds {len(infos)} parts (at most {MAX_ENTRIES}): a zip bomb?")
        total = sum(i.file_size for i in infos)
        if total > MAX_TOTAL_BYTES:
            raise _refuse(what, f"it unpacks to {total} bytes (at most {MAX_TOTAL_BYTES}): a zip bomb?")
        for info in infos:
            self._check_size(info.filename, info.file_size, info.compress_size)
        self.names = {i.filename for i in infos}
        self.read_bytes = 0

    def _check_size(self, name: str, size: int, packed: int) -> None:
        if size > MAX_PART_BYTES:
            raise _refuse(self.what, f"its part {name} unpacks to {size} bytes (at most {MAX_PART_BYTES})")
        if size > RATIO_GRACE_BYTES and size > MAX_RATIO * max(packed, 1):
            raise _refuse(
                self.what,
                f"its part {name} inflates {size // max(packed, 1)} times (at most {MAX_RATIO}): a zip bomb?",
            )

    def has(self, name: str) -> bool:
        return name in self.names

    def read(self, name: str) -> bytes:
        """A part's bytes, inflated under the limits (counted as they come, whatever was declared)."""
        try:
            info = self.zip.getinfo(name)
            handle: IO[bytes] = self.zip.open(info)
        except KeyError:
            raise _refuse(self.what, f"the part {name} is missing") from None
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, ValueError) as exc:
            raise _refuse(self.what, f"its part {name} cannot be opened ({exc})") from exc
        out = bytearray()
        try:
            with handle:
                while chunk := handle.read(_READ):
                    out += chunk
                    self.read_bytes += len(chunk)
                    self._check_size(name, len(out), info.compress_size)
                    if self.read_bytes > MAX_TOTAL_BYTES:
                        raise _refuse(self.what, f"it unpacks to over {MAX_TOTAL_BYTES} bytes: a zip bomb?")
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as exc:  # a damaged stream
            raise _refuse(self.what, f"its part {name} is damaged ({exc})") from exc
        return bytes(out)

    def xml(self, name: str) -> ET.Element:
        return parse_xml(self.read(name), f"{self.what} ({name})")


def local(name: str) -> str:
    """``uri}p`` (expat's namespaced name) or ``w:p`` → ``p``."""
    return name.rsplit("}", 1)[-1].rsplit(":", 1)[-1]


def parse_xml(data: bytes, what: str) -> ET.Element:
    """One XML part as a tree of local names; DTDs, entity declarations and nesting deeper than
    :data:`MAX_XML_DEPTH` are refused (:class:`ExtractionError`)."""
    parser = expat.ParserCreate(namespace_separator="}")
    builder = ET.TreeBuilder()
    depth = 0

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        if depth > MAX_XML_DEPTH:
            raise _refuse(what, f"its XML nests deeper than {MAX_XML_DEPTH} elements")
        builder.start(local(tag), {local(k): v for k, v in attrs.items()})

    def end(tag: str) -> None:
        nonlocal depth
        depth -= 1
        builder.end(local(tag))

    def doctype(*_: object) -> int:
        raise _refuse(what, "its XML declares a DOCTYPE or entities, which these files never need")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = builder.data
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = doctype
    parser.ExternalEntityRefHandler = doctype
    parser.buffer_text = True
    try:
        parser.Parse(data, True)
        return builder.close()
    except expat.ExpatError as exc:
        raise _refuse(what, f"its XML is malformed ({expat.errors.messages[exc.code]})") from exc
    except AssertionError as exc:  # TreeBuilder: no root element
        raise _refuse(what, "its XML has no content") from exc
