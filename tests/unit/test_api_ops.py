"""Operations routes, the error contract's less common branches, Lambda entry points and the local
server's event translation (no sockets)."""

from __future__ import annotations

import base64

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from ragchat.api.app import create_app
from ragchat.api.auth import principal
from ragchat.domain.errors import Conflict, RateLimited, Unauthenticated
from ragchat.local_server import build_event, response_body, response_headers

from tests.events import api_event, header, json_body
from tests.unit.api_support import make_api

SPEC_ROUTES = {
    ("post", "/notes"),
    ("get", "/notes"),
    ("get", "/notes.json"),
    ("delete", "/notes/{note_id}"),
    ("get", "/documents"),
    ("post", "/documents"),
    ("get", "/documents/{document_id}"),
    ("patch", "/documents/{document_id}"),
    ("delete", "/documents/{document_id}"),
    ("get", "/"),
    ("get", "/health"),
}


def test_openapi_lists_every_route_with_relative_server():
    api = make_api()
    res = api.call("GET", "/openapi.json", stage="Prod")
    assert res["statusCode"] == 200
    doc = json_body(res)
    assert doc["info"]["title"] == "ragchat"
    assert doc["servers"] == [{"url": "/Prod"}]
    listed = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert listed >= SPEC_ROUTES
    # The notes body schema is documented (camelCase field names).
    assert "contentType" in doc["components"]["schemas"]["NoteIn"]["properties"]


def test_openapi_documents_all_areas_even_from_a_function_serving_one():
    api = make_api()
    ops_only = create_app(api.container, areas={"ops"})
    doc = json_body(ops_only.resolve(api_event("GET", "/openapi.json"), None))
    assert ("post", "/notes") in {(m, p) for p, ops in doc["paths"].items() for m in ops}


def test_swagger_page_is_html():
    api = make_api()
    res = api.call("GET", "/swagger")
    assert res["statusCode"] == 200
    assert "text/html" in header(res, "Content-Type")
    assert "swagger" in res["body"].lower()


def test_areas_limit_the_routes():
    api = make_api()
    notes_only = create_app(api.container, areas={"notes"})
    assert notes_only.resolve(api_event("GET", "/health"), None)["statusCode"] == 404
    assert notes_only.resolve(api_event("GET", "/documents"), None)["statusCode"] == 200


def _app_raising(exc: Exception):
    api = make_api()
    app = create_app(api.container, areas={"ops"})
    r = APIGatewayRouter()

    @r.get("/boom")
    def boom() -> Response[None]:
        raise exc

    app.include_router(r)
    return app


def test_rate_limited_is_429_with_retry_after():
    res = _app_raising(RateLimited("Too many requests", retry_after=42)).resolve(
        api_event("GET", "/boom"), None
    )
    assert res["statusCode"] == 429
    assert json_body(res) == {"error": "Too many requests", "retryAfter": 42}
    assert header(res, "Retry-After") == "42"


def test_domain_errors_keep_their_status_and_message():
    res = _app_raising(Conflict("Already exists")).resolve(api_event("GET", "/boom"), None)
    assert res["statusCode"] == 409 and json_body(res) == {"error": "Already exists"}


def test_principal_sources_and_401():
    assert principal(api_event("GET", "/", principal="sub-1")) == "sub-1"
    assert principal(api_event("GET", "/", principal=None, api_key_principal="key-1")) == "key-1"
    try:
        principal(api_event("GET", "/", principal=None))
    except Unauthenticated as exc:
        assert exc.status == 401
    else:  # pragma: no cover
        raise AssertionError("expected 401")


def test_base64_body_size_is_checked_decoded():
    api = make_api({"MAX_BODY_BYTES": "12000"})
    small = api.call("POST", "/documents", query={"filename": "a.txt"}, raw_body=b"a" * 9000)
    assert small["statusCode"] == 202
    big = api.call("POST", "/documents", query={"filename": "a.txt"}, raw_body=b"a" * 10_001)
    assert big["statusCode"] == 413


