"""Area "ui": minimal HTML pages (``/ui`` chat and ``/ui/c/<id>`` one conversation, ``/write`` add
notes and files, ``/documents/ui``).

The pages are static shells: data is fetched from the JSON API by a few lines of script and rendered
with ``textContent`` only (never as HTML), so nothing from documents or answers can inject markup. API
calls go to the same origin and stage (relative URLs).

The shells hold no user data, so they are served without a principal (in the cloud their routes have
no authorizer; ``ragchat serve`` serves them without its bearer token). The page signs the user in
itself, as the server's settings say (``Settings.page_auth``, rendered as JSON into
``<script type="application/json" id="ragchat-config">``):

- ``none``: local with no token at all (``--insecure-no-auth``): no sign-in, the local server
  supplies the caller;
- ``token``: local (``RAGCHAT_API_TOKEN``, or the token ``ragchat serve`` makes for its run): the
  link the server prints (``/ui#token=…``) signs the tab in, or the user types the token; calls send
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
from ragchat.domain.extraction import EXTENSION_TYPES, PRIMARY_EXTENSIONS
from ragchat.domain.labels import MAX_COLLECTION_CHARS

if TYPE_CHECKING:
    from ragchat.bootstrap import Container

# The chat page; ``/ui/c/<id>`` is the same shell with a conversation open (ask.js reads the address).
_ASK_BODY = """<div class=chat-layout><aside id=sidebar class=sidebar aria-label=Conversations>
<form id=new-conv class=new-conv><button id=new-conv-button class="btn primary wide">New conversation</button>
<label for=collection class=label>Collection <span class=muted>(optional)</span></label>
<input id=collection placeholder="All notes" maxlength=@COLLECTION@ autocomplete=off></form>
<h2 class=side-heading>Recent</h2><div id=search-box class=search-box hidden>
<label for=conv-search class=sr-only>Search conversations</label>
<input id=conv-search type=search placeholder="Search conversations" autocomplete=off></div>
<ul id=convs class=convs></ul><p id=convs-empty class="muted small" hidden>No conversations yet.</p>
<p id=convs-none class="muted small" role=status hidden></p></aside>
<div id=scrim class=scrim hidden></div>
<section class=chat-main aria-labelledby=conv-title><header class=chat-head>
<button id=menu type=button class="icon-btn menu" aria-label="Conversations" aria-controls=sidebar
aria-expanded=false></button><h2 id=conv-title>Ask your notes</h2>
<button id=export type=button class="btn small" hidden
title="Download this conversation as Markdown">Export</button></header>
<div id=scroller class=scroller><div id=welcome class=welcome>
<p class=lead>Ask anything about your documents: every answer cites the passages it comes from.
Earlier conversations are in <span class=wide-only>the list on the left</span><span
class=narrow-only>the menu at the top left</span>.</p>
<div id=suggest-box hidden><h3 class=suggest-h>Try asking</h3><ul id=suggested class=suggested></ul></div>
<p id=no-docs class=no-docs hidden>You have no documents yet — <a data-p="/write">add one</a>.</p>
<p id=indexing-note class="note warn" role=status></p><p id=samples-note class="muted small"></p></div>
<div id=messages class=messages></div></div>
<div class=composer-wrap><button id=jump type=button class="btn small jump" hidden>Jump to latest ↓</button>
<p id=chat-error class=error role=alert></p>
<ul id=attached class=uploads aria-live=polite></ul>
<form id=chat-form class=composer><label for=message class=sr-only>Message</label>
<textarea id=message rows=1 placeholder="Message your notes…" maxlength=4000 required></textarea>
<button id=attach type=button class="icon-btn attach" aria-label="Attach files"
title="Attach files (they are added to your documents)">+</button>
<input id=attach-file type=file multiple accept="@UPLOAD_ACCEPT@" hidden>
<button id=send class="btn primary send">Send</button>
<button id=stop type=button class="btn stop" hidden>Stop</button></form>
<p class="hint muted small">Enter sends · Shift+Enter adds a line · Esc stops</p>
<p id=chat-status class=sr-only role=status></p></div></section></div>"""

# Files first (the common case; on a phone the upload form is not below the note's text box).
_WRITE_BODY = """<div class=cards><section class="card wide collection">
<label for=collection class=label>Collection
<span class=muted>(optional; for the notes and files added here)</span></label>
<input id=collection maxlength=@COLLECTION@ autocomplete=off placeholder="All notes"></section>
<section class=card aria-labelledby=upload-h><h2 id=upload-h>Upload files</h2>
<form id=u class=stack><div id=drop class=drop><label for=file class=label>Files
<span class=muted>(@UPLOAD_LIST@)</span></label>
<input id=file type=file multiple accept="@UPLOAD_ACCEPT@" aria-describedby=file-limit>
<p class="muted small drop-hint">or drop them here</p></div>
<p id=file-limit class=muted></p>
<div class=actions><button class="btn primary" id=upload>Upload</button></div></form>
<ul id=uploads class=uploads aria-live=polite></ul></section>
<section class=card aria-labelledby=note-h><h2 id=note-h>Write a note</h2>
<form id=f class=stack><label for=title class=label>Title <span class=muted>(optional)</span></label>
<input id=title maxlength=1000 autocomplete=off>
<label for=text class=label>Text</label><textarea id=text rows=6 required></textarea>
<div class=actions><button class="btn primary">Add note</button></div></form>
<p id=status class="status muted" role=status></p></section></div>"""

_DOCUMENTS_BODY = """<section class=card><div class="toolbar doc-tools">
<label for=doc-search class=sr-only>Search titles</label>
<input id=doc-search type=search placeholder="Search titles" autocomplete=off>
<label for=doc-collection class=sr-only>Collection</label>
<select id=doc-collection><option value="">All collections</option></select>
<button id=refresh class=btn>Refresh</button></div>
<p id=doc-live class="muted small" role=status></p><p id=doc-error class=error role=alert></p>
<div class=table-wrap><table><thead><tr><th>Title</th><th>Status</th><th>Error</th>
<th>In answers</th><th>Added</th><th><span class=sr-only>Actions</span></th></tr></thead>
<tbody id=rows></tbody></table></div><p id=doc-none class=muted hidden></p>
<p><button id=more class=btn hidden>More</button></p></section>"""

_PAGES = {
    "ask": ("Chat", _ASK_BODY),
    "write": ("Add notes and files", _WRITE_BODY),
    "documents": ("Documents", _DOCUMENTS_BODY),
}
# Where each page's shell lives, so its static links resolve under any stage prefix (``/Prod/…``).
_UP = {"ask": "", "write": "", "documents": "../"}
_NAV = (("ask", "/ui", "Chat"), ("write", "/write", "Add"), ("documents", "/documents/ui", "Documents"))
# The page scripts and the style sheet (``ragchat/web``), served at ``/static/<name>``; the vendored
# Markdown renderer and sanitizer (``web/vendor``, versions in its README) at ``/static/<file>`` too.
STATIC_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
STATIC_FILES = {
    **{
        n: n
        for n in (
            "common.js",
            "markdown.js",
            "viewer.js",
            "uploads.js",
            "ask.js",
            "write.js",
            "documents.js",
            "workspaces.js",
            "style.css",
            "chat.css",
            "workspaces.css",
            "favicon.svg",
        )
    },
    "marked.min.js": "vendor/marked.min.js",
    "purify.min.js": "vendor/purify.min.js",
}
# Served as one file made of several: the chat page's style sheet is the common one followed by its
# own rules (one request, as before the split), while the other pages fetch only ``style.css``.
STATIC_BUNDLES = {"chat-page.css": ("style.css", "chat.css")}
# Each page's scripts after common.js, in order (the chat page renders Markdown); viewer.js (the side
# panel), uploads.js (attaching a file on the chat page) and workspaces.js with workspaces.css (the
# switcher, for a user in a shared workspace) are fetched when first needed.
_SCRIPTS = {
    "ask": ("marked.min.js", "purify.min.js", "markdown.js", "ask.js"),
    "write": ("uploads.js", "write.js"),
    "documents": ("documents.js",),
}
# Each page's style sheet: the chat page's own rules are not fetched by the other pages.
_STYLES = {"ask": ("chat-page.css",), "write": ("style.css",), "documents": ("style.css",)}
WEB = Path(__file__).resolve().parent.parent / "web"


PageAuth = Literal["cognito", "token", "none"]
# The routes a page adapts to, named in its config (``features``, space-separated) so it never fetches
# /openapi.json to find out (issue 45). The API of this version has each of them.
FEATURES = "rename uploads"


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
            "<input id=signin-user aria-label=Email type=email autocomplete=username "
            'placeholder="Email" required><input id=signin-secret aria-label=Password type=password '
            'autocomplete=current-password placeholder="Password" required>'
        )
    else:
        fields = (
            '<input id=signin-secret aria-label="API token" type=password autocomplete=off '
            'placeholder="API token (printed by ragchat serve, or its RAGCHAT_API_TOKEN)" required>'
        )
    return (
        "<section id=signin class='card signin' hidden><h2>Sign in</h2>"
        "<p id=signin-note class=muted role=status></p><form id=signin-form class=stack>"
        f'{fields}<button id=signin-button class="btn primary">Sign in</button></form>'
        "<p id=signin-error class=error role=alert></p></section>"
    )


def _fill(body: str) -> str:
    """The facts a page repeats from the domain: the collection length and the upload types."""
    accept = ",".join(EXTENSION_TYPES)  # every extension (.jpeg as well as .jpg): the picker filters by it
    listed = ", ".join(PRIMARY_EXTENSIONS.values())
    return (
        body.replace("@COLLECTION@", str(MAX_COLLECTION_CHARS))
        .replace("@UPLOAD_ACCEPT@", accept)
        .replace("@UPLOAD_LIST@", listed)
    )


def render(page: str, config: dict[str, str] | None = None, *, up: str | None = None) -> str:
    """``up``: the way from the page's address to the static files when it is not the page's usual
    one (a conversation's address ``/ui/c/<id>`` is two levels below ``/ui``'s)."""
    title, body = _PAGES[page]
    up = _UP[page] if up is None else up
    config = config or {"auth": "none"}
    auth: PageAuth = config["auth"]  # type: ignore[assignment]
    # The Swagger page needs a principal, which a link click (a plain navigation) can't send: the
    # "API" link is only offered when the server needs no sign-in (local, no token).
    api_link = '<a data-p="/swagger">API</a>' if auth == "none" else ""
    account = (
        '<span id=account hidden><button id=sign-out type=button class="btn ghost">Sign out</button></span>'
        if auth != "none"
        else "<span id=account hidden></span>"
    )
    signin = _signin_form(auth) if auth != "none" else "<section id=signin hidden></section>"
    nav = "".join(
        f'<a data-p="{path}"{" aria-current=page" if key == page else ""}>{label}</a>'
        for key, path, label in _NAV
    )
    heading = f"<h1 class=sr-only>{title}</h1>" if page == "ask" else f"<h1>{title}</h1>"
    scripts = "".join(f'<script src="{up}static/{name}"></script>' for name in _SCRIPTS[page])
    styles = "".join(f'<link rel=stylesheet href="{up}static/{name}">' for name in _STYLES[page])
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f'<title>ragchat · {title}</title><link rel=icon href="{up}static/favicon.svg">{styles}</head>'
        f"<body class=page-{page}><header class=topbar><span class=brand>ragchat</span>"
        f"<nav>{nav}{api_link}{account}</nav></header>"
        f'<script type="application/json" id="ragchat-config">{config_json(config)}</script>'
        f"<div class=page>{heading}{signin}<main id=app hidden>{_fill(body)}</main></div>"
        f'<script src="{up}static/common.js"></script>{scripts}'
        "</body></html>"
    )


def content_security_policy(config: dict[str, str], *, upload_origin: str | None = None) -> str:
    """``upload_origin``: the documents bucket's origin on AWS, where ``/write`` POSTs a presigned
    direct upload (``Settings.documents_bucket_origin``)."""
    connect = "'self'"
    if config["auth"] == "cognito":
        connect += " " + cognito_origin(config["region"])  # exactly the user pool's endpoint
    if upload_origin:
        connect += " " + upload_origin  # exactly the documents bucket's regional endpoint
    return (
        f"default-src 'self'; script-src 'self'; style-src 'self'; connect-src {connect}; "
        "img-src 'self' data:; "  # data: the document viewer's PDF page images
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )


def security_headers(config: dict[str, str], *, upload_origin: str | None = None) -> dict[str, str]:
    """What every page and static file carries (docs/security.md)."""
    return {
        "Content-Security-Policy": content_security_policy(config, upload_origin=upload_origin),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
    }


@cache
def static_file(name: str) -> tuple[str, str] | None:
    """(content type, text) of a page script or the style sheet; ``None`` for any other name."""
    if name in STATIC_BUNDLES:
        parts = [(WEB / STATIC_FILES[part]).read_text(encoding="utf-8") for part in STATIC_BUNDLES[name]]
        return STATIC_TYPES[Path(name).suffix], "".join(parts)
    if name not in STATIC_FILES:
        return None
    return STATIC_TYPES[Path(name).suffix], (WEB / STATIC_FILES[name]).read_text(encoding="utf-8")


def router(container: Container) -> APIGatewayRouter:
    r = APIGatewayRouter()  # type: ignore[no-untyped-call]

    def config() -> dict[str, str]:
        settings = container.settings
        shown = page_config(
            settings.page_auth, client_id=settings.cognito_client_id, region=settings.aws_region
        )
        # the size limit the Add page states before anything is sent (the upload grant's limit)
        # and what the API offers that a page would otherwise look up in /openapi.json (67 KB, on the
        # first visit): renaming a conversation (PATCH /chat/conversations/{id}), presigned uploads
        # (POST /uploads)
        return {**shown, "maxUploadBytes": str(container.uploads.max_bytes), "features": FEATURES}

    def page(name: str, up: str | None = None) -> Response[str]:
        # No principal needed: the shell is the same for everyone (see the module docstring).
        current = config()
        return Response(
            status_code=200,
            content_type="text/html; charset=utf-8",
            body=render(name, current, up=up),
            headers=security_headers(current, upload_origin=container.settings.documents_bucket_origin),
        )

    @r.get("/ui", summary="Ask page", tags=["ui"], include_in_schema=False)
    def ui() -> Response[str]:
        return page("ask")

    @r.get("/ui/c/<conversation_id>", summary="A conversation", tags=["ui"], include_in_schema=False)
    def ui_conversation(conversation_id: str) -> Response[str]:
        # The same shell: its script opens the conversation the address names (or says it is gone).
        # The id is never written into the page (it reaches anyone, see the module docstring).
        return page("ask", up="../../")

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
        upload_origin = container.settings.documents_bucket_origin
        headers = {
            **security_headers(config(), upload_origin=upload_origin),
            "Cache-Control": "public, max-age=300",
        }
        return Response(status_code=200, content_type=ctype, body=text, headers=headers)

    @r.get("/favicon.ico", summary="The pages' icon", tags=["ui"], include_in_schema=False)
    def favicon() -> Response[str]:
        return favicon_response()

    return r


def favicon_response() -> Response[str]:
    """Browsers ask for ``/favicon.ico`` on every page load: answered (no principal, as the shells),
    never a 401. The SVG icon under the name browsers ask for (Chromium and Firefox read it by its
    type)."""
    ctype, text = static_file("favicon.svg") or ("image/svg+xml", "")
    headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
    return Response(status_code=200, content_type=ctype, body=text, headers=headers)
