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
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ragchat.domain.extraction import PRIMARY_EXTENSIONS
from ragchat.domain.labels import MAX_COLLECTION_CHARS

if TYPE_CHECKING:
    from ragchat.container import Container

_STYLE = """
body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
nav a{margin-right:1rem} textarea,input{width:100%;box-sizing:border-box;margin:.25rem 0;padding:.4rem}
button{padding:.4rem 1rem;cursor:pointer} pre{white-space:pre-wrap;background:#f5f5f5;padding:1rem}
li{margin:.4rem 0} .muted{color:#777;font-size:.9em} table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.3rem;text-align:left;vertical-align:top}
.error{color:#b00020;white-space:pre-wrap} .row{display:flex;gap:.5rem;align-items:center}
.row input{flex:1} .chat{display:grid;grid-template-columns:15rem 1fr;gap:1.5rem}
@media (max-width:40rem){.chat{grid-template-columns:1fr}}
#convs{list-style:none;padding:0;margin:.5rem 0} #convs li{margin:.2rem 0}
#convs button{width:100%;text-align:left;background:none;border:1px solid transparent;border-radius:4px;
padding:.3rem .5rem} #convs button:hover{border-color:#ccc} #convs li.current button{background:#eef3ff;
border-color:#9bb5f0} #convs .muted{display:block}
#messages{display:flex;flex-direction:column;gap:.75rem;margin:.5rem 0}
.msg{padding:.6rem .8rem;border-radius:8px;max-width:90%} .msg p{margin:.2rem 0;white-space:pre-wrap}
.msg.user{align-self:flex-end;background:#e8f0fe} .msg.assistant{align-self:flex-start;background:#f3f3f3}
.msg.system-summary{align-self:center;background:#fff8e1;font-size:.9em} .msg.pending{opacity:.6}
.who{font-size:.8em;color:#555;font-weight:600} .sources{margin:.4rem 0 0;padding-left:1.4rem;font-size:.9em}
.sources code{font-size:.85em;color:#555} [hidden]{display:none!important}
nav{display:flex;flex-wrap:wrap;align-items:center} #account{margin-left:auto}
#signin{max-width:24rem}
"""

