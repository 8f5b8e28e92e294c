"""Attack 1 (a token-less ``ragchat serve`` open to any web page), attack 5 (a spoofed
``X-Forwarded-For``) and attack 7 (secrets in the access log), replayed against the real server."""

from __future__ import annotations

import json
import logging

import pytest
from ragchat.config import load_settings
from ragchat.local_server import InsecureBind, LocalServer

from tests.integration.serving_support import Served, serving
from tests.unit.api_support import make_api

EVIL = "http://evil.example"


def _document_ids(served: Served) -> list[str]:
    status, _, body = served.call("GET", "/documents")
    assert status == 200
    return [d["id"] for d in json.loads(body)["items"]]


def _add_note(
    served: Served, text: str = "private notes of the user", **headers: str
) -> tuple[int, dict[str, str], bytes]:
    return served.call("POST", "/notes", {"title": "Mine", "text": text}, **headers)


def test_another_sites_page_cannot_read_the_documents_through_cors() -> None:
    with serving("serve") as served:
        _add_note(served)
        status, headers, _ = served.call(
            "OPTIONS", "/documents", Origin=EVIL, **{"Access-Control-Request-Method": "GET"}
        )
        assert status == 403 and "access-control-allow-origin" not in headers
        status, headers, _ = served.call("GET", "/documents", Origin=EVIL)
        # the browser withholds the answer from the page: no CORS header at all, never "*"
        assert "access-control-allow-origin" not in headers


def test_an_origin_listed_in_the_settings_is_allowed_by_name() -> None:
    allowed = "http://localhost:5173"
    with serving("serve", env={"RAGCHAT_CORS_ORIGINS": allowed}) as served:
        status, headers, _ = served.call(
            "OPTIONS", "/notes", Origin=allowed, **{"Access-Control-Request-Method": "POST"}
        )
        assert status == 204 and headers["access-control-allow-origin"] == allowed
        status, headers, _ = _add_note(served, Origin=allowed)
        assert status == 202 and headers["access-control-allow-origin"] == allowed


def test_dns_rebinding_a_foreign_host_name_is_not_served() -> None:
    with serving("serve") as served:
        _add_note(served)
        status, _, body = served.call("GET", "/documents", Host="attacker.example:8000")
        assert status == 421 and "attacker.example" in json.loads(body)["error"]
        assert b"private" not in body
        # the names of this machine's loopback still work
        for host in ("localhost", f"127.0.0.1:{served.port}", f"[::1]:{served.port}"):
            assert served.call("GET", "/health", Host=host)[0] == 200


def test_more_host_names_can_be_allowed() -> None:
    with serving("serve", env={"RAGCHAT_ALLOWED_HOSTS": "ragchat.lan"}) as served:
        assert served.call("GET", "/documents", Host="ragchat.lan:8000")[0] == 200
        assert served.call("GET", "/documents", Host="other.lan")[0] == 421


def test_a_cross_site_delete_deletes_nothing() -> None:
    with serving("serve") as served:
        _add_note(served)
        [doc_id] = _document_ids(served)
        status, _, body = served.call("DELETE", f"/documents/{doc_id}", Origin=EVIL)
        assert status == 403 and "Cross-site" in json.loads(body)["error"]
        status, _, _ = served.call("DELETE", f"/documents/{doc_id}", **{"Sec-Fetch-Site": "cross-site"})
        assert status == 403
        assert _document_ids(served) == [doc_id]


def test_a_cross_site_text_plain_post_adds_nothing() -> None:
    with serving("serve") as served:
        body = json.dumps({"text": "planted by another site"})
        # what a <form enctype=text/plain> or a no-cors fetch can send without a preflight
        status, _, answer = served.call("POST", "/notes", Origin=EVIL, **{"Content-Type": "text/plain"})
        assert status == 403
        conn = served.connection()
        conn.request("POST", "/notes", body=body, headers={"Content-Type": "text/plain"})
        resp = conn.getresponse()
        assert resp.status == 415 and "application/json" in json.loads(resp.read())["error"]
        conn.close()
        conn = served.connection()  # no Content-Type at all: said so, not "media type none"
        conn.request("POST", "/notes", body=body)
        resp = conn.getresponse()
        error = json.loads(resp.read())["error"]
        assert resp.status == 415 and error == "No Content-Type: send the body as application/json"
        conn.close()
        assert _document_ids(served) == []
        _ = answer


def test_the_apps_own_pages_and_the_cli_still_change_things() -> None:
    with serving("serve") as served:
        own = f"http://127.0.0.1:{served.port}"
        assert _add_note(served, Origin=own, **{"Sec-Fetch-Site": "same-origin"})[0] == 202
        # curl / the CLI: no Origin, no Sec-Fetch-Site (other bytes: the same ones are a duplicate, 200)
        assert _add_note(served, "more private notes of the user")[0] == 202
        ids = _document_ids(served)
        assert served.call("DELETE", f"/documents/{ids[0]}", Origin=own)[0] == 204


def test_a_non_loopback_address_without_a_token_refuses_to_start() -> None:
    api = make_api()
    with pytest.raises(InsecureBind, match="RAGCHAT_API_TOKEN"):
        LocalServer(api.container, host="0.0.0.0", port=0)


def test_insecure_no_auth_binds_everywhere_and_says_where() -> None:
    api = make_api()
    server = LocalServer(api.container, host="0.0.0.0", port=0, insecure_no_auth=True)
    try:
        assert server.address.startswith("0.0.0.0:") and server.everywhere
        assert server.url.startswith("http://127.0.0.1:")
    finally:
        server.stop()


