// Sending a file (loaded by the Add page; fetched by the Chat page when a file is first attached):
// POST /documents with the bytes, or a presigned POST (POST /uploads) when the API offers one (the page
// config's ``features`` says so: the page never fetches /openapi.json); the size limit said and checked
// before anything is sent, in the API's words (domain/file_errors.py); then the document's status,
// polled until READY / FAILED, named by title, never by id.
const uploads = (() => {
  const enc = encodeURIComponent, IN_FLIGHT = new Set(['PENDING', 'PROCESSING']);
  const LIMIT = Number(CONFIG.maxUploadBytes || 0);
  const PRESIGNED = String(CONFIG.features || '').split(' ').includes('uploads');
  const HASH_MAX = 256e6;  // larger files are sent without their SHA-256 (the browser reads a file whole to hash it)
  function megabytes(n) { const mb = n / 1e6; return (mb < 0.1 ? mb.toFixed(2) : mb.toFixed(1)) + ' MB'; }
  function size(n) { return n >= 1e6 ? megabytes(n) : Math.ceil(n / 1e3) + ' KB'; }
  // The file's SHA-256 (hex), sent with POST /uploads: bytes already in the workspace are named at once
  // ("Already there: …") and not sent again (on S3 the upload's own reply is S3's, which cannot say so).
  // null where the browser cannot hash (no secure context) or the file is very large.
  async function sha256(file) { if (!(window.crypto && crypto.subtle) || file.size > HASH_MAX) return null;
    try { const d = new Uint8Array(await crypto.subtle.digest('SHA-256', await file.arrayBuffer()));
      return Array.from(d, b => b.toString(16).padStart(2, '0')).join(''); } catch (err) { return null; } }
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
    if (!PRESIGNED) {
      const q = 'filename=' + enc(file.name) + (collection ? '&collection=' + enc(collection) : '') + workspaceQuery('&');
      return send('POST', base + '/documents?' + q, file, {...authHeaders(), 'Content-Type': type}, bar); }
    const ask = {filename: file.name, contentType: type}; if (collection) ask.collection = collection;
    const hash = await sha256(file); if (hash) ask.sha256 = hash;
    const grant = await api('/uploads', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(withWorkspace(ask))});
    if (grant.duplicate) return grant;  // these bytes are a document here already: nothing is sent
    const form = new FormData(); for (const [k, v] of Object.entries(grant.fields || {})) form.append(k, v);
    form.append('file', file);
    const url = new URL(grant.url, location.href), same = url.origin === location.origin;
    const reply = await send('POST', url.href, form, same ? authHeaders() : {}, bar);
    // S3 answers 204 before its trigger has read the file: the document is 404 until then, and what
    // the upload became (a copy of another document, found by the trigger) is GET /uploads/{uploadId}
    const asked = grant.uploadId ? '/uploads/' + enc(grant.uploadId) + workspaceQuery('?') : null;
    return {...reply, documentId: grant.documentId, until: Date.parse(grant.expiresAt) + 60e3, asked}; }
  function show(out, text, kind) { out.textContent = text; out.className = out.dataset.base + ' ' + (kind || 'muted'); }
  // A duplicate reply said: "Already there: “<title>” …" (another document), or the same one unchanged.
  function already(out, r, name) { if (r.otherDocument) show(out, r.message, 'ok');
    else show(out, 'Already uploaded, unchanged: “' + (r.title || name) + '” (' + r.status + ').', 'ok'); }
  // A document's status, polled until it is settled: "“Title”: READY". ``until`` (a time): a file sent
  // to S3, which is 404 until the bucket's trigger has taken it in, waited for until then; ``asked``: the
  // upload's own status (GET /uploads/{uploadId}), read meanwhile: bytes the trigger found already
  // there are said at once ("Already there: “<title>” …"), the grant's document never coming, and so is
  // a file the trigger refused (its reason).
  function follow(id, out, lead, until, asked) { lead = lead ? lead + ' ' : '';
    const wait = () => { show(out, lead + 'Uploaded; waiting for it to be taken in…'); setTimeout(poll, 1000); };
    // refused by the trigger (too large, unreadable, no longer an editor…): why, as POST /documents says it
    const became = () => api(asked).then(r => (r.refused ? show(out, r.refused.message, 'error')
      : r.duplicate ? already(out, r, id) : poll()))
      .catch(err => (err.status === 404 ? wait() : show(out, describe(err), 'error')));
    const poll = () => api('/documents/' + enc(id)).then(d => {
      const done = d.status === 'READY' ? 'ok' : d.status === 'FAILED' ? 'error' : 'muted';
      const told = d.progress ? ' — ' + d.progress.text : '';  // "12 / 40 chunks (30%), about 1 min left"
      show(out, lead + '“' + (d.title || 'Untitled note') + '”: ' + d.status + told + (d.error ? ' — ' + d.error : ''), done);
      if (IN_FLIGHT.has(d.status)) setTimeout(poll, 500);
    }).catch(err => { if (err.status !== 404 || !until) return show(out, describe(err), 'error');
      if (Date.now() < until) { if (asked) became(); else wait(); }
      else show(out, 'The file was uploaded but no document came of it (it may have been refused): try again.', 'error'); });
    poll(); }
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
      if (r.duplicate) already(out, r, file.name);  // the same content, added before (by another door: its title)
      else { announceDocument(); follow(r.documentId, out, r.newVersion ? 'New version of ' + file.name + ' (it replaces the earlier one once indexed).' : '', r.until, r.asked); }
    } catch (err) { refuse(describe(err)); } }
  return {one, follow, show, megabytes, LIMIT};
})();
