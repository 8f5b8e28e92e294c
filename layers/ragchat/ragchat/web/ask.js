// The Chat page (loaded after common.js, viewer.js and markdown.js): one composer (the first message
// starts a conversation), suggested questions from the user's own documents, conversations
// (searchable, each at its own address /ui/c/<id>, Back and Forward included),
// answers streamed over SSE (fetch + ReadableStream) and rendered as sanitized Markdown, Stop,
// edit-and-resend, Regenerate, Copy, thumbs up / down, citation markers and chips. Everything else
// the server sends is inserted with textContent (el()), never as HTML.
let current = null;   // the open conversation's id
let busy = null;      // the answer being streamed: {controller, convId}
let creating = false; // the first message is creating its conversation
// PATCH /chat/conversations/{id}: the page config says so (never a fetch of /openapi.json, 67 KB)
const canRename = String(CONFIG.features || '').split(' ').includes('rename');
const convs = $('convs'), messages = $('messages'), chatError = $('chat-error'), chatForm = $('chat-form');
const input = $('message'), sendButton = $('send'), stopButton = $('stop'), scroller = $('scroller');
const enc = encodeURIComponent;
const GUARD_MODEL = 'guard';
const NO_DOCUMENTS = 'You have no documents yet';  // the API's hint after the guard reply (nothing indexed)  // the stored model of a refusal (not enough evidence in the notes)
let allConvs = [];  // the caller's conversations as last listed (the search filters these)
let moreConvs = false, searched = null, searchTimer = null;  // more than listed: the server's matches for a search

// ------------------------------------------------------------------ messages
function who(role) { return role === 'user' ? 'You' : role === 'assistant' ? 'Assistant' : 'Summary'; }
// The view sticks to the newest message while the reader is at the bottom: whatever grows below
// (streamed words, source chips, buttons, a refusal's suggestions) is scrolled into view. Scrolled
// up, it stays put and offers "Jump to latest".
// Only a move up unsticks: a scroll event that arrives after the content grew again is no reader.
let stick = true, lastTop = 0;
function nearBottom() { return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 24; }
function toBottom() { stick = true; scroller.scrollTop = scroller.scrollHeight; lastTop = scroller.scrollTop; $('jump').hidden = true; }
scroller.addEventListener('scroll', () => { const top = scroller.scrollTop;
  if (top < lastTop - 1) stick = nearBottom(); else if (nearBottom()) stick = true;
  lastTop = top; $('jump').hidden = stick || !messages.children.length; });
const follow = new ResizeObserver(() => { if (stick) { scroller.scrollTop = scroller.scrollHeight; lastTop = scroller.scrollTop; }
  else $('jump').hidden = !messages.children.length; });
follow.observe(messages); follow.observe(scroller);
$('jump').onclick = () => { toBottom(); input.focus(); };
function typing() {  // shown until the first words of an answer arrive
  const t = el('span', null, 'typing'); t.setAttribute('role', 'img'); t.setAttribute('aria-label', 'Assistant is typing');
  t.append(el('i'), el('i'), el('i')); return t; }
const TIME = new Intl.DateTimeFormat(undefined, {hour: '2-digit', minute: '2-digit'});
const DATE_TIME = new Intl.DateTimeFormat(undefined, {dateStyle: 'medium', timeStyle: 'short'});
function showTime(div, iso) {  // "14:05" (today) or "3 Mar, 14:05"; the full date in the tooltip
  const t = div.querySelector('time'); const d = iso ? new Date(iso) : null;
  if (!t || !d || isNaN(d)) return; t.dateTime = iso; t.title = DATE_TIME.format(d);
  t.textContent = d.toDateString() === new Date().toDateString() ? TIME.format(d)
    : d.toLocaleDateString(undefined, {day: 'numeric', month: 'short'}) + ', ' + TIME.format(d); }
function addMessage(m) {
  const div = el('div', null, 'msg ' + m.role); div.dataset.id = m.id || m.messageId || '';
  const meta = el('div', null, 'meta'); meta.append(el('span', who(m.role), 'who'), el('time', '', 'when'));
  div.append(meta, el('div', null, 'content'));
  messages.append(div); showMessage(div, m); showTime(div, m.createdAt); setEmpty(false); return div; }