def test_a_token_allows_binding_everywhere() -> None:
    api = make_api({"RAGCHAT_API_TOKEN": "s3cret"})
    server = LocalServer(api.container, host="0.0.0.0", port=0)
    server.stop()
    assert load_settings({"RAGCHAT_API_TOKEN": "s3cret"}).api_token == "s3cret"


def test_a_spoofed_forwarded_for_does_not_escape_the_per_ip_limit() -> None:
    env = {
        "ENABLE_RATE_LIMITING": "true",
        "RATE_LIMIT_ASK_REQUESTS": "100",  # the owner's allowance is large: the IP limit decides
        "RATE_LIMIT_IP_REQUESTS": "5",
    }
    with serving("serve", env=env) as served:
        statuses = [
            served.call("GET", "/?text=hello", **{"X-Forwarded-For": f"203.0.113.{i}"})[0] for i in range(12)
        ]
    assert statuses.count(200) == 5 and statuses.count(429) == 7


def test_the_access_log_holds_no_question_token_or_upload_grant(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ragchat.serve")
    with serving("serve") as served:
        served.call("GET", "/?text=my+salary+is+secret&token=hunter2")
        served.call("POST", "/uploads/local/grant.token-value", {"x": 1})
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert '"GET /?text=***&token=***"' in logged
    assert "/uploads/local/***" in logged
    for secret in ("salary", "hunter2", "grant.token-value"):
        assert secret not in logged


def test_a_trusted_proxys_forwarded_for_is_believed() -> None:
    env = {
        "ENABLE_RATE_LIMITING": "true",
        "RATE_LIMIT_ASK_REQUESTS": "100",
        "RATE_LIMIT_IP_REQUESTS": "1",
        "RAGCHAT_TRUSTED_PROXIES": "127.0.0.1",
    }
    with serving("serve", env=env) as served:
        statuses = [
            served.call("GET", "/?text=hello", **{"X-Forwarded-For": f"203.0.113.{i}"})[0] for i in range(3)
        ]
    assert statuses == [200, 200, 200]  # three clients behind the proxy, one request each


@pytest.mark.parametrize(
    ("name", "value"),
    [("RAGCHAT_TRUSTED_PROXIES", "10.0.0.0/8, not-an-ip"), ("RAGCHAT_CORS_ORIGINS", "evil.example")],
)
def test_a_bad_list_setting_names_the_variable(name: str, value: str) -> None:
    from ragchat.config import ConfigError

    with pytest.raises(ConfigError, match=name):
        load_settings({name: value})


def test_lambda_log_lines_redact_tokens_and_questions() -> None:
    from ragchat.observability import root_logger

    [handler] = root_logger().handlers
    record = logging.LogRecord(
        "ragchat.services.example", logging.WARNING, __file__, 1,
        "calling %s with Authorization: Bearer %s",
        ("https://api.example/?text=my+secret+question", "tok3n-value"), None,
    )  # fmt: skip
    assert handler.filter(record)
    line = handler.format(record)
    assert "tok3n-value" not in line and "secret" not in line
    assert "Bearer ***" in line and "?text=***" in line


def test_the_chat_stream_adapter_takes_the_ip_from_api_gateway_not_x_forwarded_for() -> None:
    env = {"ENABLE_RATE_LIMITING": "true", "RATE_LIMIT_CHAT_REQUESTS": "100", "RATE_LIMIT_IP_REQUESTS": "1"}
    context = json.dumps(
        {
            "requestId": "r1",
            "authorizer": {"claims": {"sub": "local"}},
            "identity": {"sourceIp": "203.0.113.7"},
        }
    )
    with serving("adapter", env=env) as served:
        status, _, body = served.call("POST", "/chat/conversations", {})
        conv = json.loads(body)["id"]
        statuses = []
        for i in range(3):
            served.api.clock.advance(5)
            statuses.append(
                served.call(
                    "POST", f"/chat/conversations/{conv}/messages", {"content": f"sky {i}?"},
                    **{"X-Forwarded-For": f"198.51.100.{i}", "x-amzn-request-context": context},
                )[0]
            )  # fmt: skip
    # one address, API Gateway's (203.0.113.7), whatever the header claims
    assert status == 201 and statuses == [200, 429, 429]


def test_a_request_in_absolute_form_is_served_like_the_usual_form() -> None:
    """HTTP/1.1 servers must accept ``GET http://host/path`` (RFC 9112 §3.2.2). The open routes,
    the token check and the host check used to look at the whole URL: ``/health`` asked for a token
    and a presigned upload's receiver a JSON body."""
    with serving("serve", env={"RAGCHAT_API_TOKEN": "s3cret"}) as served:
        here = f"http://127.0.0.1:{served.port}"
        assert served.call("GET", f"{here}/health")[0] == 200  # no token needed, as for /health
        assert served.call("GET", f"{here}/documents")[0] == 401  # the token is still needed here
        token = {"Authorization": "Bearer s3cret"}
        status, _, body = served.call("GET", f"{here}/documents?limit=1", **token)
        assert status == 200 and "items" in json.loads(body)
        # the URL's authority is the host checked (it replaces Host): a foreign one is refused
        status, _, body = served.call("GET", "http://attacker.example/documents", **token)
        assert status == 421 and "attacker.example" in json.loads(body)["error"]
