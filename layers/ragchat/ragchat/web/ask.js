// The Ask page (loaded after common.js).
$('f').onsubmit = e => { e.preventDefault();
  const out = $('answer'), list = $('sources');
  out.hidden = false; out.textContent = '…'; list.replaceChildren();
  api('/?text=' + encodeURIComponent($('q').value)).then(r => {
    out.textContent = r.answer; list.replaceChildren(...sourceList(r.sources).childNodes);
  }).catch(err => out.textContent = 'Error: ' + err.message); };
let current = null;
const convs = $('convs'), messages = $('messages'), chatError = $('chat-error'), chatForm = $('chat-form');
function fail(err) { chatError.textContent = 'Error: ' + err.message; }
function who(role) { return role === 'user' ? 'You' : role === 'assistant' ? 'Assistant' : 'Summary'; }
function addMessage(m) { const div = el('div', null, 'msg ' + m.role);
  div.append(el('div', who(m.role), 'who'), el('p', m.content));
  if (m.sources && m.sources.length) div.append(sourceList(m.sources));
  messages.append(div); div.scrollIntoView({block: 'nearest'}); return div; }
function showTitle(c) {
  $('conv-title').textContent = (c.title || 'New conversation') +
    (c.collection ? ' · ' + c.collection : ''); }
function loadConversations() { return api('/chat/conversations?limit=50').then(p => {
  convs.replaceChildren();
  for (const c of p.items) { const li = el('li', null, c.id === current ? 'current' : '');
    if (c.id === current) showTitle(c);
    const b = el('button', c.title || 'New conversation'); b.type = 'button'; b.onclick = () => open(c.id);
    b.append(el('span', c.messageCount + ' messages' + (c.collection ? ' · ' + c.collection : ''), 'muted'));
    li.append(b); convs.append(li); } }).catch(fail); }
function open(id) { return api('/chat/conversations/' + encodeURIComponent(id)).then(c => {
  current = c.id; chatError.textContent = '';
  showTitle(c);
  messages.replaceChildren(); for (const m of c.messages) addMessage(m);
  chatForm.hidden = false; $('message').focus(); return loadConversations(); }).catch(fail); }
$('new-conv').onsubmit = e => { e.preventDefault(); const body = {};
  const collection = $('collection').value.trim(); if (collection) body.collection = collection;
  api('/chat/conversations', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body)})
    .then(c => open(c.id)).catch(fail); };
chatForm.onsubmit = e => { e.preventDefault(); if (!current) return;
  const input = $('message'), send = $('send'), content = input.value;
  const pending = addMessage({role: 'user', content}); pending.classList.add('pending');
  chatError.textContent = ''; send.disabled = true; input.value = '';
  api('/chat/conversations/' + encodeURIComponent(current) + '/messages',
      {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({content})})
    .then(r => { pending.classList.remove('pending'); addMessage(r); loadConversations(); })
    .catch(err => { pending.remove(); input.value = content; fail(err); })
    .finally(() => { send.disabled = false; }); };
function start() { loadConversations(); }
boot();