function setEmpty(on) { const p = $('empty'); if (p) p.hidden = !on; }
function showMessage(div, m) {  // (re)draws a message from its stored form
  div.content = m.content || ''; div.sources = m.sources || []; div.model = m.model || div.model;
  const content = div.querySelector('.content');
  for (const old of div.querySelectorAll(':scope > .sources, :scope > .msg-actions, :scope > .note, :scope > .refusal-label, :scope > .suggestions, :scope > .searched')) old.remove();
  const refused = m.role === 'assistant' && (m.refusal || div.model === GUARD_MODEL);
  div.classList.toggle('refusal', !!refused);
  if (m.role !== 'assistant' || refused) { content.textContent = div.content; }
  else { renderContent(content, div.content, div);
    if (div.sources.length) { const ol = el('ol', null, 'sources'); fillSources(ol, div.sources, div); div.append(ol); } }
  if (refused) content.before(el('p', 'Not answered from your notes', 'refusal-label'));
  if (refused && div.content.includes(NO_DOCUMENTS)) { const a = el('a', 'Add a document', 'add-doc');
    a.href = base + '/write'; content.append(' ', a); }
  if (m.role === 'assistant') showSearched(div, m.query);
  if (m.interrupted) div.append(el('p', 'Stopped: this answer was cut short.', 'note'));
  const actions = el('div', null, 'msg-actions');
  if (m.role === 'assistant') actions.append(copyButton(div), regenerateButton(div), ...feedbackButtons(div, m.feedback));
  if (m.role === 'user') actions.append(editButton(div));
  if (actions.childNodes.length) div.append(actions); }
// "Searched: …" under an answer whose search differs from the message asked (a follow-up's
// standalone question), so a wrong carried query is visible.
function showSearched(div, query) {
  if (query) div.query = query; query = div.query; let asked = div.previousElementSibling;
  while (asked && !asked.classList.contains('user')) asked = asked.previousElementSibling;
  const same = s => (s || '').toLowerCase().replace(/[^\p{L}\p{N}]+/gu, ' ').trim();
  if (!query || (asked && same(asked.content) === same(query))) return;
  div.querySelector('.content').before(el('p', 'Searched: ' + query, 'searched muted small')); }
function feedbackButtons(div, rating) {
  const said = el('span', '', 'muted small said'); said.setAttribute('role', 'status');
  const make = (value, label) => { const b = el('button', null, 'icon-btn thumb ' + value); b.type = 'button'; b.append(thumbIcon());
    b.dataset.rating = value; b.setAttribute('aria-label', label); b.title = label;
    b.setAttribute('aria-pressed', String(rating === value)); b.onclick = () => rate(div, value, said); return b; };
  return [make('up', 'Good answer'), make('down', 'Bad answer'), said]; }
// A thumb drawn as inline SVG (no icon font or image: every system shows it the same way). The
// outline follows Feather's "thumbs-up" (MIT); "down" is the same shape turned over in CSS.
const THUMB = 'M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.28a2 2 0 0 0 2-1.7l1.38-9a2 2 0 0 0-2-2.3zM7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3';
function thumbIcon() { const ns = 'http://www.w3.org/2000/svg', svg = document.createElementNS(ns, 'svg'), path = document.createElementNS(ns, 'path');
  for (const [k, v] of Object.entries({viewBox: '0 0 24 24', width: '16', height: '16', fill: 'none', stroke: 'currentColor',
    'stroke-width': '2', 'stroke-linecap': 'round', 'stroke-linejoin': 'round', 'aria-hidden': 'true', focusable: 'false'})) svg.setAttribute(k, v);
  path.setAttribute('d', THUMB); svg.append(path); return svg; }
