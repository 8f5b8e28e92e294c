// Answers as Markdown, safely, and their citations (loaded on /ui after common.js and the vendored
// marked + DOMPurify, before ask.js). Three fences keep markup from documents or answers inert:
// marked renders raw HTML in the text as text (never as markup); DOMPurify keeps only the tags and
// attributes Markdown makes (no script, no event handler, no image, no javascript: link); and the
// CSP (script-src 'self') would refuse an inline script anyway. [source: id] tags become numbered
// buttons [n] that open the source; the trailing "Sources: id1, id2" line becomes the chips.
const TAG = /\[source:\s*([A-Za-z0-9_-]+)\]/g;
const SOURCES_LINE = /\n*[ \t]*Sources:[ \t]*[A-Za-z0-9_-]+(?:[ \t]*,[ \t]*[A-Za-z0-9_-]+)*[ \t]*$/;
// While streaming, the end of the text may hold half a tag or half the Sources line: hidden until whole.
const PARTIAL_END = /(?:\[(?:s(?:o(?:u(?:r(?:c(?:e(?::[ \t]*[A-Za-z0-9_-]*)?)?)?)?)?)?)?|\n*[ \t]*Sources:[ \t]*[A-Za-z0-9_, \t-]*)$/;
const CITE = /\uE000(\d+)\uE001/g;  // a citation's place while Markdown is rendered (private-use code points)
const MARKDOWN_TAGS = ['p', 'br', 'strong', 'em', 'del', 's', 'code', 'pre', 'blockquote', 'ul', 'ol', 'li',
  'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'a'];
const PURIFY = {ALLOWED_TAGS: MARKDOWN_TAGS, ALLOWED_ATTR: ['href', 'title', 'align', 'start'], ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i, RETURN_DOM_FRAGMENT: true};
const SHOWN_SOURCES = 3;
let uid = 0;

function escapeHtml(s) { return String(s).replace(/[&<>"']/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;',
  '"': '&quot;', "'": '&#39;'})[c]); }
const md = new marked.Marked({gfm: true, breaks: true, async: false});
const SAFE_URL = /^(?:https?:|mailto:|#)/i;
md.use({renderer: {
  html(token) {  // raw HTML in an answer is shown as the text it is
    const text = escapeHtml(token.text || token.raw || ''); return token.block ? '<p>' + text + '</p>' : text; },
  link(token) {  // a link to anything but http(s)/mailto is just its text
    return SAFE_URL.test(token.href || '') ? false : this.parser.parseInline(token.tokens); }}});
DOMPurify.addHook('afterSanitizeAttributes', node => {
  if (node.tagName === 'A') { node.setAttribute('target', '_blank'); node.setAttribute('rel', 'noopener noreferrer'); } });

// What Copy puts on the clipboard: the answer's Markdown without [source: …] tags or the Sources line.
function plainText(text) {
  return text.replace(SOURCES_LINE, '').replace(/[ \t]*\[source:\s*[A-Za-z0-9_-]+\]/g, '')
    .replace(/[ \t]+([.,;:!?])/g, '$1').replace(/[ \t]{2,}/g, ' ').trim(); }
function sourceLabel(s) { return (s.title || 'Untitled note') + (s.page ? ' · p. ' + s.page : ''); }
// A stored snippet (the note's first 160 characters, spaces collapsed) as clean text: no Markdown
// heading, list or bold marks, and no word cut in two.
function cleanSnippet(text) {
  const raw = String(text || ''), cut = raw.length >= 160;  // the server keeps 160 characters
  let t = raw.replace(/^\s*(?:[-*+>]\s+|\d+[.)]\s+)/gm, '').replace(/(^|\s)#{1,6}\s+/g, '$1')
    .replace(/\*\*/g, '').replace(/\s+/g, ' ').trim();
  if (cut && !/[.!?…"')\]]$/.test(t)) { const space = /\s$/.test(raw) ? t.length : t.lastIndexOf(' ');
    t = (space > 40 ? t.slice(0, space) : t).replace(/[,;:\s-]+$/, '') + '…'; }
  return t; }
// The answer as Markdown into ``box``; each [source: id] as a button numbered by ``msgEl.sources``.
function renderContent(box, text, msgEl, streaming) {
  let body = text.replace(SOURCES_LINE, ''); if (streaming) body = body.replace(PARTIAL_END, '');
  const sources = msgEl.sources || [], order = sources.map(s => s.id);
  body = body.replace(/[ \t]*\[source:\s*([A-Za-z0-9_-]+)\]/g, (_, id) => {
    let n = order.indexOf(id); if (n < 0) { order.push(id); n = order.length - 1; }
    return '\uE000' + (n + 1) + '\uE001'; });
  const fragment = DOMPurify.sanitize(md.parse(body), PURIFY);
  placeCitations(fragment, n => { const id = order[n - 1], s = sources.find(x => x.id === id);
    const cite = el('button', '[' + n + ']', 'cite'); cite.type = 'button';
    cite.setAttribute('aria-label', 'Source ' + n + (s ? ': ' + sourceLabel(s) : ''));
    if (s) cite.title = sourceLabel(s);
    cite.setAttribute('aria-haspopup', 'dialog'); cite.onclick = () => openSource(msgEl, id, cite); return cite; });
  box.replaceChildren(fragment); }
function placeCitations(root, make) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT), found = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) if (n.nodeValue.indexOf('\uE000') >= 0) found.push(n);
  for (const node of found) { const parts = node.nodeValue.split(CITE), out = [];
    parts.forEach((part, i) => { if (i % 2) out.push(make(Number(part))); else if (part) out.push(part); });
    node.replaceWith(...out); } }
// A citation or a chip opens the side panel (viewer.js): the passage whole, the cited sentences marked.
function openSource(msgEl, id, from) { const s = (msgEl.sources || []).find(x => x.id === id);
  if (s) viewer().then(p => p.passage(s, msgEl.content || '', from)); }
function sourceItem(s, n, msgEl) {
  const li = el('li'); li.dataset.id = s.id;
  const chip = el('button', null, 'chip'); chip.type = 'button'; chip.setAttribute('aria-haspopup', 'dialog');
  chip.append(el('span', String(n), 'n'), el('span', sourceLabel(s), 't'));
  chip.title = sourceLabel(s); chip.onclick = () => openSource(msgEl, s.id, chip);
  li.append(chip); return li; }
function fillSources(ol, sources, msgEl) {
  ol.replaceChildren(); const items = (sources || []).map((s, i) => sourceItem(s, i + 1, msgEl));
  items.forEach((li, i) => { li.hidden = i >= SHOWN_SOURCES; ol.append(li); });
  if (items.length > SHOWN_SOURCES) {
    const li = el('li', null, 'more'), more = el('button', 'Show more sources (' +
      (items.length - SHOWN_SOURCES) + ')', 'more-sources');
    more.type = 'button'; more.onclick = () => { for (const i of items) i.hidden = false; li.remove(); };
    li.append(more); ol.append(li); } }
