"""The HTML pages: served as HTML to anyone (no principal: they are shells that render no data
server-side), told how to sign in by an escaped JSON config, and using no HTML sinks.

What the pages do in a browser is tested in ``tests/e2e/test_pages_browser.py`` (headless Chromium).
"""

from __future__ import annotations

import json
import posixpath
import re

import pytest
from ragchat.api.pages import config_json, page_config, render

from tests.events import header
from tests.unit.api_support import Api, make_api

PAGES = ("/ui", "/write", "/documents/ui")
# Every way a script could turn data into markup or code.
HTML_SINKS = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function")


COGNITO = {"COGNITO_CLIENT_ID": "4example5client6id", "AWS_REGION": "eu-west-1"}
MODES = {
    "none": ({}, {"auth": "none"}),
    "token": ({"RAGCHAT_API_TOKEN": "s3cret-token"}, {"auth": "token"}),
    "cognito": (
        COGNITO,
        {
            "auth": "cognito",
            "clientId": "4example5client6id",
            "region": "eu-west-1",
            "cognitoEndpoint": "https://cognito-idp.eu-west-1.amazonaws.com/",
        },
    ),
}
CONFIG_RE = re.compile(r'<script type="application/json" id="ragchat-config">(.*?)</script>', re.S)
SCRIPT_SRC_RE = re.compile(r'<script src="((?:\.\./)?static/[\w.-]+)"></script>')
# The Markdown renderer and sanitizer, vendored unchanged (``web/vendor``): the chat page's only
# route from text to markup is marked's output through DOMPurify (checked in the browser tests).
VENDORED = ("static/marked.min.js", "static/purify.min.js")


def scripts_of(api: Api, path: str, body: str, *, vendored: bool = True) -> list[str]:
    """The scripts a page loads, fetched the way the browser would (relative to the page's path)."""
    texts = []
    for src in SCRIPT_SRC_RE.findall(body):
        if not vendored and src in VENDORED:
            continue
        url = posixpath.normpath(posixpath.join(posixpath.dirname(path), src))
        res = api.call("GET", url, principal=None)
        assert res["statusCode"] == 200, url
        texts.append(res["body"])
    return texts


def page_and_scripts(api: Api, path: str, *, vendored: bool = True, **kwargs: str | None) -> str:
    body = api.call("GET", path, **kwargs)["body"]
    return "\n".join([body, *scripts_of(api, path, body, vendored=vendored)])


def page_config_of(body: str) -> dict[str, str]:
    (raw,) = CONFIG_RE.findall(body)
    loaded: dict[str, str] = json.loads(raw)
    return loaded


def test_pages_are_html_and_need_no_principal():
    api = make_api()
    for path in PAGES:
        res = api.call("GET", path, principal=None)
        assert res["statusCode"] == 200, path
        assert header(res, "Content-Type").startswith("text/html")
        scripts = SCRIPT_SRC_RE.findall(res["body"])
        assert scripts[0] == "static/common.js" or scripts[0] == "../static/common.js", path
        texts = scripts_of(api, path, res["body"])
        assert "textContent" in texts[0], path
        # the page's own script last; the chat page first loads the Markdown renderer and sanitizer
        expected = {
            "/ui": ["marked.min.js", "purify.min.js", "markdown.js", "ask.js"],
            "/write": ["uploads.js", "write.js"],
            "/documents/ui": ["documents.js"],
        }[path]
        assert [s.rsplit("/", 1)[1] for s in scripts[1:]] == expected, path
        # the chat page's own rules are not fetched by the other pages (page weight, issue 33)
        sheets = re.findall(r'<link rel=stylesheet href="(?:\.\./)?static/([\w.-]+)">', res["body"])
        assert sheets == (["chat-page.css"] if path == "/ui" else ["style.css"]), path
    # fetched by the page when needed: the side panel, uploads from the chat, the workspace switcher
    for name in ("viewer.js", "uploads.js", "workspaces.js", "workspaces.css", "chat.css"):
        assert api.call("GET", f"/static/{name}", principal=None)["statusCode"] == 200, name
    common, chat = (
        api.call("GET", f"/static/{n}", principal=None)["body"] for n in ("style.css", "chat.css")
    )
    assert api.call("GET", "/static/chat-page.css", principal=None)["body"] == common + chat
    marked = api.call("GET", "/static/marked.min.js", principal=None)
    assert header(marked, "Content-Type").startswith("text/javascript") and "marked v18" in marked["body"]
    purify = api.call("GET", "/static/purify.min.js", principal=None)
    assert "DOMPurify 3." in purify["body"] and "sourceMappingURL" not in purify["body"]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_pages_load_without_a_principal_and_carry_the_sign_in_config(mode: str):
    env, expected = MODES[mode]
    api = make_api(env)
    for path in PAGES:
        res = api.call("GET", path, principal=None)
        assert res["statusCode"] == 200, path
        shown = page_config_of(res["body"])
        assert shown.pop("maxUploadBytes") == str(api.container.uploads.max_bytes), path
        assert shown.pop("features").split() == ["rename", "uploads"], path
        assert shown == expected, path
        # the same shell for everyone: nothing depends on who asks
        assert api.call("GET", path, principal="alice")["body"] == res["body"], path


