"""AWS's documented request limits, enforced where the tests call AWS.

* ``check_lambda_payload``: Lambda's 6 MB synchronous invocation payload, request and response
  (API Gateway → Lambda events in ``Stack.handler``, Step Functions → Lambda in the task patch).
* ``check_state_io``: Step Functions' 256 KB state input/output (the task patch).
* ``before_parameter_build``, a botocore handler that the root ``conftest.py`` adds to
  every botocore session a test creates (moto-backed or Stubber-backed clients alike):
  DynamoDB 400 KB items, ``BatchWriteItem`` 25 requests / 16 MB, ``BatchGetItem`` 100 keys,
  ``TransactWriteItems`` 100 actions / 4 MB; Step Functions ``StartExecution`` input 256 KB; SQS and
  SNS message 256 KB; S3 Vectors ``PutVectors``/``DeleteVectors`` 500, ``GetVectors`` 100, ``topK``
  100, 20 MiB payload; Bedrock ``InvokeModel`` of Titan Text Embeddings V2 at most 50,000 characters
  and 8,192 tokens (counted from below: a token never spans two words, so more than 8,192 words and
  symbols is over) and an InvokeModel/Converse body of at most
  25,000,000 bytes (the API's maximum); Textract ``DetectDocumentText``: a document of at most
  10 MB. A request past one raises ``AwsLimitExceeded`` (a botocore
  ``ClientError`` with AWS's ``ValidationException``), as the service would answer.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

LAMBDA_SYNC_PAYLOAD = 6 * 1024 * 1024  # 6 MB, request and response, synchronous invocation
STATE_IO = 256 * 1024  # Step Functions state input/output, and an execution's input
DYNAMODB_ITEM = 400 * 1024
DYNAMODB_BATCH_WRITE_ITEMS = 25
DYNAMODB_BATCH_WRITE_BYTES = 16 * 1024 * 1024
DYNAMODB_BATCH_GET_KEYS = 100
DYNAMODB_TRANSACT_ITEMS = 100
DYNAMODB_TRANSACT_BYTES = 4 * 1024 * 1024
MESSAGE_BYTES = 256 * 1024  # SQS message body, SNS message
S3VECTORS_PUT = 500
S3VECTORS_DELETE = 500
S3VECTORS_GET = 100
S3VECTORS_TOP_K = 100
S3VECTORS_PAYLOAD = 20 * 1024 * 1024
TITAN_V2_CHARS = 50_000
TITAN_V2_TOKENS = 8_192
BEDROCK_BODY = 25_000_000
TEXTRACT_SYNC_BYTES = 10_000_000  # DetectDocumentText's document: "10 MB in memory" (read as 10^6 bytes)


def _exceeded(operation: str, message: str) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError(
        {"Error": {"Code": "ValidationException", "Message": f"AWS limit: {message}"}}, operation
    )


class LambdaPayloadTooLarge(AssertionError):
    """Lambda refuses the invocation (API Gateway answers 413/502; Step Functions' task fails)."""


def _size(value: Any) -> int:
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, str):
        return len(value.encode())
    return len(json.dumps(value, default=str).encode())


def check_lambda_payload(what: str, payload: Any) -> None:
    size = _size(payload)
    if size > LAMBDA_SYNC_PAYLOAD:
        raise LambdaPayloadTooLarge(f"{what}: {size:,} bytes > Lambda's {LAMBDA_SYNC_PAYLOAD:,}-byte payload")


def check_state_io(what: str, payload: Any) -> None:
    size = _size(payload)
    if size > STATE_IO:
        raise LambdaPayloadTooLarge(f"{what}: {size:,} bytes > Step Functions' {STATE_IO:,}-byte state I/O")


# ---------------------------------------------------------------------------- DynamoDB
def _number_size(text: str) -> int:
    digits = len(text.lstrip("-").replace(".", "").lstrip("0")) or 1
    return (digits + 1) // 2 + 1 + (1 if text.startswith("-") else 0)


def attribute_size(value: Mapping[str, Any]) -> int:
    """An attribute value's size as DynamoDB counts it (strings and binaries by bytes, numbers by
    significant digits, 3 bytes of overhead per list/map plus 1 per element)."""
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "B":
        return len(v) if isinstance(v, (bytes, bytearray)) else len(base64.b64decode(v))
    if kind == "N":
        return _number_size(str(Decimal(v)))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in v)
    if kind == "NS":
        return sum(_number_size(str(Decimal(n))) for n in v)
    if kind == "BS":
        return sum(len(b) for b in v)
    if kind == "L":
        return 3 + sum(1 + attribute_size(e) for e in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + attribute_size(e) for k, e in v.items())
    raise ValueError(kind)


