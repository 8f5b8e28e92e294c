// The Add page (loaded after common.js): notes, and files (several at once, chosen or dropped), each
// with its own progress and status until READY / FAILED, named by title, never by id.
const status = $('status'), uploads = $('uploads');
let presigned = false;  // POST /uploads is in /openapi.json: upload through a presigned POST
const enc = encodeURIComponent, IN_FLIGHT = new Set(['PENDING', 'PROCESSING']);
function show(out, text, kind) { out.textContent = text; out.className = (out === status ? 'status ' : 'file-status ') + (kind || 'muted'); }
// A document's status, polled until it is settled: "“Title”: READY".
function follow(id, out, lead) { lead = lead ? lead + ' ' : '';
  const poll = () => api('/documents/' + enc(id)).then(d => {
    const done = d.status === 'READY' ? 'ok' : d.status === 'FAILED' ? 'error' : 'muted';
    show(out, lead + '“' + (d.title || 'Untitled note') + '”: ' + d.status + (d.error ? ' — ' + d.error : ''), done);
    if (IN_FLIGHT.has(d.status)) setTimeout(poll, 500);
  }).catch(err => show(out, describe(err), 'error')); poll(); }
function collection() { return $('collection').value.trim(); }
$('f').onsubmit = e => { e.preventDefault();
  const body = {text: $('text').value};
  const title = $('title').value.trim(); if (title) body.title = title;
  if (collection()) body.collection = collection();
  show(status, 'Adding the note…');
  api('/notes', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body)})
    .then(r => follow(r.documentId, status)).catch(err => show(status, describe(err), 'error')); };
// XMLHttpRequest (fetch reports no upload progress); resolves with the parsed reply.
function send(method, url, body, headers, bar) { return new Promise((resolve, reject) => {
  const xhr = new XMLHttpRequest(); xhr.open(method, url);
  for (const [k, v] of Object.entries(headers || {})) xhr.setRequestHeader(k, v);
  xhr.upload.onprogress = e => { if (e.lengthComputable) bar.value = Math.round(100 * e.loaded / e.total); };
  xhr.onload = () => { let reply = {}; try { reply = JSON.parse(xhr.responseText || '{}'); } catch (err) { reply = {}; }
    if (xhr.status >= 200 && xhr.status < 300) resolve(reply); else reject(httpError(xhr.status, reply)); };
  xhr.onerror = () => reject(new TypeError('network')); xhr.send(body); }); }
function authHeaders() { const auth = authorization(); return auth ? {Authorization: auth} : {}; }
async function upload(file, bar) {
  const type = file.type || 'application/octet-stream';
  if (!presigned) {
    const q = 'filename=' + enc(file.name) + (collection() ? '&collection=' + enc(collection()) : '');
    return send('POST', base + '/documents?' + q, file, {...authHeaders(), 'Content-Type': type}, bar); }
  const ask = {filename: file.name, contentType: type}; if (collection()) ask.collection = collection();
  const grant = await api('/uploads', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(ask)});
  const form = new FormData(); for (const [k, v] of Object.entries(grant.fields || {})) form.append(k, v);
  form.append('file', file);
  const url = new URL(grant.url, location.href), same = url.origin === location.origin;
  const reply = await send('POST', url.href, form, same ? authHeaders() : {}, bar);
  return {...reply, documentId: grant.documentId}; }
// The size limit, stated before anything is sent, in the words the API uses (domain/file_errors.py).
const LIMIT = Number(CONFIG.maxUploadBytes || 0);
function megabytes(n) { const mb = n / 1e6; return (mb < 0.1 ? mb.toFixed(2) : mb.toFixed(1)) + ' MB'; }
function size(n) { return n >= 1e6 ? megabytes(n) : Math.ceil(n / 1e3) + ' KB'; }  // a file's line
if (LIMIT) $('file-limit').textContent = 'Files up to ' + megabytes(LIMIT) + ' each; choose or drop several at once.';
// One file: its line (name, size, progress bar, status), refused before sending when too large or empty.
async function one(file) {
  const li = el('li', null, 'upload'), bar = el('progress'), out = el('span', '', 'file-status');
  bar.max = 100; bar.value = 0; bar.setAttribute('aria-label', 'Upload progress of ' + file.name);
  li.append(el('span', file.name, 'file-name'), el('span', size(file.size), 'muted small'), bar, out); uploads.append(li);
  const refuse = text => { bar.hidden = true; bar.value = 0; show(out, text, 'error'); };
  if (LIMIT && file.size > LIMIT) return refuse('The file is too large (' + megabytes(file.size) + '): the limit is ' + megabytes(LIMIT) + '.');
  if (!file.size) return refuse('The file is empty.');
  show(out, 'Uploading…');
  try { const r = await upload(file, bar); bar.value = 100;
    if (r.duplicate) { bar.hidden = true; show(out, 'Already uploaded, unchanged: “' + (r.title || file.name) + '” (' + r.status + ').', 'ok'); }
    else { bar.hidden = true; follow(r.documentId, out, r.newVersion ? 'New version of ' + file.name + ' (it replaces the earlier one once indexed).' : ''); }
  } catch (err) { refuse(describe(err)); } }
async function uploadAll(files) { if (!files.length) { show(status, 'Choose a file first.', 'error'); return; }
  const button = $('upload'); button.disabled = true; status.textContent = '';
  try { for (const f of files) await one(f); } finally { button.disabled = false; $('file').value = ''; } }
$('u').onsubmit = e => { e.preventDefault(); uploadAll([...$('file').files]); };
// Drag and drop: files dropped anywhere on the upload card are uploaded at once.
const drop = $('drop'), card = drop.closest('.card');
card.addEventListener('dragover', e => { e.preventDefault(); drop.classList.add('over'); });
card.addEventListener('dragleave', e => { if (!card.contains(e.relatedTarget)) drop.classList.remove('over'); });
card.addEventListener('drop', e => { e.preventDefault(); drop.classList.remove('over');
  uploadAll([...((e.dataTransfer && e.dataTransfer.files) || [])]); });
function start() { api('/openapi.json').then(doc => { presigned = !!((doc.paths || {})['/uploads'] || {}).post; })
  .catch(() => {}); }
boot();
