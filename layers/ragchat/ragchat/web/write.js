// The Add page (loaded after common.js and uploads.js): notes, and files (several at once, chosen or
// dropped), each with its own progress and status until READY / FAILED, named by title, never by id.
const status = $('status'), list = $('uploads');
status.dataset.base = 'status';
function collection() { return $('collection').value.trim(); }
$('f').onsubmit = e => { e.preventDefault();
  const body = {text: $('text').value};
  const title = $('title').value.trim(); if (title) body.title = title;
  if (collection()) body.collection = collection();
  uploads.show(status, 'Adding the note…');
  api('/notes', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(withWorkspace(body))})
    .then(r => { $('text').value = ''; $('title').value = '';  // added: a second click adds nothing twice
      if (r.duplicate) uploads.show(status, r.message, 'ok'); else { announceDocument(); uploads.follow(r.documentId, status); } })
    .catch(err => uploads.show(status, describe(err), 'error')); };
if (uploads.LIMIT) $('file-limit').textContent = 'Files up to ' + uploads.megabytes(uploads.LIMIT) + ' each; choose or drop several at once.';
async function uploadAll(files) { if (!files.length) { uploads.show(status, 'Choose a file first.', 'error'); return; }
  const button = $('upload'); button.disabled = true; status.textContent = '';
  try { for (const f of files) await uploads.one(f, collection(), list); } finally { button.disabled = false; $('file').value = ''; } }
$('u').onsubmit = e => { e.preventDefault(); uploadAll([...$('file').files]); };
// Drag and drop: files dropped anywhere on the upload card are uploaded at once.
const drop = $('drop'), card = drop.closest('.card');
card.addEventListener('dragover', e => { e.preventDefault(); drop.classList.add('over'); });
card.addEventListener('dragleave', e => { if (!card.contains(e.relatedTarget)) drop.classList.remove('over'); });
card.addEventListener('drop', e => { e.preventDefault(); drop.classList.remove('over');
  uploadAll([...((e.dataTransfer && e.dataTransfer.files) || [])]); });
function start() { mountWorkspaces(() => {}, {write: true}); }
boot();
