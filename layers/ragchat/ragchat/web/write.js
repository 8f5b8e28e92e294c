// The Add a note page (loaded after common.js).
const status = $('status');
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
function start() {}
boot();
