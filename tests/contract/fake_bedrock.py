"""Bedrock Runtime on the wire, for every botocore client made while it is installed.

``FakeBedrock.installed()`` adds a ``before-send`` handler, ahead of moto's, to the handlers every new
botocore session registers (``tests/aws_contracts/hooks.py``), and keeps moto off its host: botocore
serializes the real request and parses the real response, so what the adapters send and read is what
Bedrock would receive and send.

* ``InvokeModel`` of Titan Text Embeddings V2 (``{"inputText", "dimensions", "normalize"}`` →
  ``{"embedding", "embeddingsByType", "inputTextTokenCount"}``) and of Cohere Embed v3
  (``{"texts", "input_type", "embedding_types"}`` → ``{"embeddings": {"float": [...]}, ...}``):
  deterministic bag-of-words vectors, so texts that share words are near (questions find notes);
* ``Converse`` (a JSON body) and ``ConverseStream`` (an ``application/vnd.amazon.eventstream`` body,
  frame by frame: messageStart, contentBlockDelta…, contentBlockStop, messageStop, metadata) of any
  Anthropic model id or inference profile: the answer quotes the first source of the system prompt
  (≤ 300 characters) and cites it (``[source: <id>]``), as a grounded model answers;
* any other model id, or a body the model does not take, is answered as Bedrock does
  (``ResourceNotFoundException``/``ValidationException``); so is an embedding of a text holding
  ``refuse`` (a document whose ingestion must fail).

The account's Marketplace subscriptions: the first call to a third-party model (Anthropic, Cohere)
in the account needs ``aws-marketplace:ViewSubscriptions`` and ``aws-marketplace:Subscribe`` under
the caller's role (Bedrock subscribes the account then); :meth:`FakeBedrock.implied_requests` says so
to the IAM harness. Every call is recorded in ``calls``.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import math
import re
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.aws_contracts.hooks import moto_leaves_alone, session_handler
from tests.aws_contracts.policy import Request

_WORD = re.compile(r"[a-z0-9]+")
_SOURCE = re.compile(r"\[Source id=([^\]]+)\]\s*(?:\(document: [^)]*\)\s*)?([^\n]*)")
TITAN = "amazon.titan-embed-text-v2:0"
COHERE = ("cohere.embed-english-v3", "cohere.embed-multilingual-v3")
THIRD_PARTY = ("anthropic.", "cohere.")


def bag_of_words(text: str, dimension: int) -> list[float]:
    vec = [0.0] * dimension
    for word in _WORD.findall(text.lower()):
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
        vec[h % dimension] += 1.0
    if not any(vec):
        vec[0] = 1.0
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec]


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value


def frame(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """One AWS event-stream message (prelude, headers, payload, CRCs), as Bedrock streams events."""
    headers = (
        _header(":event-type", event_type)
        + _header(":content-type", "application/json")
        + _header(":message-type", "event")
    )
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)


class _Raw:
    """The urllib3 response botocore reads a body or an event stream from."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, amt: int = 1024, decode_content: bool = True) -> Iterator[bytes]:
        for start in range(0, len(self.data), 64):
            yield self.data[start : start + 64]

    def read(self, amt: int | None = None) -> bytes:
        data, self.data = self.data, b""
        return data

    def close(self) -> None:
        pass