def item_size(item: Mapping[str, Any]) -> int:
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def _dynamodb(operation: str, params: Mapping[str, Any]) -> None:
    if operation == "PutItem":
        _item(operation, params["Item"])
    elif operation == "BatchWriteItem":
        requests = [r for rs in params["RequestItems"].values() for r in rs]
        if len(requests) > DYNAMODB_BATCH_WRITE_ITEMS:
            raise _exceeded(operation, f"{len(requests)} requests > {DYNAMODB_BATCH_WRITE_ITEMS}")
        items = [r["PutRequest"]["Item"] for r in requests if "PutRequest" in r]
        total = sum(_item(operation, item) for item in items)
        if total > DYNAMODB_BATCH_WRITE_BYTES:
            raise _exceeded(operation, f"{total:,} bytes > {DYNAMODB_BATCH_WRITE_BYTES:,}")
    elif operation == "BatchGetItem":
        keys = sum(len(t["Keys"]) for t in params["RequestItems"].values())
        if keys > DYNAMODB_BATCH_GET_KEYS:
            raise _exceeded(operation, f"{keys} keys > {DYNAMODB_BATCH_GET_KEYS}")
    elif operation == "TransactWriteItems":
        actions = params["TransactItems"]
        if len(actions) > DYNAMODB_TRANSACT_ITEMS:
            raise _exceeded(operation, f"{len(actions)} actions > {DYNAMODB_TRANSACT_ITEMS}")
        total = sum(_item(operation, a["Put"]["Item"]) for a in actions if "Put" in a)
        if total > DYNAMODB_TRANSACT_BYTES:
            raise _exceeded(operation, f"{total:,} bytes > {DYNAMODB_TRANSACT_BYTES:,}")


def _item(operation: str, item: Mapping[str, Any]) -> int:
    size = item_size(item)
    if size > DYNAMODB_ITEM:
        raise _exceeded(operation, f"item of {size:,} bytes > {DYNAMODB_ITEM:,}")
    return size


# ---------------------------------------------------------------------------- others
def _s3vectors(operation: str, params: Mapping[str, Any]) -> None:
    counts = {"PutVectors": ("vectors", S3VECTORS_PUT), "DeleteVectors": ("keys", S3VECTORS_DELETE),
              "GetVectors": ("keys", S3VECTORS_GET)}  # fmt: skip
    if operation in counts:
        name, limit = counts[operation]
        if len(params[name]) > limit:
            raise _exceeded(operation, f"{len(params[name])} {name} > {limit}")
    if operation == "QueryVectors" and params["topK"] > S3VECTORS_TOP_K:
        raise _exceeded(operation, f"topK {params['topK']} > {S3VECTORS_TOP_K}")
    if _size(params) > S3VECTORS_PAYLOAD:
        raise _exceeded(operation, f"payload > {S3VECTORS_PAYLOAD:,} bytes")


_TOKENISH = re.compile(r"\w+|[^\w\s]")


def _bedrock(operation: str, params: Mapping[str, Any]) -> None:
    body = params.get("body")
    if operation == "InvokeModel" and body is not None:
        if _size(body) > BEDROCK_BODY:
            raise _exceeded(operation, f"body > {BEDROCK_BODY:,} bytes")
        if str(params.get("modelId", "")).startswith("amazon.titan-embed-text-v2"):
            text = json.loads(body)["inputText"]
            if len(text) > TITAN_V2_CHARS:
                raise _exceeded(operation, f"Titan V2 input of {len(text):,} characters > {TITAN_V2_CHARS:,}")
            pieces = len(_TOKENISH.findall(text))
            if pieces > TITAN_V2_TOKENS:
                raise _exceeded(
                    operation, f"Titan V2 input of at least {pieces:,} tokens > {TITAN_V2_TOKENS:,}"
                )
    if operation in ("Converse", "ConverseStream") and _size(params) > BEDROCK_BODY:
        raise _exceeded(operation, f"request > {BEDROCK_BODY:,} bytes")


def check_request(prefix: str, operation: str, params: Mapping[str, Any]) -> None:
    """Raise ``ValidationException`` if this request is past one of the limits this module knows."""
    if prefix == "dynamodb":
        _dynamodb(operation, params)
    elif prefix == "states" and operation == "StartExecution":
        size = _size(params.get("input", ""))
        if size > STATE_IO:
            raise _exceeded(operation, f"execution input of {size:,} bytes > {STATE_IO:,}")
    elif (prefix, operation) in (("sqs", "SendMessage"), ("sns", "Publish")):
        body = params.get("MessageBody", params.get("Message", ""))
        if _size(body) > MESSAGE_BYTES:
            raise _exceeded(operation, f"message of {_size(body):,} bytes > {MESSAGE_BYTES:,}")
    elif prefix == "s3vectors":
        _s3vectors(operation, params)
    elif prefix == "bedrock":
        _bedrock(operation, params)
    elif prefix == "textract" and operation == "DetectDocumentText":
        size = _size(params.get("Document", {}).get("Bytes", b""))
        if size > TEXTRACT_SYNC_BYTES:
            raise _exceeded(operation, f"document of {size:,} bytes > {TEXTRACT_SYNC_BYTES:,}")


def before_parameter_build(params: Mapping[str, Any], model: Any, **_: Any) -> None:
    check_request(model.service_model.signing_name, model.name, params)
