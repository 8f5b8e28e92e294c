"""OCR with Amazon Textract (issue 45): the ``TextRecognizer`` of the AWS deployment.

The split step (``IngestStepsFunction``, which holds ``textract:DetectDocumentText``) sends the
picture's bytes to the synchronous ``DetectDocumentText`` and turns its ``LINE`` blocks back into
text: one line per line, in Textract's reading order, and a blank line where the gap above a line is
taller than most of a line (a new paragraph) or the text goes back up the page (a new column).

Its limits for synchronous calls (Amazon Textract's "Set quotas"; checked before a picture is
accepted, so the upload gets a 400 rather than a FAILED document): JPEG, PNG, TIFF (and PDF, not
used here), at most 10 MB, a TIFF of one page, at most 10,000 pixels on each side. WebP is not read.
A picture Textract itself finds unreadable FAILS with its words; throttling and service errors are
raised as they are, for the state machine's retries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragchat.domain.content_types import WEBP
from ragchat.domain.errors import ExtractionError
from ragchat.domain.file_errors import megabytes
from ragchat.domain.images import ImageInfo

#: the largest picture the synchronous API takes ("10 MB in memory": read as 10^6 bytes, the safe side)
MAX_BYTES = 10_000_000
#: the most pixels on any side
MAX_SIDE = 10_000
# what Textract answers for a picture it cannot read (not worth a retry)
_UNREADABLE = frozenset(
    {
        "BadDocumentException",
        "UnsupportedDocumentException",
        "DocumentTooLargeException",
        "InvalidParameterException",
    }
)
_TEXT_INSTEAD = "Save it as PNG or JPEG within these limits, or add the text itself."


class TextractOcr:
    """:class:`ragchat.ports.TextRecognizer` over Amazon Textract's ``DetectDocumentText``.
    ``client``: makes the boto3 ``textract`` client when a picture is first read (the API functions
    only ask :meth:`refuses`, and never pay for a client)."""

    engine = "textract"

    def __init__(self, client: Callable[[], Any]) -> None:
        self._make_client = client
        self._client: Any = None

    def missing(self) -> str | None:
        return None

    def refuses(self, image: ImageInfo, size: int) -> str | None:
        if image.content_type == WEBP:
            return "Pictures are read by Amazon Textract here, which does not read WebP. " + _TEXT_INSTEAD
        if len(image.frames) > 1:
            return (
                f"Amazon Textract reads one page per picture here; this TIFF has {len(image.frames)} pages. "
                "Send each page as its own picture, or add the text itself."
            )
        if size > MAX_BYTES:
            return (
                f"Amazon Textract reads pictures of at most {megabytes(MAX_BYTES)}; this one has "
                f"{megabytes(size)}. {_TEXT_INSTEAD}"
            )
        width, height = image.frames[0]
        if max(width, height) > MAX_SIDE:
            return (
                f"Amazon Textract reads pictures of at most {MAX_SIDE} pixels on each side; this one is "
                f"{width} × {height}. {_TEXT_INSTEAD}"
            )
        return None

    def read(self, image: bytes, content_type: str, seconds: float) -> list[str]:
        from botocore.exceptions import ClientError

        if self._client is None:
            self._client = self._make_client()
        try:
            answer = self._client.detect_document_text(Document={"Bytes": image})
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code in _UNREADABLE:
                said = err.response.get("Error", {}).get("Message", "") or code
                raise ExtractionError(
                    f"Amazon Textract could not read the picture ({code}: {said})."
                ) from None
            raise
        return [lines_text(answer.get("Blocks", []))]


def lines_text(blocks: list[dict[str, Any]]) -> str:
    """The ``LINE`` blocks' text in their order: a line per line, a blank line before a line whose
    gap above is more than three quarters of a line's height, or that starts higher up the page
    than the line before (the next column)."""
    out: list[str] = []
    above: dict[str, float] | None = None
    for block in blocks:
        if block.get("BlockType") != "LINE" or not block.get("Text", "").strip():
            continue
        box = block.get("Geometry", {}).get("BoundingBox", {})
        if above is not None and box:
            gap = box.get("Top", 0.0) - (above.get("Top", 0.0) + above.get("Height", 0.0))
            height = min(box.get("Height", 0.0), above.get("Height", 0.0)) or 0.01
            if gap > 0.75 * height or box.get("Top", 0.0) < above.get("Top", 0.0):
                out.append("")
        out.append(block["Text"].strip())
        above = box or above
    return "\n".join(out)
