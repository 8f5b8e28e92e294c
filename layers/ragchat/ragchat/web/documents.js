// The Documents page (loaded after common.js; viewer.js when a document is first viewed): your documents, newest first, with their
// status followed live (polled while any is PENDING or PROCESSING, not once all are settled; new ones
// shown when another tab adds one, when the tab is shown again, and once a minute), a
// viewer (the side panel), a title search and a collection filter.
let cursor = null, timer = null;
const rows = $('rows'), more = $('more'), docError = $('doc-error'), search = $('doc-search'), pick = $('doc-collection');
const POLL_MS = 1000, IN_FLIGHT = new Set(['PENDING', 'PROCESSING']), known = new Set();
const enc = encodeURIComponent;
function fail(err) { docError.textContent = describe(err); }
function button(text, cls) { const b = el('button', text, 'btn small ' + (cls || '')); b.type = 'button'; return b; }
function when(iso) { const d = new Date(iso || ''); return isNaN(d) ? '' : d.toLocaleString(undefined, {dateStyle: 'medium', timeStyle: 'short'}); }
// A big document is deleted over several requests (each answers within API Gateway's 29 s): 202 with
// finished false means "repeat the DELETE to carry on", 204 that it is gone.
function removeDocument(id) { return api('/documents/' + enc(id), {method: 'DELETE'})
  .then(r => (r && r.finished === false ? removeDocument(id) : r)); }
// Enabling or disabling a big document too: 202 with finished false until the last request, which
// answers the document. One left half switched (a closed tab) says `switching`: its button finishes it.
function switchDocument(id, enabled) { return api('/documents/' + enc(id), {method: 'PATCH',
  headers: JSON_HEADERS, body: JSON.stringify({enabled})})
  .then(r => (r && r.finished === false ? switchDocument(id, enabled) : r)); }
function row(d) { const tr = el('tr'); tr.dataset.id = d.id; tr.doc = d;
  const want = d.switching ? d.switching.enabled : !d.enabled;
  const view = button('View'), del = button('Delete', 'danger');
  const toggle = button(d.switching ? (want ? 'Finish enabling' : 'Finish disabling') : (want ? 'Enable' : 'Disable'));
  view.setAttribute('aria-label', 'View ' + (d.title || 'Untitled note')); view.setAttribute('aria-haspopup', 'dialog');
  view.disabled = d.status !== 'READY'; view.onclick = () => viewer().then(p => p.documentView(d.id, {title: d.title}, view)).catch(fail);
  toggle.onclick = () => { toggle.disabled = true; switchDocument(d.id, want)
    .then(n => { docError.textContent = ''; tr.replaceWith(row(n)); }).catch(err => { toggle.disabled = false; fail(err); }); };
  del.onclick = () => { if (!confirm('Delete "' + (d.title || 'Untitled note') + '"?')) return;
    removeDocument(d.id).then(() => { docError.textContent = ''; tr.remove(); filter(); }).catch(fail); };
  const actions = el('td'); actions.append(view); if (canEdit()) actions.append(' ', toggle, ' ', del);  // a viewer reads only
  const title = el('td'); title.append(el('span', d.title || 'Untitled note', 'doc-title'));
  if (d.collection) title.append(el('span', d.collection, 'muted small doc-coll'));
  const state = el('td'); state.append(el('span', d.status, 'badge ' + d.status));
  if (d.progress) state.append(progressOf(d));
  const enabled = el('td', d.switching ? 'partly' : d.enabled ? 'yes' : 'no'); enabled.dataset.label = 'In answers:';  // shown on narrow screens
  tr.append(title, state, el('td', d.error || '', d.error ? 'error' : ''), enabled, el('td', when(d.createdAt), 'muted'), actions);
  if (d.collection && !known.has(d.collection)) { known.add(d.collection); pick.append(new Option(d.collection, d.collection)); }
  tr.hidden = !matches(d); return tr; }
// An indexing document's progress (the API's words: "12 / 40 chunks (30%), about 1 min left"), with a bar
// once the chunks are counted.
function progressOf(d) { const box = el('div', null, 'doc-progress'), p = d.progress;
  if (p.percent !== null && p.percent !== undefined) { const bar = el('progress'); bar.max = 100; bar.value = p.percent;
    bar.setAttribute('aria-label', 'Indexing progress of ' + (d.title || 'Untitled note')); box.append(bar); }
  box.append(el('span', p.text, 'muted small')); return box; }
