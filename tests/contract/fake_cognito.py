"""A Cognito user pool's ``ListUsers`` on the wire (moto's Cognito needs a JOSE library this project
does not install): ``FakeUserPool(pool_id).installed()`` answers every ``cognito-idp`` request a
botocore client sends while it is installed. ``ListUsers`` honours the documented filter form
``attribute = "value"`` (exact match, ``\\"`` and ``\\\\`` escapes), ``AttributesToGet`` and ``Limit``;
an unknown pool is ``ResourceNotFoundException``; any other operation is refused."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.aws_contracts.hooks import moto_leaves_alone, session_handler

_FILTER = re.compile(r'^\s*(\w+)\s*(=|\^=)\s*"((?:[^"\\]|\\.)*)"\s*$')


@dataclass
class FakeUserPool:
    pool_id: str
    users: dict[str, dict[str, str]] = field(default_factory=dict)  # user name -> attributes

    def add(self, username: str, **attributes: str) -> None:
        self.users[username] = dict(attributes)

    @contextmanager
    def installed(self) -> Iterator[None]:
        with session_handler("before-send", self._send, first=True), moto_leaves_alone("://cognito-idp."):
            yield

    def _send(self, request: Any, **_: Any) -> Any:
        if "://cognito-idp." not in request.url:
            return None  # another service's request
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else str(target)
        operation = target.rsplit(".", 1)[-1]
        params = json.loads(request.body or b"{}")
        if operation != "ListUsers":
            return _response(request, 400, {"__type": "InvalidParameterException", "message": operation})
        if params.get("UserPoolId") != self.pool_id:
            return _response(
                request, 400, {"__type": "ResourceNotFoundException", "message": "User pool does not exist."}
            )
        match = _FILTER.match(params.get("Filter", ""))
        found = []
        for name, attributes in sorted(self.users.items()):
            if match is not None:
                key, op, raw = match.groups()
                value = re.sub(r"\\(.)", r"\1", raw)
                got = attributes.get(key, name if key == "username" else None)
                if got is None or (got != value if op == "=" else not got.startswith(value)):
                    continue
            wanted = params.get("AttributesToGet")
            shown = [{"Name": k, "Value": v} for k, v in attributes.items() if wanted is None or k in wanted]
            found.append({"Username": name, "Attributes": shown, "Enabled": True, "UserStatus": "CONFIRMED"})
        return _response(request, 200, {"Users": found[: int(params.get("Limit", 60))]})


def _response(request: Any, status: int, payload: dict[str, Any]) -> Any:
    from botocore.awsrequest import AWSResponse
    from botocore.compat import HTTPHeaders

    headers = HTTPHeaders()
    headers["content-type"] = "application/x-amz-json-1.1"

    class Raw:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def stream(self, amt: int = 1024, decode_content: bool = True) -> Iterator[bytes]:
            yield self.data

        def read(self, amt: int | None = None) -> bytes:
            data, self.data = self.data, b""
            return data

    return AWSResponse(request.url, status, headers, Raw(json.dumps(payload).encode()))
