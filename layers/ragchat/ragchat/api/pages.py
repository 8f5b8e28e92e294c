"""Area "ui": minimal HTML pages (``/ui`` ask, ``/write`` add a note or upload, ``/documents/ui``).

The pages are static shells: data is fetched from the JSON API by a few lines of script and rendered
with ``textContent`` only (never as HTML), so nothing from documents or answers can inject markup. API
calls go to the same origin and stage (relative URLs).

The shells hold no user data, so they are served without a principal (in the cloud their routes have
no authorizer; ``ragchat serve`` serves them without its bearer token). The page signs the user in
itself, as the server's settings say (``Settings.page_auth``, rendered as JSON into
``<script type="application/json" id="ragchat-config">``):

- ``none``: local without ``RAGCHAT_API_TOKEN``: no sign-in, the local server supplies the caller;
- ``token``: local with ``RAGCHAT_API_TOKEN``: the user types the token; calls send
  ``Authorization: Bearer <token>``;
- ``cognito``: the cloud: email + password go to Cognito's ``InitiateAuth`` (``USER_PASSWORD_AUTH``)
  straight from the browser; calls send the returned ID token as the raw ``Authorization`` value
  (what the API Gateway Cognito authorizer reads).

The ``Authorization`` value lives in ``sessionStorage`` (gone with the tab). A 401 from any API call
drops it and shows the sign-in form again (ID tokens expire after an hour).

Never render anything owner-specific here: these responses reach anyone.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ragchat.domain.errors import NotFound
from ragchat.domain.extraction import PRIMARY_EXTENSIONS
from ragchat.domain.labels import MAX_COLLECTION_CHARS

if TYPE_CHECKING:
    from ragchat.container import Container

_ASK_BODY = """<h2>Ask once</h2>
<form id=f class=row><input id=q placeholder="Ask a question about your notes" required>
<button>Ask</button></form><pre id=answer hidden></pre><ol id=sources class=sources></ol>
<h2>Chat</h2><div class=chat><aside>
<form id=new-conv><input id=collection placeholder="Collection (optional)" maxlength=@COLLECTION@>
<button id=new-conv-button>New conversation</button></form><ul id=convs></ul></aside>
<section><h3 id=conv-title class=muted>Start or pick a conversation</h3><div id=messages></div>
<form id=chat-form class=row hidden><input id=message placeholder="Your message" maxlength=4000 required>
<button id=send>Send</button></form><p id=chat-error class=error role=alert></p></section></div>"""

_WRITE_BODY = """<form id=f><input id=title placeholder="Title (optional)" maxlength=1000>
<textarea id=text rows=10 placeholder="Text" required></textarea><button>Add note</button></form>
<h2>…or upload a file</h2><form id=u><input id=file type=file accept="@UPLOAD_ACCEPT@">
<button>Upload</button></form>
<p><input id=collection placeholder="Collection for the note or file (optional)" maxlength=@COLLECTION@></p>
<p id=status class=muted role=status></p>"""

_DOCUMENTS_BODY = """<p><button id=refresh>Refresh</button></p><p id=doc-error class=error role=alert></p>
<table><thead><tr><th>Title</th><th>Status</th><th>Chunks</th><th>Error</th><th>Enabled</th><th>Created</th>
<th></th></tr></thead><tbody id=rows></tbody></table><p><button id=more hidden>More</button></p>"""

_PAGES = {
    "ask": ("Ask", _ASK_BODY),
    "write": ("Add a note", _WRITE_BODY),
    "documents": ("Documents", _DOCUMENTS_BODY),
}
# Where each page's shell lives, so its static links resolve under any stage prefix (``/Prod/…``).
_UP = {"ask": "", "write": "", "documents": "../"}
# The page scripts and the style sheet (``ragchat/web``), served at ``/static/<name>``.
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
STATIC_FILES = ("common.js", "ask.js", "write.js", "documents.js", "style.css")
WEB = Path(__file__).resolve().parent.parent / "web"


PageAuth = Literal["cognito", "token", "none"]


def page_config(auth: PageAuth, *, client_id: str | None = None, region: str | None = None) -> dict[str, str]:
    """What the page's script needs to sign in (nothing about any user)."""
    if auth != "cognito":
        return {"auth": auth}
    if not client_id or not region:
        raise ValueError("cognito sign-in needs the user-pool client id and the region")
    return {
        "auth": "cognito",
        "clientId": client_id,
        "region": region,
        "cognitoEndpoint": f"{cognito_origin(region)}/",
    }


def cognito_origin(region: str) -> str:
    return f"https://cognito-idp.{region}.amazonaws.com"


