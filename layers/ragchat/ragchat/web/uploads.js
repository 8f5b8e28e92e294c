// Sending a file (loaded by the Add page; fetched by the Chat page when a file is first attached):
// POST /documents with the bytes, or a presigned POST (POST /uploads) when the API offers one; the
// size limit said and checked before anything is sent, in the API's words (domain/file_errors.py);
// then the document's status, polled until READY / FAILED, named by title, never by id.
const uploads = (() => {
  const enc = encodeURIComponent, IN_FLIGHT = new Set(['PENDING', 'PROCESSING']);
  const LIMIT = Number(CONFIG.maxUploadBytes || 0);
  let presigned = null;  // POST /uploads is in /openapi.json (asked once)
  function megabytes(n) { const mb = n / 1e6; return (mb < 0.1 ? mb.toFixed(2) : mb.toFixed(1)) + ' MB'; }
  function size(n) { return n >= 1e6 ? megabytes(n) : Math.ceil(n / 1e3) + ' KB'; }
  function offersPresigned() { if (presigned === null) presigned = api('/openapi.json')
    .then(doc => !!((doc.paths || {})['/uploads'] || {}).post).catch(() => false); return presigned; }
  // XMLHttpRequest (fetch reports no upload progress); resolves with the parsed reply.
  function send(method, url, body, headers, bar) { return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest(); xhr.open(method, url);
    for (const [k, v] of Object.entries(headers || {})) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = e => { if (e.lengthComputable) bar.value = Math.round(100 * e.loaded / e.total); };
    xhr.onload = () => { let reply = {}; try { reply = JSON.parse(xhr.responseText || '{}'); } catch (err) { reply = {}; }
      if (xhr.status >= 200 && xhr.status < 300) resolve(reply); else reject(httpError(xhr.status, reply)); };
    xhr.onerror = () => reject(new TypeError('network')); xhr.send(body); }); }
  async function upload(file, collection, bar) {
    const type = file.type || 'application/octet-stream';
    if (!(await offersPresigned())) {
      const q = 'filename=' + enc(file.name) + (collection ? '&collection=' + enc(collection) : '') + workspaceQuery('&');
      return send('POST', base + '/documents?' + q, file, {...authHeaders(), 'Content-Type': type}, bar); }
    const ask = {filename: file.name, contentType: type}; if (collection) ask.collection = collection;
    const grant = await api('/uploads', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(withWorkspace(ask))});
    const form = new FormData(); for (const [k, v] of Object.entries(grant.fields || {})) form.append(k, v);
    form.append('file', file);
    const url = new URL(grant.url, location.href), same = url.origin === location.origin;
    const reply = await send('POST', url.href, form, same ? authHeaders() : {}, bar);
    return {...reply, documentId: grant.documentId}; }
  function show(out, text, kind) { out.textContent = text; out.className = out.dataset.base + ' ' + (kind || 'muted'); }
  // A document's status, polled until it is settled: "“Title”: READY".
  function follow(id, out, lead) { lead = lead ? lead + ' ' : '';
    const poll = () => api('/documents/' + enc(id)).then(d => {
      const done = d.status === 'READY' ? 'ok' : d.status === 'FAILED' ? 'error' : 'muted';
      const told = d.progress ? ' — ' + d.progress.text : '';  // "12 / 40 chunks (30%), about 1 min left"
      show(out, lead + '“' + (d.title || 'Untitled note') + '”: ' + d.status + told + (d.error ? ' — ' + d.error : ''), done);
      if (IN_FLIGHT.has(d.status)) setTimeout(poll, 500);
    }).catch(err => show(out, describe(err), 'error')); poll(); }
  // One file on its own line in ``list`` (name, size, progress bar, status); refused before sending
  // when too large or empty, its bar then hidden.
  async function one(file, collection, list) {
    const li = el('li', null, 'upload'), bar = el('progress'), out = el('span', '', 'file-status');
    out.dataset.base = 'file-status'; bar.max = 100; bar.value = 0; bar.setAttribute('aria-label', 'Upload progress of ' + file.name);
    li.append(el('span', file.name, 'file-name'), el('span', size(file.size), 'muted small'), bar, out); list.append(li);
    const refuse = text => { bar.hidden = true; bar.value = 0; show(out, text, 'error'); };
    if (LIMIT && file.size > LIMIT) return refuse('The file is too large (' + megabytes(file.size) + '): the limit is ' + megabytes(LIMIT) + '.');
    if (!file.size) return refuse('The file is empty.');
    show(out, 'Uploading…');
    try { const r = await upload(file, collection, bar); bar.value = 100; bar.hidden = true;
      if (r.duplicate && r.otherDocument) show(out, r.message, 'ok');  // the same content, added before by another door
      else if (r.duplicate) show(out, 'Already uploaded, unchanged: “' + (r.title || file.name) + '” (' + r.status + ').', 'ok');
      else follow(r.documentId, out, r.newVersion ? 'New version of ' + file.name + ' (it replaces the earlier one once indexed).' : '');
    } catch (err) { refuse(describe(err)); } }
  return {one, follow, show, megabytes, LIMIT};
})();
