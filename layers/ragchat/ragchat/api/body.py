"""The one strict JSON body parser (docs/security.md: bad input never causes a 5xx).

Every route's JSON body goes through ``strict_json`` (the resolver's ``json_body_deserializer``), and
``body_problem`` checks the raw body before Powertools decodes it. A body that is not UTF-8, nests
deeper than ``MAX_DEPTH``, holds a number longer than ``MAX_NUMBER_CHARS`` (or one that is not finite),
``NaN``/``Infinity``, a lone surrogate escape (``"\\ud800"``), or an object naming one key twice
(``{"title": "a", "title": "b"}``: ``json.loads`` keeps the last and drops the other without a
word) is refused with a 400 naming the problem (``BadBody``, a ``ValidationError``), before any
route runs: nothing is stored.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestUnsupportedContentType

from ragchat.api.errors import error_response
from ragchat.domain.errors import ValidationError

MAX_DEPTH = 64  # arrays/objects inside one another
MAX_NUMBER_CHARS = 40  # digits, sign, point and exponent of one number
PREFIX = "Invalid JSON body: "

# A string, or an unterminated one to the end of the text (the body is then invalid JSON anyway):
# possessive, so an unterminated string is scanned once, not once per quote inside it (issue 30).
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class BadBody(ValidationError):
    """A request body no route should see (400)."""


def strict_json(text: str | bytes) -> Any:
    """``json.loads`` that refuses what ``json.loads`` lets through or crashes on (module docstring)."""
    if isinstance(text, bytes):
        text = utf8(text)
    _check_depth(text)
    try:
        value = json.loads(
            text,
            parse_constant=_constant,
            parse_int=_integer,
            parse_float=_float,
            object_pairs_hook=_unique_keys,
        )
    except RecursionError:
        raise BadBody(f"{PREFIX}nested too deeply (at most {MAX_DEPTH} levels)") from None
    if _SURROGATE_ESCAPE.search(text):
        _check_strings(value)
    return value


def register_body_errors(app: APIGatewayRestResolver) -> None:
    """A JSON route sent another content type (``text/plain``…) answers 415, not 500."""

    @app.exception_handler(RequestUnsupportedContentType)  # type: ignore[untyped-decorator]
    def _unsupported(exc: RequestUnsupportedContentType) -> Response[Any]:
        ctype = app.current_event.headers.get("content-type") or "none"
        return error_response(415, f"Unsupported content type: {ctype} (send application/json)")


def utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadBody(f"{PREFIX}not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def body_problem(event: Mapping[str, Any]) -> str | None:
    """Why the event's body can't even be decoded (a JSON body that is not UTF-8, a multipart body with
    no boundary), else ``None``. Only bodies parsed as JSON (no content type, or ``application/json``)
    are checked for UTF-8; uploads are bytes."""
    ctype = _content_type(event).lower()
    if ctype.startswith("multipart/") and "boundary=" not in ctype:
        return "Malformed Content-Type: multipart needs a boundary"
    body = event.get("body")
    if not body or not isinstance(body, str) or (ctype and not ctype.startswith("application/json")):
        return None
    try:
        if event.get("isBase64Encoded"):
            utf8(base64.b64decode(body))
        else:
            body.encode("utf-8")
    except BadBody as exc:
        return exc.message
    except (binascii.Error, ValueError):
        return f"{PREFIX}not UTF-8"
    return None


def _content_type(event: Mapping[str, Any]) -> str:
    headers = event.get("headers") or {}
    return next((str(v) for k, v in headers.items() if k.lower() == "content-type"), "").strip()


def _check_depth(text: str) -> None:
    if "[" not in text and "{" not in text:
        return
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_DEPTH:
            raise BadBody(f"{PREFIX}nested too deeply (at most {MAX_DEPTH} levels)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            shown = key if len(key) <= 40 else key[:40] + "…"
            raise BadBody(f"{PREFIX}the key {json.dumps(shown)} appears twice in one object")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise BadBody(f"{PREFIX}{name} is not a JSON number")


def _integer(digits: str) -> int:
    if len(digits) > MAX_NUMBER_CHARS:
        raise BadBody(f"{PREFIX}number too long ({len(digits)} characters, at most {MAX_NUMBER_CHARS})")
    return int(digits)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise BadBody(f"{PREFIX}number too long ({len(text)} characters, at most {MAX_NUMBER_CHARS})")
    value = float(text)
    if not math.isfinite(value):
        raise BadBody(f"{PREFIX}number out of range ({text})")
    return value


def _check_strings(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise BadBody(
                    f"{PREFIX}a string holds a lone surrogate (\\u{ord(item[_lone(item)]):04x})"
                ) from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _lone(text: str) -> int:
    return next(i for i, ch in enumerate(text) if 0xD800 <= ord(ch) <= 0xDFFF)


def body_size(event: Mapping[str, Any]) -> int:
    body = event.get("body")
    if not body:
        return 0
    if event.get("isBase64Encoded") and isinstance(body, str):
        # Decoded size without decoding: 3 bytes per 4 characters, minus padding.
        return len(body) * 3 // 4 - body[-2:].count("=")
    return len(body.encode("utf-8")) if isinstance(body, str) else len(bytes(body))


def decode_body(event: Mapping[str, Any]) -> bytes:
    body = event.get("body") or ""
    return base64.b64decode(body) if event.get("isBase64Encoded") else str(body).encode("utf-8")