class FakeBedrock:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []  # (operation, model id, body)
        self.subscribed: set[str] = set()  # third-party models the account is subscribed to
        self.refuse: str | None = None  # an embedding of a text holding this is refused (400)

    @contextmanager
    def installed(self) -> Iterator[None]:
        with session_handler("before-send", self._send, first=True), moto_leaves_alone("://bedrock-runtime."):
            yield

    # ------------------------------------------------------------------ IAM
    def implied_requests(self, prefix: str, operation: str, params: Mapping[str, Any]) -> list[Request]:
        """What Bedrock checks besides the model: the first use of a third-party model in the
        account subscribes it through AWS Marketplace, with the caller's rights."""
        if prefix != "bedrock" or "modelId" not in params:
            return []
        base = str(params["modelId"]).rsplit("/", 1)[-1]
        base = (
            base.split(".", 1)[1]
            if base.split(".", 1)[0] in ("us", "eu", "apac", "jp", "au", "ca", "global")
            else base
        )
        if not base.startswith(THIRD_PARTY) or base in self.subscribed:
            return []
        self.subscribed.add(base)
        return [
            Request("aws-marketplace:ViewSubscriptions", "*", {}),
            Request("aws-marketplace:Subscribe", "*", {}),
        ]

    # ------------------------------------------------------------------ the wire
    def _send(self, request: Any, **_: Any) -> Any:
        if "://bedrock-runtime." not in request.url:
            return None  # another service's request
        from botocore.awsrequest import AWSResponse

        path = urlsplit(request.url).path
        match = re.fullmatch(r"/model/([^/]+)/(invoke|converse|converse-stream)", path)
        if match is None:
            return self._error(request, 404, "UnknownOperationException", f"no such operation {path}")
        model, verb = unquote(match.group(1)), match.group(2)
        body = json.loads(request.body or b"{}")
        operation = {"invoke": "InvokeModel", "converse": "Converse", "converse-stream": "ConverseStream"}[
            verb
        ]
        self.calls.append((operation, model, body))
        base = (
            model.split(".", 1)[1]
            if model.split(".", 1)[0] in ("us", "eu", "apac", "jp", "au", "ca", "global")
            else model
        )
        try:
            if verb == "invoke":
                payload = self._invoke(base, body)
                return self._json(request, payload)
            if not base.startswith("anthropic."):
                raise _Refused(400, "ValidationException", f"{model} does not support the Converse API")
            text = self._answer(body)
            if verb == "converse":
                payload = {
                    "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                    "stopReason": "end_turn",
                    "usage": {
                        "inputTokens": 100,
                        "outputTokens": len(text.split()),
                        "totalTokens": 100 + len(text.split()),
                    },
                    "metrics": {"latencyMs": 120},
                }
                return self._json(request, payload)
            frames = [frame("messageStart", {"role": "assistant"})]
            frames += [
                frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
                for piece in re.findall(r"\S+\s*", text)
            ]
            frames += [
                frame("contentBlockStop", {"contentBlockIndex": 0}),
                frame("messageStop", {"stopReason": "end_turn"}),
                frame(
                    "metadata",
                    {
                        "usage": {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110},
                        "metrics": {"latencyMs": 120},
                    },
                ),
            ]
            headers = {"content-type": "application/vnd.amazon.eventstream"}
            return AWSResponse(request.url, 200, _headers(headers), _Raw(b"".join(frames)))
        except _Refused as refused:
            return self._error(request, refused.status, refused.code, refused.message)

    def _invoke(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        texts = [body.get("inputText", ""), *(body.get("texts") or [])]
        if self.refuse is not None and any(self.refuse in str(t) for t in texts):
            raise _Refused(400, "ValidationException", "Malformed input request: the text was refused")
        if model == TITAN:
            if (
                set(body) - {"inputText", "dimensions", "normalize", "embeddingTypes"}
                or "inputText" not in body
            ):
                raise _Refused(
                    400,
                    "ValidationException",
                    "Malformed input request, please reformat your input and try again.",
                )
            dimension = int(body.get("dimensions", 1024))
            if dimension not in (256, 512, 1024):
                raise _Refused(
                    400, "ValidationException", f"dimensions {dimension} is not one of [256, 512, 1024]"
                )
            vector = bag_of_words(body["inputText"], dimension)
            tokens = len(_WORD.findall(body["inputText"].lower()))
            return {"embedding": vector, "embeddingsByType": {"float": vector}, "inputTextTokenCount": tokens}
        if model in COHERE:
            texts = body.get("texts")
            if (
                not isinstance(texts, list)
                or not 1 <= len(texts) <= 96
                or body.get("input_type")
                not in ("search_document", "search_query", "classification", "clustering")
            ):
                raise _Refused(
                    400,
                    "ValidationException",
                    "Malformed input request, please reformat your input and try again.",
                )
            vectors = [bag_of_words(t, 1024) for t in texts]
            by_type = "embedding_types" in body
            return {
                "id": "fake-cohere",
                "texts": texts,
                "embeddings": {"float": vectors} if by_type else vectors,
                "response_type": "embeddings_by_type" if by_type else "embeddings_floats",
            }
        raise _Refused(
            404, "ResourceNotFoundException", f"Model {model} not found or not supported by InvokeModel here"
        )

    @staticmethod
    def _answer(body: Mapping[str, Any]) -> str:
        system = " ".join(block.get("text", "") for block in body.get("system", []))
        found = _SOURCE.search(system)
        if found is None:
            return "I could not find that in your documents."
        source_id, text = found.group(1), found.group(2).strip()
        return f"{text[:300].strip()} [source: {source_id}]"

    @staticmethod
    def _json(request: Any, payload: Mapping[str, Any]) -> Any:
        from botocore.awsrequest import AWSResponse

        body = json.dumps(payload).encode()
        return AWSResponse(request.url, 200, _headers({"content-type": "application/json"}), _Raw(body))

    @staticmethod
    def _error(request: Any, status: int, code: str, message: str) -> Any:
        from botocore.awsrequest import AWSResponse

        headers = {
            "content-type": "application/json",
            "x-amzn-errortype": f"{code}:http://internal.amazon.com/",
        }
        body = json.dumps({"message": message}).encode()
        return AWSResponse(request.url, status, _headers(headers), _Raw(body))


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _headers(values: dict[str, str]) -> Any:
    from botocore.compat import HTTPHeaders

    headers = HTTPHeaders()
    for name, value in values.items():
        headers[name] = value
    return headers