_SCRIPT = """
const base = location.pathname.replace(/\\/(ui|write|documents\\/ui)$/, '');
const JSON_HEADERS = {'Content-Type': 'application/json'};
const CONFIG = JSON.parse(document.getElementById('ragchat-config').textContent);
const AUTH_KEY = 'ragchat.authorization';  // sessionStorage: the Authorization value of every call
function authorization() { return CONFIG.auth === 'none' ? null : sessionStorage.getItem(AUTH_KEY); }
function withAuth(opts) { const o = Object.assign({}, opts), headers = new Headers(o.headers || {});
  const auth = authorization(); if (auth) headers.set('Authorization', auth); o.headers = headers; return o; }
function api(path, opts) { return fetch(base + path, withAuth(opts)).then(async r => {
  const body = r.status === 204 ? {} : await r.json().catch(() => ({}));
  if (r.status === 401 && CONFIG.auth !== 'none') showSignIn('Signed out: please sign in again');
  if (!r.ok) throw new Error((body.error || body.message || ('HTTP ' + r.status)) +
    (body.retryAfter ? ' (retry after ' + body.retryAfter + ' s)' : '')); return body; }); }
function showSignIn(note) { sessionStorage.removeItem(AUTH_KEY);
  $('app').hidden = true; $('account').hidden = true; $('signin').hidden = false;
  $('signin-note').textContent = note || ''; $('signin-error').textContent = ''; }
function showApp() { $('signin').hidden = true; $('app').hidden = false;
  $('account').hidden = CONFIG.auth === 'none'; }
async function cognitoIdToken(username, password) {
  let r; try {
    r = await fetch(CONFIG.cognitoEndpoint, {method: 'POST', headers: {
      'Content-Type': 'application/x-amz-json-1.1',
      'X-Amz-Target': 'AWSCognitoIdentityProviderService.InitiateAuth'},
      body: JSON.stringify({AuthFlow: 'USER_PASSWORD_AUTH', ClientId: CONFIG.clientId,
        AuthParameters: {USERNAME: username, PASSWORD: password}})});
  } catch (err) { throw new Error('Could not reach Cognito: ' + err.message); }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) { const type = String(body.__type || '').split('#').pop();
    throw new Error((body.message || body.Message || ('Cognito answered HTTP ' + r.status)) +
      (type ? ' (' + type + ')' : '')); }
  if (body.ChallengeName === 'NEW_PASSWORD_REQUIRED') throw new Error('This account needs its ' +
    'password set before it can sign in here: an administrator runs `aws cognito-idp ' +
    'admin-set-user-password --permanent` for it (see the README), then sign in with that password.');
  if (body.ChallengeName) throw new Error('Cognito asks for ' + body.ChallengeName +
    ', which these pages do not support: sign in with the AWS CLI instead.');
  const token = body.AuthenticationResult && body.AuthenticationResult.IdToken;
  if (!token) throw new Error('Cognito returned no ID token'); return token; }
async function checkAuthorization(auth) {  // one cheap call, so a wrong token is said at once
  const r = await fetch(base + '/documents?limit=1', {headers: {Authorization: auth}});
  if (r.ok) return; const body = await r.json().catch(() => ({}));
  throw new Error(body.error || body.message || ('HTTP ' + r.status)); }
async function signIn(e) { e.preventDefault(); const error = $('signin-error'), button = $('signin-button');
  error.textContent = ''; button.disabled = true;
  try { const secret = $('signin-secret');
    const auth = CONFIG.auth === 'cognito' ? await cognitoIdToken($('signin-user').value.trim(), secret.value)
      : 'Bearer ' + secret.value.trim();
    await checkAuthorization(auth);
    sessionStorage.setItem(AUTH_KEY, auth); secret.value = ''; showApp(); start();
  } catch (err) { error.textContent = err.message; } finally { button.disabled = false; } }
function boot() { if (CONFIG.auth !== 'none') {
    $('signin-form').onsubmit = signIn; $('sign-out').onclick = () => showSignIn('Signed out'); }
  if (CONFIG.auth === 'none' || authorization()) { showApp(); start(); } else showSignIn(''); }
function el(tag, text, cls) { const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text; if (cls) e.className = cls; return e; }
function $(id) { return document.getElementById(id); }
function sourceList(sources) { const ol = el('ol', null, 'sources');
  for (const s of sources || []) { const li = el('li'); li.append(el('code', s.id), el('div', s.text));
    ol.append(li); } return ol; }
for (const a of document.querySelectorAll('nav a')) a.href = base + a.dataset.p;
"""

_ASK_BODY = """<h2>Ask once</h2>
<form id=f class=row><input id=q placeholder="Ask a question about your notes" required>
<button>Ask</button></form><pre id=answer hidden></pre><ol id=sources class=sources></ol>
<h2>Chat</h2><div class=chat><aside>
<form id=new-conv><input id=collection placeholder="Collection (optional)" maxlength=@COLLECTION@>
<button id=new-conv-button>New conversation</button></form><ul id=convs></ul></aside>
<section><h3 id=conv-title class=muted>Start or pick a conversation</h3><div id=messages></div>
<form id=chat-form class=row hidden><input id=message placeholder="Your message" maxlength=4000 required>
<button id=send>Send</button></form><p id=chat-error class=error role=alert></p></section></div>"""

