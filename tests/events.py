"""Builders for API Gateway REST (v1 proxy) events, as API Gateway (or ``ragchat serve``) sends them."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlencode


def api_event(
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    body: Any = None,
    raw_body: str | bytes | None = None,
    headers: dict[str, str] | None = None,
    principal: str | None = "alice",
    api_key_principal: str | None = None,
    api_key_id: str | None = None,
    stage: str = "Prod",
    request_id: str = "req-1",
) -> dict[str, Any]:
    """``body`` is JSON-encoded; ``raw_body`` is sent as is (bytes → base64)."""
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    is_b64 = False
    text: str | None = None
    if raw_body is not None:
        if isinstance(raw_body, bytes):
            text, is_b64 = base64.b64encode(raw_body).decode("ascii"), True
        else:
            text = raw_body
    elif body is not None:
        text = json.dumps(body)
    authorizer: dict[str, Any] = {}
    if principal is not None:
        authorizer["claims"] = {"sub": principal}
    if api_key_principal is not None:
        authorizer["principalId"] = api_key_principal
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": hdrs,
        "multiValueHeaders": {k: [v] for k, v in hdrs.items()},
        "queryStringParameters": dict(query) if query else None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "stage": stage,
            "requestId": request_id,
            "path": f"/{stage}{path}?{urlencode(query or {})}",
            "httpMethod": method,
            "identity": {"sourceIp": "203.0.113.9", "apiKeyId": api_key_id},
            "authorizer": authorizer,
        },
        "body": text,
        "isBase64Encoded": is_b64,
    }


def header(response: dict[str, Any], name: str) -> str | None:
    """A response header, case-insensitive, from ``headers`` or ``multiValueHeaders``."""
    for key, value in (response.get("headers") or {}).items():
        if key.lower() == name.lower():
            return str(value)
    for key, values in (response.get("multiValueHeaders") or {}).items():
        if key.lower() == name.lower() and values:
            return str(values[0])
    return None


def json_body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])