function rate(div, value, said) {
  const pressed = div.querySelector('.thumb.' + value).getAttribute('aria-pressed') === 'true';
  const rating = pressed ? null : value;
  api('/chat/conversations/' + enc(current) + '/messages/' + enc(div.dataset.id) + '/feedback',
    {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({rating})}).then(m => {
    for (const b of div.querySelectorAll('.thumb')) b.setAttribute('aria-pressed', String(b.dataset.rating === m.feedback));
    said.textContent = m.feedback ? 'Thanks for the feedback' : 'Rating removed';
    setTimeout(() => { said.textContent = ''; }, 2000); }).catch(err => { said.textContent = describe(err); }); }
function regenerateButton(div) {  // answer the question before this answer again (the last answer only)
  const b = el('button', 'Regenerate', 'btn small ghost regen'); b.type = 'button'; b.title = 'Answer the question again';
  b.onclick = () => { let q = div.previousElementSibling; while (q && !q.classList.contains('user')) q = q.previousElementSibling;
    if (q && !busy) edit(q, q.content); }; return b; }
function copyButton(div) {
  const b = el('button', 'Copy', 'btn small ghost'), said = el('span', '', 'muted small');
  b.type = 'button'; said.setAttribute('role', 'status');
  b.onclick = () => writeClipboard(plainText(div.content))
    .then(() => { said.textContent = 'Copied'; setTimeout(() => { said.textContent = ''; }, 2000); })
    .catch(() => { said.textContent = 'Copy failed: select the text instead'; });
  const span = el('span'); span.append(b, said); return span; }
function writeClipboard(text) {  // navigator.clipboard exists only in secure contexts (https, localhost)
  if (navigator.clipboard) return navigator.clipboard.writeText(text);
  const area = el('textarea'); area.value = text; area.className = 'sr-only'; document.body.append(area);
  area.select(); const ok = document.execCommand('copy'); area.remove();
  return ok ? Promise.resolve() : Promise.reject(new Error('copy refused')); }
function editButton(div) {
  const b = el('button', 'Edit', 'btn small ghost'); b.type = 'button';
  b.title = 'Edit and send again'; b.onclick = () => startEdit(div); return b; }
function startEdit(div) {
  if (busy || div.querySelector('.edit-box')) return;
  const content = div.querySelector('.content'), actions = div.querySelector('.msg-actions');
  const box = el('form', null, 'edit-box'), area = el('textarea'), row = el('div', null, 'row');
  const save = el('button', 'Save and send', 'btn primary small'), cancel = el('button', 'Cancel', 'btn small');
  area.value = div.content; area.rows = 3; area.setAttribute('aria-label', 'Edited text'); cancel.type = 'button';
  row.append(cancel, save); box.append(area, row); content.hidden = true; actions.hidden = true; div.append(box);
  const close = () => { box.remove(); content.hidden = false; actions.hidden = false; };
  cancel.onclick = () => { close(); div.querySelector('.msg-actions button').focus(); };
  area.onkeydown = e => { if (e.key === 'Escape') { e.stopPropagation(); cancel.click(); }
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); box.requestSubmit(); } };
  box.onsubmit = e => { e.preventDefault(); if (!area.value.trim()) return; close(); edit(div, area.value); };
  area.focus(); }

// ------------------------------------------------------------------ server-sent events
async function readEvents(response, onEvent) {
  const reader = response.body.getReader(), decoder = new TextDecoder(); let buffer = '';
  for (;;) { const {value, done} = await reader.read(); if (done) break;
    buffer += decoder.decode(value, {stream: true}).replace(/\r\n/g, '\n'); let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end); buffer = buffer.slice(end + 2); dispatch(block, onEvent); } } }
function dispatch(block, onEvent) {  // one SSE frame; comment lines (": keep-alive") are skipped
  let name = 'message'; const data = [];
  for (const line of block.split('\n')) { if (!line || line[0] === ':') continue;
    const k = line.indexOf(':'), field = k < 0 ? line : line.slice(0, k);
    let value = k < 0 ? '' : line.slice(k + 1); if (value[0] === ' ') value = value.slice(1);
    if (field === 'event') name = value; else if (field === 'data') data.push(value); }
  if (data.length) onEvent(name, JSON.parse(data.join('\n'))); }