_ASK_SCRIPT = """$('f').onsubmit = e => { e.preventDefault();
  const out = $('answer'), list = $('sources');
  out.hidden = false; out.textContent = '…'; list.replaceChildren();
  api('/?text=' + encodeURIComponent($('q').value)).then(r => {
    out.textContent = r.answer; list.replaceChildren(...sourceList(r.sources).childNodes);
  }).catch(err => out.textContent = 'Error: ' + err.message); };
let current = null;
const convs = $('convs'), messages = $('messages'), chatError = $('chat-error'), chatForm = $('chat-form');
function fail(err) { chatError.textContent = 'Error: ' + err.message; }
function who(role) { return role === 'user' ? 'You' : role === 'assistant' ? 'Assistant' : 'Summary'; }
function addMessage(m) { const div = el('div', null, 'msg ' + m.role);
  div.append(el('div', who(m.role), 'who'), el('p', m.content));
  if (m.sources && m.sources.length) div.append(sourceList(m.sources));
  messages.append(div); div.scrollIntoView({block: 'nearest'}); return div; }
function showTitle(c) {
  $('conv-title').textContent = (c.title || 'New conversation') +
    (c.collection ? ' · ' + c.collection : ''); }
function loadConversations() { return api('/chat/conversations?limit=50').then(p => {
  convs.replaceChildren();
  for (const c of p.items) { const li = el('li', null, c.id === current ? 'current' : '');
    if (c.id === current) showTitle(c);
    const b = el('button', c.title || 'New conversation'); b.type = 'button'; b.onclick = () => open(c.id);
    b.append(el('span', c.messageCount + ' messages' + (c.collection ? ' · ' + c.collection : ''), 'muted'));
    li.append(b); convs.append(li); } }).catch(fail); }
function open(id) { return api('/chat/conversations/' + encodeURIComponent(id)).then(c => {
  current = c.id; chatError.textContent = '';
  showTitle(c);
  messages.replaceChildren(); for (const m of c.messages) addMessage(m);
  chatForm.hidden = false; $('message').focus(); return loadConversations(); }).catch(fail); }
$('new-conv').onsubmit = e => { e.preventDefault(); const body = {};
  const collection = $('collection').value.trim(); if (collection) body.collection = collection;
  api('/chat/conversations', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body)})
    .then(c => open(c.id)).catch(fail); };
chatForm.onsubmit = e => { e.preventDefault(); if (!current) return;
  const input = $('message'), send = $('send'), content = input.value;
  const pending = addMessage({role: 'user', content}); pending.classList.add('pending');
  chatError.textContent = ''; send.disabled = true; input.value = '';
  api('/chat/conversations/' + encodeURIComponent(current) + '/messages',
      {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({content})})
    .then(r => { pending.classList.remove('pending'); addMessage(r); loadConversations(); })
    .catch(err => { pending.remove(); input.value = content; fail(err); })
    .finally(() => { send.disabled = false; }); };
function start() { loadConversations(); }"""

_WRITE_BODY = """<form id=f><input id=title placeholder="Title (optional)" maxlength=1000>
<textarea id=text rows=10 placeholder="Text" required></textarea><button>Add note</button></form>
<h2>…or upload a file</h2><form id=u><input id=file type=file accept="@UPLOAD_ACCEPT@">
<button>Upload</button></form>
<p><input id=collection placeholder="Collection for the note or file (optional)" maxlength=@COLLECTION@></p>
<p id=status class=muted role=status></p>"""

_WRITE_SCRIPT = """const status = $('status');
function show(text, isError) { status.textContent = text; status.className = isError ? 'error' : 'muted'; }
function follow(id) { show('Document ' + id + ': PENDING');
  const poll = () => api('/documents/' + encodeURIComponent(id)).then(d => {
    show('Document ' + id + ': ' + d.status + (d.error ? ' — ' + d.error : ''), d.status === 'FAILED');
    if (d.status === 'PENDING' || d.status === 'PROCESSING') setTimeout(poll, 500);
  }).catch(err => show('Error: ' + err.message, true)); poll(); }
function collection() { return $('collection').value.trim(); }
$('f').onsubmit = e => { e.preventDefault();
  const body = {text: $('text').value};
  const title = $('title').value.trim(); if (title) body.title = title;
  if (collection()) body.collection = collection();
  api('/notes', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body)})
    .then(r => follow(r.documentId)).catch(err => show('Error: ' + err.message, true)); };
$('u').onsubmit = e => { e.preventDefault();
  const file = $('file').files[0]; if (!file) return;
  const q = 'filename=' + encodeURIComponent(file.name) +
    (collection() ? '&collection=' + encodeURIComponent(collection()) : '');
  api('/documents?' + q, {method: 'POST', body: file,
    headers: {'Content-Type': file.type || 'application/octet-stream'}})
    .then(r => follow(r.documentId)).catch(err => show('Error: ' + err.message, true)); };
function start() {}"""

