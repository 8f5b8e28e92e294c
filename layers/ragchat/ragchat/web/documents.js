// The Documents page (loaded after common.js).
let cursor = null;
const rows = $('rows'), more = $('more'), docError = $('doc-error');
function fail(err) { docError.textContent = describe(err); }
function button(text, cls) { const b = el('button', text, 'btn small ' + (cls || '')); b.type = 'button'; return b; }
function row(d) { const tr = el('tr'); tr.dataset.id = d.id;
  const toggle = button(d.enabled ? 'Disable' : 'Enable'), del = button('Delete', 'danger');
  toggle.onclick = () => api('/documents/' + encodeURIComponent(d.id), {method: 'PATCH',
    headers: JSON_HEADERS, body: JSON.stringify({enabled: !d.enabled})})
    .then(n => { docError.textContent = ''; tr.replaceWith(row(n)); }).catch(fail);
  del.onclick = () => { if (!confirm('Delete "' + (d.title || d.id) + '"?')) return;
    api('/documents/' + encodeURIComponent(d.id), {method: 'DELETE'})
      .then(() => { docError.textContent = ''; tr.remove(); }).catch(fail); };
  const actions = el('td'); actions.append(toggle, ' ', del);
  const state = el('td'); state.append(el('span', d.status, 'badge ' + d.status));
  const created = el('td', (d.createdAt || '').replace('T', ' ').replace(/\.\d+/, '').replace(/Z$/, ' UTC'), 'muted');
  const chunks = el('td', String(d.chunkCount)), enabled = el('td', d.enabled ? 'yes' : 'no');
  chunks.dataset.label = 'Chunks:'; enabled.dataset.label = 'Enabled:';  // shown on narrow screens
  tr.append(el('td', d.title || d.id), state, chunks, el('td', d.error || '', d.error ? 'error' : ''), enabled,
    created, actions);
  return tr; }
function load(reset) { if (reset) cursor = null;
  api('/documents?limit=50' + workspaceQuery('&') + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '')).then(p => {
    if (reset) rows.replaceChildren(); docError.textContent = '';
    for (const d of p.items) rows.append(row(d));
    if (reset && !p.items.length) { const tr = el('tr'), td = el('td', 'No documents yet: add one on the Add page.', 'muted');
      td.colSpan = 7; tr.append(td); rows.append(tr); }
    cursor = p.cursor; more.hidden = !cursor; if (reset) showLinked(); }).catch(fail); }
// /documents/ui#<id> (a source's "Open in Documents" link on the chat page): that row, highlighted.
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
function start() { mountWorkspaces(() => load(true), {members: true}).then(() => load(true)); }
boot();