// ------------------------------------------------------------------ a turn
function newMessageId() { return 'web-' + Date.now().toString(36) + '-' + Math.random().toString(36).slice(2, 10); }
function setBusy(on) {
  const hadFocus = document.activeElement === stopButton;
  sendButton.hidden = on; stopButton.hidden = !on; stopButton.disabled = false; $('chat-status').textContent = on ? 'Answering…' : '';
  if (!on && hadFocus) input.focus(); }
const STOP_GRACE_MS = 3000;  // how long a stopped stream may take to end by itself before we hang up
function stop() {
  if (!busy || busy.stopping) return; const {controller, convId} = busy; busy.stopping = true;
  stopButton.disabled = true; $('chat-status').textContent = 'Stopping…';
  // The stop route ends the answer on the server (its stream still closes with sources and
  // answer_end, interrupted); hanging up stops it too, so that is the fallback.
  const hangUp = () => controller.abort();
  fetch(base + '/chat/conversations/' + enc(convId) + '/stop', withAuth({method: 'POST'}))
    .then(r => r.json().then(body => { if (!r.ok || !body.inFlight) hangUp(); else setTimeout(hangUp, STOP_GRACE_MS); }))
    .catch(hangUp); }
function answerEvents(bot, state) {  // docs/chat.md events → the message on screen
  const content = bot.querySelector('.content');
  const redraw = () => { bot.content = state.text; bot.sources = state.sources;
    if (state.text.trim()) renderContent(content, state.text, bot, true); };
  const on = {
    answer_start: data => { bot.dataset.id = data.messageId || ''; },
    answer_delta: data => { state.text += data.text; redraw(); },
    sources: data => { state.sources = data.sources || []; state.query = data.query; redraw(); },
    answer_end: data => { state.done = true; state.interrupted = !!data.interrupted;
      if (typeof data.content === 'string') state.text = data.content; },
    refusal: data => { state.refusal = data; state.done = true; },
    error: data => { state.error = data; state.done = true; }};
  // The view follows the answer while the reader is at the bottom; scrolled up, it stays put and
  // offers "Jump to latest".
  return (name, data) => { if (on[name]) on[name](data); }; }
function finishAnswer(bot, state) {
  bot.classList.remove('streaming');
  if (state.refusal) { showMessage(bot, {role: 'assistant', content: state.refusal.message, refusal: true, query: state.refusal.query});
    const tips = state.refusal.suggestions || [];
    if (tips.length) { const ul = el('ul', null, 'suggestions'); for (const t of tips) ul.append(el('li', t));
      bot.querySelector('.msg-actions').before(ul); }
    return; }
  showMessage(bot, {role: 'assistant', content: state.text, sources: state.sources, query: state.query,
    interrupted: !state.done || state.interrupted});
  if (state.error) { bot.classList.add('failed');
    bot.querySelector('.msg-actions').before(el('p', state.error.message || 'The answer failed.', 'note warn')); } }
async function turn(path, method, payload, userEl, restore) {
  const convId = current, controller = new AbortController();
  const bot = addMessage({role: 'assistant', content: ''}); bot.classList.add('streaming');
  bot.querySelector('.content').replaceChildren(typing());
  const state = {text: '', sources: [], done: false};
  busy = {controller, convId}; setBusy(true); chatError.textContent = ''; toBottom();
  try {
    const r = await fetch(base + path, withAuth({method, signal: controller.signal, body: JSON.stringify(payload),
      headers: {'Content-Type': 'application/json', Accept: 'text/event-stream'}}));
    if (!r.ok) throw httpError(r.status, await r.json().catch(() => ({})));
    userEl.classList.remove('pending');
    if ((r.headers.get('Content-Type') || '').includes('text/event-stream')) await readEvents(r, answerEvents(bot, state));
    else { const j = await r.json(); bot.dataset.id = j.id || '';
      Object.assign(state, {text: j.content, sources: j.sources || [], query: j.query, done: true});
      if (j.guardUsed) state.refusal = {message: j.content, suggestions: j.suggestions || [], query: j.query}; }
    finishAnswer(bot, state);
  } catch (err) {
    if (err.name === 'AbortError') { userEl.classList.remove('pending'); finishAnswer(bot, state); }
    else if (!state.text) { bot.remove(); userEl.remove(); restore(); chatError.textContent = describe(err);
      if (!messages.querySelector('.msg')) setEmpty(true); }
    else { state.error = {message: describe(err)}; finishAnswer(bot, state); }
  } finally {
    busy = null; setBusy(false); loadConversations(); syncIds(convId); } }
