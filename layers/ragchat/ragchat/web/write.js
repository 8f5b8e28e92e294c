// The Add a note page (loaded after common.js): a note, or a file uploaded with progress; then the
// document's status until READY / FAILED.
const status = $('status'), progress = $('progress');
let presigned = false;  // POST /uploads is in /openapi.json: upload through a presigned POST
function show(text, kind) { status.textContent = text; status.className = 'status ' + (kind || 'muted');
  status.scrollIntoView({block: 'nearest'}); }
function follow(id, note) { const lead = note ? note + ' ' : ''; show(lead + 'Document ' + id + ': PENDING');
  const poll = () => api('/documents/' + encodeURIComponent(id)).then(d => {
    const done = d.status === 'READY' ? 'ok' : d.status === 'FAILED' ? 'error' : 'muted';
    show(lead + 'Document ' + id + ': ' + d.status + (d.error ? ' — ' + d.error : ''), done);
    if (d.status === 'PENDING' || d.status === 'PROCESSING') setTimeout(poll, 500);
  }).catch(err => show(describe(err), 'error')); poll(); }
function collection() { return $('collection').value.trim(); }
$('f').onsubmit = e => { e.preventDefault();
  const body = {text: $('text').value};
  const title = $('title').value.trim(); if (title) body.title = title;
  if (collection()) body.collection = collection();
  api('/notes', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(withWorkspace(body))})
    .then(r => follow(r.documentId)).catch(err => show(describe(err), 'error')); };
// XMLHttpRequest (fetch reports no upload progress); resolves with the parsed reply.
function send(method, url, body, headers) { return new Promise((resolve, reject) => {
  const xhr = new XMLHttpRequest(); xhr.open(method, url);
  for (const [k, v] of Object.entries(headers || {})) xhr.setRequestHeader(k, v);
  xhr.upload.onprogress = e => { if (!e.lengthComputable) return;
    const pct = Math.round(100 * e.loaded / e.total); progress.value = pct; show('Uploading… ' + pct + ' %'); };
  xhr.onload = () => { let reply = {}; try { reply = JSON.parse(xhr.responseText || '{}'); } catch (err) { reply = {}; }
    if (xhr.status >= 200 && xhr.status < 300) resolve(reply); else reject(httpError(xhr.status, reply)); };
  xhr.onerror = () => reject(new TypeError('network')); xhr.send(body); }); }
function authHeaders() { const auth = authorization(); return auth ? {Authorization: auth} : {}; }
async function upload(file) {
  const type = file.type || 'application/octet-stream';
  if (!presigned) {
    const q = 'filename=' + encodeURIComponent(file.name) +
      (collection() ? '&collection=' + encodeURIComponent(collection()) : '') + workspaceQuery('&');
    return send('POST', base + '/documents?' + q, file, {...authHeaders(), 'Content-Type': type}); }
  const ask = {filename: file.name, contentType: type}; if (collection()) ask.collection = collection();
  const grant = await api('/uploads', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(withWorkspace(ask))});
  const form = new FormData(); for (const [k, v] of Object.entries(grant.fields || {})) form.append(k, v);
  form.append('file', file);
  const url = new URL(grant.url, location.href), same = url.origin === location.origin;
  const reply = await send('POST', url.href, form, same ? authHeaders() : {});
  return {...reply, documentId: grant.documentId}; }
// The size limit, stated before anything is sent, in the words the API uses (domain/file_errors.py).
const LIMIT = Number(CONFIG.maxUploadBytes || 0);
function megabytes(n) { const mb = n / 1e6; return (mb < 0.1 ? mb.toFixed(2) : mb.toFixed(1)) + ' MB'; }
function resetProgress() { progress.value = 0; progress.hidden = true; }
if (LIMIT) $('file-limit').textContent = 'Files up to ' + megabytes(LIMIT) + '.';
$('u').onsubmit = e => { e.preventDefault();
  const file = $('file').files[0]; if (!file) { show('Choose a file first.', 'error'); return; }
  if (LIMIT && file.size > LIMIT) { resetProgress();
    show('The file is too large (' + megabytes(file.size) + '): the limit is ' + megabytes(LIMIT) + '.', 'error'); return; }
  if (!file.size) { resetProgress(); show('The file is empty.', 'error'); return; }
  const button = $('upload'); button.disabled = true; progress.value = 0; progress.hidden = false;
  show('Uploading… 0 %');
  upload(file).then(r => { progress.value = 100;  // the same bytes again: the document as it was
    if (r.duplicate) show('Already uploaded, unchanged: ' + (r.title || file.name) + ' (' + r.status + ').', 'ok');
    else follow(r.documentId, r.newVersion ? 'New version of ' + file.name + ' (it replaces the earlier one once indexed).' : ''); })
    .catch(err => { resetProgress(); show(describe(err), 'error'); }).finally(() => { button.disabled = false; }); };
function start() { mountWorkspaces(() => {}); api('/openapi.json').then(doc => { presigned = !!((doc.paths || {})['/uploads'] || {}).post; })
  .catch(() => {}); }
boot();