@pytest.mark.parametrize("mode", sorted(MODES))
def test_sign_in_form_and_api_link_per_mode(mode: str):
    body = page_and_scripts(make_api(MODES[mode][0]), "/ui", principal=None)
    ids = set(re.findall(r"\bid=([\w-]+)", body))
    if mode == "none":
        assert '<a data-p="/swagger">API</a>' in body
        assert not {"signin-form", "sign-out"} & ids
    else:  # Swagger needs a principal, which a link can't send
        assert "/swagger" not in body
        assert {"signin-form", "signin-secret", "signin-error", "sign-out"} <= ids
        assert ("signin-user" in ids) is (mode == "cognito")
        assert "Signed out: please sign in again" in body
        # localStorage holds one thing: the local session's CSRF half (useless without the HttpOnly
        # cookie; serving/sessions.py), never a token; Cognito's ID token stays in sessionStorage
        assert "sessionStorage" in body
        assert re.findall(r"localStorage\.setItem\([^)]*\)", body) == [
            "localStorage.setItem(SESSION_KEY, body.csrf)"
        ]
    if mode == "cognito":
        for part in ("AWSCognitoIdentityProviderService.InitiateAuth", "USER_PASSWORD_AUTH", "IdToken"):
            assert part in body, part


def test_page_data_and_docs_still_need_a_principal_in_every_mode():
    for env, _ in MODES.values():
        api = make_api(env)
        for path in ("/documents", "/notes", "/chat/conversations", "/openapi.json", "/swagger"):
            res = api.call("GET", path, principal=None)
            assert res["statusCode"] == 401, (env, path)


def test_config_values_cannot_break_out_of_the_script_element():
    hostile = "</script><script>alert(1)</script><!--&"
    config = page_config("cognito", client_id=hostile, region="eu-west-1")
    body = render("ask", config)
    (raw,) = CONFIG_RE.findall(body)  # the element still ends where the server meant it to
    assert json.loads(raw)["clientId"] == hostile  # and the value reads back intact
    for bad in ("<", ">", "&"):
        assert bad not in raw
    assert body.count("<script>") == 0 and "alert(1)" not in body.replace(raw, "")
    assert config_json({"a": "<!--"}) == '{"a":"\\u003c!--"}'


def test_an_invalid_cognito_setting_stops_start_up():
    from ragchat.config import ConfigError, load_settings

    with pytest.raises(ConfigError, match="COGNITO_CLIENT_ID"):
        load_settings({"COGNITO_CLIENT_ID": "</script>"})
    with pytest.raises(ConfigError, match="AWS_REGION"):
        load_settings({"COGNITO_CLIENT_ID": "abc", "AWS_REGION": "eu-west-1; connect-src *"})
    assert load_settings({"COGNITO_CLIENT_ID": ""}).page_auth == "none"


