"""``/`` opens the app for a browser; API clients keep ``GET /?text=`` and its JSON 400."""

from __future__ import annotations

import pytest
from ragchat.api.negotiation import wants_html
from ragchat.serving.events import Gateway

from tests.events import header, json_body
from tests.unit.api_support import make_api

CHROME = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
FIREFOX = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize(("accept", "html"), [
    (CHROME, True), (FIREFOX, True), ("text/html", True),
    (None, False), ("", False), ("*/*", False), ("application/json", False),
    ("application/json, text/html;q=0.5", False), ("text/html;q=0", False), ("text/html;q=x", False),
])  # fmt: skip
def test_a_page_load_wants_html_and_curl_does_not(accept: str | None, html: bool) -> None:
    assert wants_html(accept) is html


def test_a_browser_opening_the_root_is_sent_to_the_chat_page_under_its_stage() -> None:
    api = make_api()
    res = api.call("GET", "/", headers={"Accept": CHROME})
    assert res["statusCode"] == 302
    assert header(res, "Location") == "/Prod/ui"  # API Gateway serves the stage under /Prod


def test_api_clients_keep_their_json_answers_at_the_root() -> None:
    api = make_api()
    missing = api.call("GET", "/", headers={"Accept": "*/*"})
    assert missing["statusCode"] == 400
    assert "text" in json_body(missing)["error"]
    asked = api.call("GET", "/", query={"text": "anything at all?"}, headers={"Accept": CHROME})
    assert asked["statusCode"] == 200  # a question is answered whoever asks it
    assert set(json_body(asked)) == {"answer", "sources", "guardUsed"}


class _Headers(dict):  # case-insensitive enough for the gateway's lookups
    def get(self, name, default=None):
        return next((v for k, v in self.items() if k.lower() == name.lower()), default)


def test_serve_with_a_token_sends_a_browser_at_the_root_to_the_app_and_refuses_everything_else() -> None:
    gateway = Gateway(pool=None, body_limit=1024, api_token="s3cret", principal="local")  # type: ignore[arg-type]
    status, _body, headers = gateway.refusal("GET", "/", _Headers({"Accept": CHROME})) or (0, {}, {})
    assert (status, headers) == (302, {"Location": "/ui"})
    for method, path, accept in (("GET", "/", "*/*"), ("GET", "/documents", CHROME), ("POST", "/", CHROME)):
        refused = gateway.refusal(method, path, _Headers({"Accept": accept}))
        assert refused is not None and refused[0] == 401, (method, path)
    # with the token, the request reaches the handler (which answers or redirects itself)
    assert gateway.refusal("GET", "/", _Headers({"Accept": CHROME, "Authorization": "Bearer s3cret"})) is None
