"""``FakeS3Vectors`` (``tests/contract/fake_s3vectors.py``) behind the real ``s3vectors`` client.

``S3VectorsWire(fake).installed()`` answers every ``s3vectors`` request a botocore client sends while
it is installed (a ``before-send`` handler on every new session, ahead of moto's
own S3 Vectors backend): the request body botocore serialized (``POST /PutVectors`` …, rest-json) is
handed to the fake, whose answer goes back as the service's JSON body and botocore parses it. So the
adapter is built as in a Lambda (``boto3`` client, credentials, the IAM harness's checks and the
request limits of ``tests/aws_contracts``) and the fake keeps the service's semantics and refusals.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from tests.aws_contracts.hooks import moto_leaves_alone, session_handler
from tests.contract.fake_s3vectors import FakeS3Vectors


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, amt: int = 1024, decode_content: bool = True) -> Iterator[bytes]:
        yield self.data

    def read(self, amt: int | None = None) -> bytes:
        data, self.data = self.data, b""
        return data


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class S3VectorsWire:
    def __init__(self, fake: FakeS3Vectors) -> None:
        self.fake = fake

    @contextmanager
    def installed(self) -> Iterator[None]:
        with session_handler("before-send", self._send, first=True), moto_leaves_alone("://s3vectors."):
            yield

    def _send(self, request: Any, **_: Any) -> Any:
        if "://s3vectors." not in request.url:
            return None  # another service's request
        from botocore.awsrequest import AWSResponse
        from botocore.exceptions import ClientError, ParamValidationError

        operation = urlsplit(request.url).path.strip("/")  # s3vectors.<region>.api.aws/PutVectors
        params = json.loads(request.body or b"{}")
        method = getattr(self.fake, _snake(operation), None)
        try:
            if method is None:
                raise ClientError({"Error": {"Code": "ValidationException", "Message": operation}}, operation)
            result: dict[str, Any] = method(**params)
        except ClientError as exc:
            return self._error(request, exc.response["Error"]["Code"], exc.response["Error"]["Message"])
        except ParamValidationError as exc:
            return self._error(request, "ValidationException", str(exc))
        body = json.dumps({k: v for k, v in result.items() if k != "ResponseMetadata"}).encode()
        return AWSResponse(request.url, 200, _headers({"content-type": "application/json"}), _Raw(body))

    @staticmethod
    def _error(request: Any, code: str, message: str) -> Any:
        from botocore.awsrequest import AWSResponse

        status = {"NotFoundException": 404, "AccessDeniedException": 403}.get(code, 400)
        headers = {"content-type": "application/json", "x-amzn-errortype": code}
        return AWSResponse(
            request.url, status, _headers(headers), _Raw(json.dumps({"message": message}).encode())
        )


def _headers(values: dict[str, str]) -> Any:
    from botocore.compat import HTTPHeaders

    headers = HTTPHeaders()
    for name, value in values.items():
        headers[name] = value
    return headers