_DOCUMENTS_BODY = """<p><button id=refresh>Refresh</button></p><p id=doc-error class=error role=alert></p>
<table><thead><tr><th>Title</th><th>Status</th><th>Chunks</th><th>Error</th><th>Enabled</th><th>Created</th>
<th></th></tr></thead><tbody id=rows></tbody></table><p><button id=more hidden>More</button></p>"""

_DOCUMENTS_SCRIPT = """let cursor = null;
const rows = $('rows'), more = $('more'), docError = $('doc-error');
function fail(err) { docError.textContent = 'Error: ' + err.message; }
function row(d) { const tr = el('tr'); tr.dataset.id = d.id;
  const toggle = el('button', d.enabled ? 'Disable' : 'Enable'), del = el('button', 'Delete');
  toggle.onclick = () => api('/documents/' + encodeURIComponent(d.id), {method: 'PATCH',
    headers: JSON_HEADERS, body: JSON.stringify({enabled: !d.enabled})})
    .then(n => { docError.textContent = ''; tr.replaceWith(row(n)); }).catch(fail);
  del.onclick = () => { if (!confirm('Delete "' + (d.title || d.id) + '"?')) return;
    api('/documents/' + encodeURIComponent(d.id), {method: 'DELETE'})
      .then(() => { docError.textContent = ''; tr.remove(); }).catch(fail); };
  const actions = el('td'); actions.append(toggle, ' ', del);
  tr.append(el('td', d.title || d.id), el('td', d.status), el('td', String(d.chunkCount)),
    el('td', d.error || ''), el('td', d.enabled ? 'yes' : 'no'), el('td', d.createdAt), actions);
  return tr; }
function load(reset) { if (reset) cursor = null;
  api('/documents?limit=50' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '')).then(p => {
    if (reset) rows.replaceChildren(); docError.textContent = '';
    for (const d of p.items) rows.append(row(d));
    cursor = p.cursor; more.hidden = !cursor; }).catch(fail); }
more.onclick = () => load(false); $('refresh').onclick = () => load(true);
function start() { load(true); }"""


_PAGES = {
    "ask": ("Ask", _ASK_BODY, _ASK_SCRIPT),
    "write": ("Add a note", _WRITE_BODY, _WRITE_SCRIPT),
    "documents": ("Documents", _DOCUMENTS_BODY, _DOCUMENTS_SCRIPT),
}


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
    title, body, script = _PAGES[page]
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
        f"<title>ragchat · {title}</title><style>{_STYLE}</style></head><body>"
        '<nav><a data-p="/ui">Ask</a><a data-p="/write">Add</a><a data-p="/documents/ui">Documents</a>'
        f"{api_link}{account}</nav>"
        f'<script type="application/json" id="ragchat-config">{config_json(config)}</script>'
        f"<h1>{title}</h1>{signin}<main id=app hidden>{_fill(body)}</main>"
        f"<script>{_SCRIPT}{script}\nboot();</script></body></html>"
    )


def content_security_policy(config: dict[str, str]) -> str:
    connect = "'self'"
    if config["auth"] == "cognito":
        connect += " " + cognito_origin(config["region"])  # exactly the user pool's endpoint
    return f"default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src {connect}"


def router(container: Container) -> APIGatewayRouter:
    r = APIGatewayRouter()  # type: ignore[no-untyped-call]

    def page(name: str) -> Response[str]:
        # No principal needed: the shell is the same for everyone (see the module docstring).
        settings = container.settings
        config = page_config(
            settings.page_auth, client_id=settings.cognito_client_id, region=settings.aws_region
        )
        return Response(
            status_code=200,
            content_type="text/html; charset=utf-8",
            body=render(name, config),
            headers={"Content-Security-Policy": content_security_policy(config)},
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

    return r