def test_pages_never_render_data_as_html():
    api = make_api()
    for path in PAGES:
        shell = api.call("GET", path)["body"]
        body = page_and_scripts(api, path, vendored=False)  # our own code; DOMPurify itself parses HTML
        for sink in HTML_SINKS:
            assert sink not in body, (path, sink)
        # no inline script: each <script> element loads a file, or is the JSON config (not executed)
        tags = re.findall(r"<script[^>]*>", shell)
        assert tags and all('src="' in t or 'type="application/json"' in t for t in tags), path


@pytest.mark.parametrize("mode", sorted(MODES))
def test_pages_forbid_outside_scripts_and_connections(mode: str):
    api = make_api(MODES[mode][0])
    for path in PAGES:
        csp = header(api.call("GET", path), "Content-Security-Policy")
        directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
        assert directives["default-src"] == "'self'"
        # cognito: exactly the user pool's endpoint, for the sign-in call
        cognito = " https://cognito-idp.eu-west-1.amazonaws.com" if mode == "cognito" else ""
        assert directives["connect-src"] == "'self'" + cognito
        assert directives["script-src"] == "'self'"  # no inline script, nothing from elsewhere
        assert directives["frame-ancestors"] == "'none'"


def test_pages_and_their_files_carry_the_security_headers():
    api = make_api()
    for path in (*PAGES, "/static/common.js", "/static/style.css"):
        res = api.call("GET", path, principal=None)
        assert res["statusCode"] == 200, path
        assert header(res, "X-Content-Type-Options") == "nosniff", path
        assert header(res, "Referrer-Policy") == "no-referrer", path
        assert "frame-ancestors 'none'" in header(res, "Content-Security-Policy"), path
    assert header(api.call("GET", "/static/ask.js"), "Content-Type").startswith("text/javascript")
    assert header(api.call("GET", "/static/style.css"), "Content-Type").startswith("text/css")


@pytest.mark.parametrize("name", ["missing.js", "..%2Fapi%2Fpages.py", "pages.py", "common.js.map"])
def test_only_the_page_files_are_served(name: str):
    res = make_api().call("GET", f"/static/{name}", principal=None)
    assert res["statusCode"] == 404
    assert json.loads(res["body"]) == {"error": "Not found"}


def test_ui_page_has_ask_and_chat():
    body = page_and_scripts(make_api(), "/ui")
    ids = set(re.findall(r"\bid=([\w-]+)", body))
    assert {"new-conv", "convs", "messages", "chat-form", "chat-error", "suggested"} <= ids
    assert not {"q", "answer", "ask-once"} & ids  # one composer: no separate "Ask once" box
    for endpoint in (
        "'/chat/conversations'",
        "'/chat/conversations/'",
        "'/messages'",
        "'/stop'",
        "viewer.js",  # the side panel, fetched when first opened
        "uploads.js",  # attaching a file, fetched when first needed
    ):
        assert endpoint in body, endpoint
    assert "text/event-stream" in body and "getReader()" in body  # answers stream in


def test_ui_page_names_what_the_browser_tests_rely_on():
    body = make_api().call("GET", "/ui")["body"]
    assert "<label for=message class=sr-only>Message</label>" in body
    assert re.search(r"<textarea id=message\b", body)
    for button in ("New conversation", "Send", "Stop"):
        assert re.search(rf"<button[^>]*>{button}</button>", body), button


def test_a_conversation_address_is_the_chat_shell_without_its_id():
    """/ui/c/<id> (a reload or a shared link) is the chat page's shell, its files two levels up; the id
    is not written into it (the shell reaches anyone) and no principal is needed."""
    api = make_api()
    res = api.call("GET", "/ui/c/01M8GPDR55KJ6E98C09Q20EZ04", principal=None)
    assert res["statusCode"] == 200 and header(res, "Content-Type").startswith("text/html")
    body = res["body"]
    assert '<script src="../../static/ask.js"></script>' in body
    assert '<link rel=stylesheet href="../../static/chat-page.css">' in body
    assert "01M8GPDR55KJ6E98C09Q20EZ04" not in body
    assert body == api.call("GET", "/ui", principal=None)["body"].replace('"static/', '"../../static/')


