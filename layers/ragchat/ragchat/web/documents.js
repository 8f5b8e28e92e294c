// The Documents page (loaded after common.js).
let cursor = null;
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
function start() { load(true); }
boot();