def config_json(config: dict[str, str]) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` survives, so a
    value can't close the element (``</script>``) or open a comment (``<!--``)."""
    text = json.dumps(config, separators=(",", ":"), sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _signin_form(auth: PageAuth) -> str:
    if auth == "cognito":
        fields = (
            '<input id=signin-user type=email autocomplete=username placeholder="Email" required>'
            '<input id=signin-secret type=password autocomplete=current-password placeholder="Password" '
            "required>"
        )
    else:
        fields = (
            '<input id=signin-secret type=password autocomplete=off placeholder="API token '
            '(RAGCHAT_API_TOKEN of ragchat serve)" required>'
        )
    return (
        "<section id=signin hidden><h2>Sign in</h2><p id=signin-note class=muted role=status></p>"
        f"<form id=signin-form>{fields}<button id=signin-button>Sign in</button></form>"
        "<p id=signin-error class=error role=alert></p></section>"
    )


def _fill(body: str) -> str:
    """The facts a page repeats from the domain: the collection length and the upload types."""
    accept = ",".join(PRIMARY_EXTENSIONS.values())
    return body.replace("@COLLECTION@", str(MAX_COLLECTION_CHARS)).replace("@UPLOAD_ACCEPT@", accept)


def render(page: str, config: dict[str, str] | None = None) -> str:
    title, body = _PAGES[page]
    up = _UP[page]
    config = config or {"auth": "none"}
    auth: PageAuth = config["auth"]  # type: ignore[assignment]
    # The Swagger page needs a principal, which a link click (a plain navigation) can't send: the
    # "API" link is only offered when the server needs no sign-in (local, no token).
    api_link = '<a data-p="/swagger">API</a>' if auth == "none" else ""
    account = (
        "<span id=account hidden><button id=sign-out type=button>Sign out</button></span>"
        if auth != "none"
        else "<span id=account hidden></span>"
    )
    signin = _signin_form(auth) if auth != "none" else "<section id=signin hidden></section>"
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f'<title>ragchat · {title}</title><link rel=stylesheet href="{up}static/style.css"></head><body>'
        '<nav><a data-p="/ui">Ask</a><a data-p="/write">Add</a><a data-p="/documents/ui">Documents</a>'
        f"{api_link}{account}</nav>"
        f'<script type="application/json" id="ragchat-config">{config_json(config)}</script>'
        f"<h1>{title}</h1>{signin}<main id=app hidden>{_fill(body)}</main>"
        f'<script src="{up}static/common.js"></script><script src="{up}static/{page}.js"></script>'
        "</body></html>"
    )


def content_security_policy(config: dict[str, str]) -> str:
    connect = "'self'"
    if config["auth"] == "cognito":
        connect += " " + cognito_origin(config["region"])  # exactly the user pool's endpoint
    return (
        f"default-src 'self'; script-src 'self'; style-src 'self'; connect-src {connect}; img-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )


def security_headers(config: dict[str, str]) -> dict[str, str]:
    """What every page and static file carries (SPEC §11)."""
    return {
        "Content-Security-Policy": content_security_policy(config),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
    }


@cache
def static_file(name: str) -> tuple[str, str] | None:
    """(content type, text) of a page script or the style sheet; ``None`` for any other name."""
    if name not in STATIC_FILES:
        return None
    return STATIC_TYPES[Path(name).suffix], (WEB / name).read_text(encoding="utf-8")


def router(container: Container) -> APIGatewayRouter:
    r = APIGatewayRouter()  # type: ignore[no-untyped-call]

    def config() -> dict[str, str]:
        settings = container.settings
        return page_config(
            settings.page_auth, client_id=settings.cognito_client_id, region=settings.aws_region
        )

    def page(name: str) -> Response[str]:
        # No principal needed: the shell is the same for everyone (see the module docstring).
        current = config()
        return Response(
            status_code=200,
            content_type="text/html; charset=utf-8",
            body=render(name, current),
            headers=security_headers(current),
        )

    @r.get("/ui", summary="Ask page", tags=["ui"], include_in_schema=False)
    def ui() -> Response[str]:
        return page("ask")

    @r.get("/write", summary="Add a note / upload", tags=["ui"], include_in_schema=False)
    def write() -> Response[str]:
        return page("write")

    @r.get("/documents/ui", summary="Documents page", tags=["ui"], include_in_schema=False)
    def documents_ui() -> Response[str]:
        return page("documents")

    @r.get("/static/<name>", summary="Page script or style sheet", tags=["ui"], include_in_schema=False)
    def static(name: str) -> Response[str]:
        found = static_file(name)
        if found is None:
            raise NotFound("Not found")
        ctype, text = found
        headers = {**security_headers(config()), "Cache-Control": "public, max-age=300"}
        return Response(status_code=200, content_type=ctype, body=text, headers=headers)

    return r