def test_documents_ui_is_not_taken_for_a_document_id():
    api = make_api()
    res = api.call("GET", "/documents/ui")
    assert header(res, "Content-Type").startswith("text/html")


AWS_ENV = {
    "RAGCHAT_BACKEND": "aws",
    "DOCUMENTS_TABLE": "docs",
    "CONVERSATIONS_TABLE": "convs",
    "COUNTERS_TABLE": "counters",
    "DOCUMENTS_BUCKET": "ragchat-docs-123",
    "RAGCHAT_VECTOR_INDEX": "sqlite",
    "AWS_REGION": "eu-west-1",
    "COGNITO_CLIENT_ID": "abc",
}


def test_on_aws_the_pages_may_post_exactly_to_the_documents_bucket():
    """``/write``'s presigned POST goes straight to the bucket: its origin is in connect-src."""
    api = make_api(AWS_ENV)
    bucket = "https://ragchat-docs-123.s3.eu-west-1.amazonaws.com"
    for path in (*PAGES, "/static/write.js"):
        csp = header(api.call("GET", path, principal=None), "Content-Security-Policy")
        directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
        connect = directives["connect-src"].split()
        assert connect == ["'self'", "https://cognito-idp.eu-west-1.amazonaws.com", bucket], path
        assert directives["form-action"] == "'self'" and directives["default-src"] == "'self'"
    # locally uploads go to the server itself: no bucket
    local = header(
        make_api({"DOCUMENTS_BUCKET": "ragchat-docs-123"}).call("GET", "/write"), "Content-Security-Policy"
    )
    assert "amazonaws" not in local


def test_the_bucket_origin_is_the_one_the_s3_adapter_presigns_for(monkeypatch: pytest.MonkeyPatch):
    import boto3
    from ragchat.adapters.aws.s3 import S3_CLIENT_CONFIG, S3BlobStore
    from ragchat.config import load_settings

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    for region in ("us-east-1", "eu-west-1", "ap-southeast-2"):
        settings = load_settings({**AWS_ENV, "AWS_REGION": region})
        client = boto3.session.Session(region_name=region).client("s3", config=S3_CLIENT_CONFIG)
        store = S3BlobStore("ragchat-docs-123", client)
        upload = store.presign_post(
            "uploads/alice/x.txt",
            content_type="text/plain",
            min_bytes=1,
            max_bytes=10,
            expires_in=60,
            metadata={},
        )
        assert upload.url.rstrip("/") == settings.documents_bucket_origin, region


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"DOCUMENTS_BUCKET": "docs; connect-src *"}, "DOCUMENTS_BUCKET"),
        ({"DOCUMENTS_BUCKET": "My.Bucket"}, "DOCUMENTS_BUCKET"),
        ({"AWS_REGION": "eu-west-1 https://evil.example", "COGNITO_CLIENT_ID": ""}, "AWS_REGION"),
    ],
)
def test_a_bucket_or_region_that_cannot_be_an_origin_stops_start_up(env: dict[str, str], variable: str):
    from ragchat.config import ConfigError, load_settings

    with pytest.raises(ConfigError, match=variable):
        load_settings({**AWS_ENV, **env})


def test_the_favicon_is_an_icon_for_anyone_never_a_401():
    """Browsers ask for /favicon.ico on every page load; it answered 401 (issue 45)."""
    from ragchat.serving.events import bearer_refusal

    api = make_api({"RAGCHAT_API_TOKEN": "s3cret-token"})
    res = api.call("GET", "/favicon.ico", principal=None)
    assert res["statusCode"] == 200
    assert header(res, "Content-Type") == "image/svg+xml" and res["body"].startswith("<svg")
    # ragchat serve lets it through without the token, as the page shells
    assert bearer_refusal("s3cret-token", "GET", "/favicon.ico", "") is None
    assert bearer_refusal("s3cret-token", "GET", "/documents", "") is not None
    # and every page names it
    for path in PAGES:
        assert 'rel=icon href="' in api.call("GET", path, principal=None)["body"], path