// The search: every word typed in the title (any case); over the documents loaded (More loads older).
function matches(d) { const words = search.value.toLowerCase().split(/\s+/).filter(Boolean), t = (d.title || '').toLowerCase();
  return words.every(w => t.includes(w)); }
function filter() { const all = [...rows.querySelectorAll('tr')].filter(tr => tr.doc);
  for (const tr of all) tr.hidden = !matches(tr.doc);
  const shown = all.filter(tr => !tr.hidden).length, none = $('doc-none');
  none.hidden = shown > 0; none.textContent = !all.length ? (pick.value ? 'No documents in “' + pick.value + '”.'
    : 'No documents yet: add one on the Add page.') : 'No document title matches “' + search.value.trim() + '”.'; }
search.oninput = filter;
search.onkeydown = e => { if (e.key === 'Escape' && search.value) { e.stopPropagation(); search.value = ''; filter(); } };
pick.onchange = () => load(true);
// Live status: each document still in flight is read again every POLL_MS until it is READY or FAILED.
function follow() { const busy = [...rows.querySelectorAll('tr')].filter(tr => tr.doc && IN_FLIGHT.has(tr.doc.status));
  $('doc-live').textContent = busy.length ? busy.length + (busy.length === 1 ? ' document is' : ' documents are') +
    ' being indexed: their status updates here.' : '';
  if (!busy.length || timer) return;
  timer = setTimeout(() => Promise.all(busy.map(tr => api('/documents/' + enc(tr.dataset.id))
    .then(d => { if (tr.isConnected) tr.replaceWith(row(d)); }).catch(err => { if (err.status === 404) tr.remove(); else throw err; })))
    .catch(fail).finally(() => { timer = null; follow(); }), POLL_MS); }
// New documents (added in another tab, by the CLI, by another member) appear at the top without a
// reload, and nothing is re-read on a timer while nothing changes: the first page is read again when
// another tab of this site adds something (uploads.js and write.js say so on a BroadcastChannel), when
// this tab is shown again, and every SLOW_MS while it is shown (the CLI, another member).
const SLOW_MS = 60000; let watching = null, watched = false;
function listQuery() { return '/documents?limit=50' + workspaceQuery('&') + (pick.value ? '&collection=' + enc(pick.value) : ''); }
function checkNew() { clearTimeout(watching);
  api(listQuery()).then(p => { const have = new Set([...rows.querySelectorAll('tr')].map(tr => tr.dataset.id));
    const fresh = p.items.filter(d => !have.has(d.id)).map(row);
    if (fresh.length) { rows.prepend(...fresh); filter(); follow(); } }).catch(() => {}).finally(watchNew); }
function watchNew() { watched = true; clearTimeout(watching);
  watching = setTimeout(() => (document.hidden ? watchNew() : checkNew()), SLOW_MS); }
document.addEventListener('visibilitychange', () => { if (watched && !document.hidden) checkNew(); });
if (window.BroadcastChannel) new BroadcastChannel(DOCUMENTS_CHANNEL).onmessage = () => { if (watched) checkNew(); };
function load(reset) { if (reset) cursor = null;
  api(listQuery() + (cursor ? '&cursor=' + enc(cursor) : '')).then(p => {
    if (reset) rows.replaceChildren(); docError.textContent = '';
    for (const d of p.items) rows.append(row(d));
    cursor = p.cursor; more.hidden = !cursor; filter(); follow(); if (reset) { showLinked(); watchNew(); } }).catch(fail); }
// /documents/ui#<id>: that row, highlighted.
function showLinked() { const id = decodeURIComponent(location.hash.slice(1)); if (!id) return;
  const tr = [...rows.querySelectorAll('tr')].find(r => r.dataset.id === id);
  if (tr) { tr.classList.add('linked'); tr.tabIndex = -1; tr.scrollIntoView({block: 'center'}); tr.focus(); }
  else showInItsWorkspace(id).then(moved => { if (!moved)
    docError.textContent = 'That document is not in this list (deleted, or further down: use More).'; }); }
// A linked document of another of the caller's workspaces: switch to that workspace (true when done).
function showInItsWorkspace(id) { const sel = $('workspace');
  return api('/documents/' + encodeURIComponent(id)).then(d => {
    if (!sel || !d.workspace) return false;
    const value = [...sel.options].some(o => o.value === d.workspace.id) ? d.workspace.id : '';
    if (value === sel.value) return false; sel.value = value; sel.onchange(); return true; }).catch(() => false); }
more.onclick = () => load(false); $('refresh').onclick = () => load(true);
function start() { mountWorkspaces(() => load(true), {members: true, manage: true}).then(() => load(true)); }
boot();