# ------------------------------------------------------------------------- Lambda entry points
# ------------------------------------------------------------------------- local server translation
def test_build_event_for_a_json_post():
    event = build_event(
        "POST",
        "/notes?x=1&x=2&y=",
        [("Content-Type", "application/json"), ("X-A", "1"), ("X-A", "2")],
        b'{"text": "hi"}',
        source_ip="10.0.0.1",
        principal="local",
        request_id="r1",
    )
    assert event["path"] == "/notes" and event["httpMethod"] == "POST"
    assert event["queryStringParameters"] == {"x": "2", "y": ""}
    assert event["multiValueQueryStringParameters"] == {"x": ["1", "2"], "y": [""]}
    assert event["multiValueHeaders"]["X-A"] == ["1", "2"]
    assert event["body"] == '{"text": "hi"}' and event["isBase64Encoded"] is False
    assert event["requestContext"]["authorizer"]["claims"]["sub"] == "local"
    assert event["requestContext"]["identity"]["sourceIp"] == "10.0.0.1"
    assert event["requestContext"]["requestId"] == "r1"


def test_build_event_binary_body_is_base64():
    pdf = b"%PDF-1.4\xff\xfe"
    event = build_event("POST", "/documents", [("Content-Type", "application/pdf")], pdf)
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == pdf
    assert event["requestContext"]["authorizer"] == {}


def test_local_events_resolve_like_api_gateway_events():
    api = make_api({"RAGCHAT_LOCAL_USER": "local"})
    event = build_event(
        "POST", "/notes", [("Content-Type", "application/json")], b'{"text": "Cats purr."}', principal="local"
    )
    res = api.app.resolve(event, None)
    assert res["statusCode"] == 202
    doc_id = json_body(res)["documentId"]
    got = api.app.resolve(build_event("GET", f"/documents/{doc_id}", [], b"", principal="local"), None)
    assert json_body(got)["status"] == "READY"


def test_response_translation_headers_and_bodies():
    result = {
        "statusCode": 200,
        "headers": {"A": "1", "B": "x"},
        "multiValueHeaders": {"B": ["2", "3"]},
        "body": base64.b64encode(b"\x00\x01").decode(),
        "isBase64Encoded": True,
    }
    assert response_headers(result) == [("A", "1"), ("B", "2"), ("B", "3")]
    assert response_body(result) == b"\x00\x01"
    assert response_body({"body": None}) == b""
    stream = response_body({"body": (c for c in ["a", "b"])})
    assert list(stream) == ["a", "b"]


def test_local_token_check_serves_only_health_and_the_page_shells_without_the_token():
    from ragchat.local_server import bearer_refusal

    token = "s3cret-token"
    unauthorized = (401, {"error": "Unauthorized"}, {"WWW-Authenticate": "Bearer"})
    for path in ("/ui", "/write", "/documents/ui", "/health"):
        assert bearer_refusal(token, "GET", path, "") is None, path
    for method, path in (
        ("GET", "/documents"),
        ("GET", "/"),
        ("POST", "/notes"),
        ("GET", "/chat/conversations"),
        ("GET", "/openapi.json"),
        ("GET", "/swagger"),
        ("POST", "/ui"),  # only a GET of a page is open
        ("GET", "/ui/"),
        ("GET", "/%75i"),  # the event would say /ui: not exempt, the token is still asked for
        ("GET", "/documents/ui/x"),
    ):
        assert bearer_refusal(token, method, path, "") == unauthorized, (method, path)
        assert bearer_refusal(token, method, path, "Bearer wrong") == unauthorized, (method, path)
        assert bearer_refusal(token, method, path, "Bearer s3cret-tokén") == unauthorized, (method, path)
        assert bearer_refusal(token, method, path, f"Bearer {token}") is None, (method, path)
    assert bearer_refusal(None, "GET", "/documents", "") is None  # no token configured: open
