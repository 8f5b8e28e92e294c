"""Area "ui": minimal HTML pages (``/ui`` ask, ``/write`` add a note or upload, ``/documents/ui``).

The pages are static: data is fetched from the JSON API by a few lines of script and rendered with
``textContent`` only (never as HTML), so nothing from documents or answers can inject markup. API
calls go to the same origin and stage (relative URLs).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ragchat.api.auth import principal

_STYLE = """
body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}
nav a{margin-right:1rem} textarea,input{width:100%;box-sizing:border-box;margin:.25rem 0;padding:.4rem}
button{padding:.4rem 1rem} pre{white-space:pre-wrap;background:#f5f5f5;padding:1rem}
li{margin:.4rem 0} .muted{color:#777;font-size:.9em} table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.3rem;text-align:left}
"""

_SCRIPT = """
const base = location.pathname.replace(/\\/(ui|write|documents\\/ui)$/, '');
function api(path, opts) { return fetch(base + path, opts).then(async r => {
  const body = r.status === 204 ? {} : await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || ('HTTP ' + r.status)); return body; }); }
function el(tag, text) { const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text; return e; }
for (const a of document.querySelectorAll('nav a')) a.href = base + a.dataset.p;
"""

_PAGES = {
    "ask": (
        "Ask",
        """<form id=f><input id=q placeholder="Ask a question about your notes" required>
<button>Ask</button></form><pre id=answer></pre><ol id=sources></ol>""",
        """document.getElementById('f').onsubmit = e => { e.preventDefault();
  const out = document.getElementById('answer'), list = document.getElementById('sources');
  out.textContent = '…'; list.replaceChildren();
  api('/?text=' + encodeURIComponent(document.getElementById('q').value)).then(r => {
    out.textContent = r.answer;
    for (const s of r.sources) {
      const li = el('li'); li.append(el('code', s.id), el('div', s.text)); list.append(li); }
  }).catch(err => out.textContent = 'Error: ' + err.message); };""",
    ),
    "write": (
        "Add a note",
        """<form id=f><input id=title placeholder="Title (optional)" maxlength=1000>
<textarea id=text rows=10 placeholder="Text"></textarea><button>Add note</button></form>
<h2>…or upload a file</h2><form id=u><input id=file type=file accept=".txt,.md,.html,.pdf">
<button>Upload</button></form><p id=status class=muted></p>""",
        """const status = document.getElementById('status');
function follow(id) { status.textContent = 'Document ' + id + ': PENDING';
  const poll = () => api('/documents/' + encodeURIComponent(id)).then(d => {
    status.textContent = 'Document ' + id + ': ' + d.status + (d.error ? ' — ' + d.error : '');
    if (d.status === 'PENDING' || d.status === 'PROCESSING') setTimeout(poll, 500); }); poll(); }
document.getElementById('f').onsubmit = e => { e.preventDefault();
  const body = {text: document.getElementById('text').value};
  const title = document.getElementById('title').value.trim(); if (title) body.title = title;
  api('/notes', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)})
    .then(r => follow(r.documentId)).catch(err => status.textContent = 'Error: ' + err.message); };
document.getElementById('u').onsubmit = e => { e.preventDefault();
  const file = document.getElementById('file').files[0]; if (!file) return;
  api('/documents?filename=' + encodeURIComponent(file.name), {method: 'POST', body: file,
    headers: {'Content-Type': file.type || 'application/octet-stream'}})
    .then(r => follow(r.documentId)).catch(err => status.textContent = 'Error: ' + err.message); };""",
    ),
    "documents": (
        "Documents",
        """<table><thead><tr><th>Title</th><th>Status</th><th>Chunks</th><th>Enabled</th><th>Created</th></tr>
</thead><tbody id=rows></tbody></table><p><button id=more hidden>More</button></p>""",
        """let cursor = null;
const rows = document.getElementById('rows'), more = document.getElementById('more');
function load() {
  api('/documents?limit=50' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '')).then(p => {
  for (const d of p.items) { const tr = el('tr');
    tr.append(el('td', d.title), el('td', d.status + (d.error ? ' — ' + d.error : '')),
      el('td', String(d.chunkCount)),
      el('td', d.enabled ? 'yes' : 'no'), el('td', d.createdAt)); rows.append(tr); }
  cursor = p.cursor; more.hidden = !cursor; }); }
more.onclick = load; load();""",
    ),
}


def render(page: str) -> str:
    title, body, script = _PAGES[page]
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f"<title>ragchat · {title}</title><style>{_STYLE}</style></head><body>"
        '<nav><a data-p="/ui">Ask</a><a data-p="/write">Add</a><a data-p="/documents/ui">Documents</a>'
        '<a data-p="/swagger">API</a></nav>'
        f"<h1>{title}</h1>{body}<script>{_SCRIPT}{script}</script></body></html>"
    )


def router(container: Any) -> APIGatewayRouter:
    r = APIGatewayRouter()  # type: ignore[no-untyped-call]

    def page(name: str) -> Response[str]:
        principal(r.current_event)
        return Response(
            status_code=200,
            content_type="text/html; charset=utf-8",
            body=render(name),
            headers={
                "Content-Security-Policy": "default-src 'self'; style-src 'unsafe-inline'; "
                "script-src 'unsafe-inline'; connect-src 'self'"
            },
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