// The ids and times the server gave the messages (an edit and a rating need the id), matched by position.
function syncIds(convId) { api('/chat/conversations/' + enc(convId)).then(c => {
  const shown = messages.querySelectorAll('.msg');
  if (convId !== current || busy || shown.length !== c.messages.length) return;
  c.messages.forEach((m, i) => { if (!shown[i].classList.contains(m.role)) return;
    shown[i].dataset.id = m.id; shown[i].model = m.model; showTime(shown[i], m.createdAt); }); }).catch(() => {}); }
function send(content) {
  const id = newMessageId(), userEl = addMessage({role: 'user', content, messageId: id});
  userEl.classList.add('pending'); input.value = ''; autosize();
  const path = '/chat/conversations/' + enc(current) + '/messages';
  return turn(path, 'POST', {content, messageId: id}, userEl, () => { input.value = content; autosize(); }); }
function edit(div, content) {  // the server deletes every later message, then answers the new version
  if (busy) return; const id = div.dataset.id;
  let next = div.nextElementSibling; while (next) { const n = next.nextElementSibling; next.remove(); next = n; }
  const old = div.content; showMessage(div, {role: 'user', content}); div.classList.add('pending');
  const path = '/chat/conversations/' + enc(current) + '/messages/' + enc(id);
  return turn(path, 'PUT', {content}, div, () => { input.value = content; autosize(); open(current, old); }); }

// ------------------------------------------------------------------ conversations
function showTitle(c) { $('export').hidden = false;
  $('conv-title').textContent = (c.title || 'New conversation') + (c.collection ? ' · ' + c.collection : ''); }
// The open conversation as Markdown (GET …/export: titles, readable dates, numbered sources), saved
// as "<title>.md".
$('export').onclick = () => { if (!current) return; const id = current;
  fetch(base + '/chat/conversations/' + enc(id) + '/export?format=markdown', withAuth({})).then(async r => {
    if (!r.ok) throw httpError(r.status, await r.json().catch(() => ({})));
    const text = await r.text(), c = allConvs.find(x => x.id === id), a = el('a');
    a.href = URL.createObjectURL(new Blob([text], {type: 'text/markdown;charset=utf-8'}));
    a.download = ((c && c.title) || 'conversation').replace(/[\\/:*?"<>|]+/g, '_').slice(0, 80) + '.md';
    document.body.append(a); a.click(); a.remove(); setTimeout(() => URL.revokeObjectURL(a.href), 10000); }).catch(fail); };
function convItem(c) {
  const li = el('li', null, 'conv' + (c.id === current ? ' current' : '')), title = c.title || 'New conversation';
  const b = el('button', null, 'open'); b.type = 'button'; b.onclick = () => open(c.id);
  b.title = title + (c.collection ? ' · ' + c.collection : '');  // the whole title, however long
  if (c.id === current) b.setAttribute('aria-current', 'true');
  b.append(el('span', title, 'conv-title'), el('span', c.messageCount + ' messages' +
    (c.collection ? ' · ' + c.collection : '') + listDate(c.updatedAt || c.createdAt), 'muted'));
  const tools = el('span', null, 'tools');
  if (canRename) { const r = el('button', 'Rename', 'icon-btn'); r.type = 'button';
    r.setAttribute('aria-label', 'Rename ' + title); r.onclick = () => rename(li, c);
    tools.append(r); }
  const d = el('button', 'Delete', 'icon-btn'); d.type = 'button';
  d.setAttribute('aria-label', 'Delete ' + title); d.onclick = () => remove(c);
  tools.append(d); li.append(b, tools); return li; }
function rename(li, c) {
  const form = el('form', null, 'conv-edit'), field = el('input'), ok = el('button', 'Save', 'btn small');
  field.value = c.title || ''; field.setAttribute('aria-label', 'New title'); field.maxLength = 200;
  form.append(field, ok); li.replaceChildren(form); field.focus(); field.select();
  field.onkeydown = e => { if (e.key === 'Escape') { e.stopPropagation(); loadConversations(); } };
  form.onsubmit = e => { e.preventDefault();
    api('/chat/conversations/' + enc(c.id), {method: 'PATCH', headers: JSON_HEADERS,
      body: JSON.stringify({title: field.value.trim()})}).then(loadConversations).catch(fail); }; }
function remove(c) {
  if (!confirm('Delete the conversation "' + (c.title || 'New conversation') + '"?')) return;
  api('/chat/conversations/' + enc(c.id), {method: 'DELETE'}).then(() => {
    if (c.id === current) home(); return loadConversations(); }).catch(fail); }
function fail(err) { chatError.textContent = describe(err); }
function loadConversations() { return api('/chat/conversations?limit=200').then(p => {
  allConvs = p.items; moreConvs = !!p.cursor; searched = null; showConversations();
  const c = p.items.find(i => i.id === current); if (c) showTitle(c); }).catch(fail); }
// "· 14:05" today, "· 3 Mar" this year, "· 3 Mar 2025" before; the full date in the item's tooltip.
function listDate(iso) { const d = iso ? new Date(iso) : null; if (!d || isNaN(d)) return ''; const now = new Date();
  if (d.toDateString() === now.toDateString()) return ' · ' + TIME.format(d);
  return ' · ' + d.toLocaleDateString(undefined, d.getFullYear() === now.getFullYear() ?
    {day: 'numeric', month: 'short'} : {day: 'numeric', month: 'short', year: 'numeric'}); }
// The list, filtered by the search box: titles (and collections) at once, here; then the server's
// search (?q=), which also reads what was said in each conversation, and all of them past the 200 listed.
function showConversations() {
  const typed = $('conv-search').value.trim(), words = typed.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = allConvs.filter(c => { const hay = ((c.title || 'New conversation') + ' ' + (c.collection || '')).toLowerCase();
    return words.every(w => hay.includes(w)); });
  if (words.length) {
    if (searched && searched.q === typed) shown = searched.items;
    else { clearTimeout(searchTimer); searchTimer = setTimeout(() => api('/chat/conversations?limit=200&q=' + enc(typed))
      .then(p => { searched = {q: typed, items: p.items}; if ($('conv-search').value.trim() === typed) showConversations(); })
      .catch(fail), 250); } }
  convs.replaceChildren(...shown.map(convItem));
  $('convs-empty').hidden = allConvs.length > 0; $('search-box').hidden = allConvs.length === 0;
  const none = $('convs-none'); none.hidden = !(allConvs.length && !shown.length);
  none.textContent = 'No conversation title matches “' + $('conv-search').value.trim() + '”.'; }
$('conv-search').oninput = showConversations;
$('conv-search').onkeydown = e => { if (e.key === 'Escape' && e.target.value) { e.stopPropagation(); e.target.value = ''; showConversations(); } };
// Each conversation has an address, /ui/c/<id>: opening one pushes it (Back returns to the one
// before, or to the start page); a reload or a shared link opens it again.
function convPath(id) { return base + (id ? '/ui/c/' + enc(id) : '/ui'); }
function addressed() { const m = location.pathname.match(/\/ui\/c\/([^/]+)$/); return m ? decodeURIComponent(m[1]) : null; }
// The icon's address is relative to the page's: made whole once, so /ui/c/<id> asks for the same file.
for (const icon of document.querySelectorAll('link[rel~=icon]')) icon.setAttribute('href', icon.href);
function go(id, how) { if (how === 'none' || location.pathname === convPath(id)) return;
  history[how === 'replace' ? 'replaceState' : 'pushState']({conv: id || null}, '', convPath(id)); }
function open(id, draft, how) { if (busy && busy.convId !== id) stop(); return api('/chat/conversations/' + enc(id)).then(c => {
  current = c.id; go(c.id, how); if (!draft) chatError.textContent = ''; showTitle(c); closeSidebar(); hidePanel();
  $('welcome').hidden = true; messages.replaceChildren(emptyNote(c)); for (const m of c.messages) addMessage(m);
  input.focus(); toBottom(); return loadConversations(); }).catch(err => {
    // another member's (403: the API says whose, in words) or, for anyone else, not found
    if (err.status === 404 || err.status === 403) { home('replace'); chatError.textContent = err.status === 403 ? err.message : GONE; }
    else fail(err); }); }
// A conversation address that is nobody's the caller shares a workspace with: the API tells a stranger
// nothing (deleted, never there and someone else's read the same).
const GONE = 'That conversation was not found: it may have been deleted.';
function emptyNote(c) { const p = el('p', 'Ask anything about your notes' +
  (c.collection ? ' in “' + c.collection + '”' : '') + '.', 'muted lead'); p.id = 'empty'; return p; }
function home(how) { if (busy) stop(); current = null; $('export').hidden = true; go(null, how); messages.replaceChildren(); $('welcome').hidden = false;
  chatError.textContent = ''; $('conv-title').textContent = 'Ask your notes'; closeSidebar(); hidePanel(); loadConversations(); suggest(); }
// "New conversation": the start page; the first message sent creates the conversation (in the
// collection typed beside the button, if any).
$('new-conv').onsubmit = e => { e.preventDefault(); home(); input.focus(); };
async function create(content) {
  const body = {}, collection = $('collection').value.trim(); if (collection) body.collection = collection;
  const c = await api('/chat/conversations', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(withWorkspace(body))});
  current = c.id; go(c.id); showTitle(c); $('welcome').hidden = true; return send(content); }
window.addEventListener('popstate', () => { const id = addressed(); if (id) open(id, false, 'none'); else home('none'); });

// ------------------------------------------------------------------ the start page: suggestions
// Questions from the user's own documents: their headings that are questions ("Which file types can
// I add?"), then "What is <title>?" of the newest ones; no documents: "add one".
let suggestTimer = null;
const HEADING_QUESTION = /^#{1,4}[ \t]+(.{8,120}\?)[ \t]*$/gm;
// What the start page is about: the chosen workspace's documents, or (All my workspaces) those of
// every workspace the user can search, so a viewer of a team is not told they have none.
async function searchable() { const w = currentWorkspace();
  if (w) return (await api('/documents?limit=50&workspace=' + enc(w))).items;
  const spaces = ((await api('/workspaces')).items || []).slice(0, 10);
  const pages = await Promise.all(spaces.map(s => api('/documents?limit=50&workspace=' + enc(s.id)).catch(() => ({items: []}))));
  return pages.flatMap(p => p.items); }
// A document title as a topic people ask about ("office-hours.txt" → "office hours"); null when the
// title would not read as one (a sentence, a question, too long).
function topic(title) { const bare = String(title || '').replace(/\.(md|markdown|txt|html?|pdf|docx|pptx|xlsx|odt|epub|rtf)$/i, '');
  const file = bare !== title || (/[-_]/.test(bare) && !/\s/.test(bare)), t = bare.replace(/[-_]+/g, ' ').replace(/\s+/g, ' ').trim();
  if (!t || t.length > 50 || /[?!.:]$/.test(t) || t.split(' ').length > 7) return null;
  return file ? t.toLowerCase() : t; }
function suggest() { return searchable().then(async docs => {
  const ready = docs.filter(d => d.status === 'READY' && d.enabled);
  $('no-docs').hidden = docs.length > 0;
  const indexing = docs.filter(d => d.status === 'PENDING' || d.status === 'PROCESSING').length;
  $('indexing-note').textContent = !indexing ? '' : indexing === 1 ? '1 document is still being indexed: questions about it are answered once it is ready.'
    : indexing + ' documents are still being indexed: questions about them are answered once they are ready.';
  clearTimeout(suggestTimer);  // live: read again while any is in flight and the start page is shown
  if (indexing) suggestTimer = setTimeout(() => { if (!current) suggest(); }, 2000);
  $('samples-note').textContent = docs.some(d => d.collection === 'samples')
    ? 'Your documents include the samples (collection “samples”): five short guides to ragchat itself.'
    : docs.length ? '' : 'Or try the samples: `ragchat serve --samples` adds five short guides to ragchat itself.';
  const found = [];
  if (ready.length) { const notes = await api('/notes?limit=100').catch(() => ({items: []}));
    for (const n of notes.items) for (const m of n.text.matchAll(HEADING_QUESTION)) found.push(m[1].trim()); }
  for (const d of ready) { const t = topic(d.title); if (t) found.push('What do my documents say about ' + t + '?'); }
  const shown = [...new Set(found)].slice(0, 4), list = $('suggested');
  list.replaceChildren(...shown.map(q => { const li = el('li'), b = el('button', q, 'suggestion'); b.type = 'button';
    b.onclick = () => { input.value = q; autosize(); chatForm.requestSubmit(); }; li.append(b); return li; }));
  $('suggest-box').hidden = !shown.length; }).catch(() => {}); }

// ------------------------------------------------------------------ attaching files from the chat
// The files are added to your documents (in the conversation's collection, else the one typed beside
// New conversation), each with its status until READY; then questions can be about them.
$('attach').onclick = () => $('attach-file').click();
$('attach-file').onchange = async e => { const files = [...e.target.files]; e.target.value = '';
  const conv = allConvs.find(c => c.id === current), collection = (conv ? conv.collection : $('collection').value.trim()) || '';
  const up = await later('uploads.js', () => uploads).catch(err => { fail(err); return null; });
  if (!up) return;
  // where they go, said before they are sent: the workspace chosen, else Personal (also under "All my
  // workspaces", which is for asking: a file is added to one workspace)
  const target = workspaceOf(currentWorkspace()), shared = WORKSPACES.length > 1;
  if (shared || (target && target.role === 'viewer')) $('attached').append(el('li', target && target.role === 'viewer'
    ? 'You are a viewer of ' + target.name + ': choose a workspace you can add to.' : 'Adding to ' + (target ? target.name : 'Personal') +
      (currentWorkspace() ? '' : ' (choose a workspace above to add to another)') + ':', 'muted small'));
  if (target && target.role === 'viewer') return;
  for (const f of files) await up.one(f, collection, $('attached')); };

// ------------------------------------------------------------------ composer, keyboard, layout
function autosize() { input.style.height = 'auto'; input.style.height = Math.min(input.scrollHeight, 192) + 'px'; }
input.oninput = autosize;
input.onkeydown = e => { if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); chatForm.requestSubmit(); } };
chatForm.onsubmit = e => { e.preventDefault(); if (busy || creating || !input.value) return;
  if (current) { send(input.value); return; }
  creating = true; const content = input.value;
  create(content).catch(fail).finally(() => { creating = false; }); };
stopButton.onclick = stop;
document.addEventListener('keydown', e => { if (e.key === 'Escape' && busy) { e.preventDefault(); stop(); }
  else if (e.key === 'Escape') closeSidebar(); });
function closeSidebar() { $('sidebar').classList.remove('open'); $('scrim').hidden = true;
  $('menu').setAttribute('aria-expanded', 'false'); }
$('menu').onclick = () => { const open = !$('sidebar').classList.contains('open');
  $('sidebar').classList.toggle('open', open); $('scrim').hidden = !open; $('menu').setAttribute('aria-expanded', String(open)); };
$('scrim').onclick = closeSidebar;
function start() { mountWorkspaces(() => { if (!current) suggest(); }, {all: true, after: $('conv-title')});
  const id = addressed(); if (id) open(id, false, 'none'); else { loadConversations(); suggest(); } }
boot();
