// The side panel (fetched by common.js's viewer() on the Chat and Documents pages when first opened): a cited passage whole,
// with the answer span the reader found in it highlighted (a source's `highlight`: a table's cell, not the
// table), else the sentences the answer took from it, and the document viewer (its text; a PDF
// one page at a time: the page's image, the cited sentences boxed on it, with the page number, and its text). Text from documents is shown with textContent only.
const panel = (() => {
  let invoker = null, docText = '';
  const root = el('aside', null, 'panel'); root.id = 'panel'; root.hidden = true;
  root.setAttribute('role', 'dialog'); root.setAttribute('aria-labelledby', 'panel-title');
  const head = el('div', null, 'panel-head'), title = el('h2', '', 'panel-title'); title.id = 'panel-title';
  const close = el('button', null, 'icon-btn panel-close'); close.type = 'button'; close.setAttribute('aria-label', 'Close');
  close.textContent = '✕'; head.append(title, close);
  const body = el('div', null, 'panel-body'); body.id = 'panel-body'; root.append(head, body);
  document.body.append(root);
  // A PDF page is shown in a wider panel (its image readable: ~860 px at 1280 px), and a click on the
  // image shows it at its full size (scrolled within the panel on a phone).
  function wide(on) { root.classList.toggle('wide', on); document.body.classList.toggle('panel-wide', on); }
  function hide() { if (root.hidden) return; root.hidden = true; document.body.classList.remove('panel-open'); wide(false);
    if (invoker && invoker.isConnected) invoker.focus(); invoker = null; }
  close.onclick = hide;
  root.addEventListener('keydown', e => { if (e.key === 'Escape') { e.stopPropagation(); hide(); } });
  function show(heading, from) { if (from) invoker = from; title.textContent = heading; body.replaceChildren();
    wide(false);
    root.hidden = false; document.body.classList.add('panel-open'); body.scrollTop = 0; close.focus(); return body; }
  function fail(err) { body.append(el('p', describe(err), 'error')); }

  // ---------------------------------------------------------------- words and sentences
  const WORD = /[\p{L}\p{N}]+/gu, STOP = new Set(['the', 'and', 'for', 'are', 'was', 'with', 'that', 'this',
    'from', 'its', 'into', 'not', 'but', 'you', 'your', 'has', 'have', 'can', 'all', 'any', 'one', 'who', 'how']);
  function words(s) { return (String(s).toLowerCase().match(WORD) || []).filter(w => (w.length > 2 || /\d/.test(w)) && !STOP.has(w)); }
  // Sentences run across line breaks (a PDF's lines are wrapped); a list item starts a new one.
  function sentences(text) { const out = [];
    for (const part of String(text).split(/(\n(?=[ \t]*(?:•|\d+[.)])\s))/)) if (part)
      out.push(...(part.match(/[^.!?]+(?:[.!?]+["'”’)\]]*|$)\s*|[.!?]+\s*/g) || []));
    return out; }
  // What an answer says before each [source: id] tag of ``id`` (the sentence or clause the tag
  // closes, whether it stands before or after the period), as sets of words.
  function citing(answer, id) { const out = [], tag = /\[source:\s*([A-Za-z0-9_-]+)\]/g;
    const text = String(answer || '').replace(/\n*[ \t]*Sources:[^\n]*$/, '');
    for (const m of text.matchAll(tag)) { if (m[1] !== id) continue;
      const before = text.slice(0, m.index).replace(/[\s.!?]+$/, '');
      const start = Math.max(before.search(/[^.!?\n\]]*$/), 0);
      out.push(new Set(words(before.slice(start).replace(tag, '')))); }
    return out.filter(set => set.size); }
  // A passage sentence is "cited" when most of its words are in a citing sentence of the answer
  // (an extractive quote, or a close paraphrase), or it carries most of such a sentence.
  function isCited(sentence, cited) { const w = words(sentence); if (w.length < 2) return false;
    return cited.some(set => { const common = w.filter(x => set.has(x)).length;
      return common >= 2 && (common / w.length >= 0.6 || common / set.size >= 0.6); }); }

  // ---------------------------------------------------------------- text as blocks, cited sentences marked
  // Markdown marks are read, not shown: **strong**, *emphasis*, _emphasis_, `code`, [links](…), bullets.
  // Only marks that pair up are read (as CommonMark does): an underscore inside a word or an identifier
  // (snake_case, window.__name) and a lone ** or ` stay as written.
  function clean(line) { return line.replace(/\*\*(?=\S)([^\n]*?\S)\*\*/g, '$1')
    .replace(/(^|[^\p{L}\p{N}_\\])__(?=\S)([^\n]*?\S)__(?![\p{L}\p{N}_])/gu, '$1$2')
    .replace(/`([^`\n]+)`/g, '$1').replace(/^\s*[-*+]\s+/, '• ')
    .replace(/(^|[^\p{L}\p{N}*_\\])[*_](?=\S)([^*_\n]*?\S)[*_](?![\p{L}\p{N}])/gu, '$1$2')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1'); }
  const TABLE_RULE = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;
  function cells(line) { return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map(c => clean(c.trim())); }
  // A Markdown table (every line starts with "|"): a table, its cited rows highlighted.
  function table(block, cited) { const lines = block.split('\n').filter(l => l.trim()), t = el('table', null, 'doc-table');
    let first = null, head = TABLE_RULE.test(lines[1] || '');
    for (const line of lines) { if (TABLE_RULE.test(line)) continue; const tr = el('tr'), row = cells(line);
      for (const c of row) tr.append(el(head ? 'th' : 'td', c));
      if (!head && cited.length && isCited(row.join(' '), cited)) { tr.className = 'cited'; if (!first) first = tr; }
      t.append(tr); head = false; }
    const wrap = el('div', null, 'table-wrap'); wrap.append(t); return {wrap, first}; }
  function render(box, text, cited) { let first = null;
    for (const block of String(text).replace(/\r\n/g, '\n').split(/\n\s*\n/)) { if (!block.trim()) continue;
      if (block.trim().split('\n').every(l => /^\s*\|/.test(l))) { const t = table(block, cited);
        box.append(t.wrap); if (!first) first = t.first; continue; }
      const heading = /^\s*#{1,6}\s+/.test(block) && !block.trim().includes('\n');
      const p = el(heading ? 'h3' : 'p', null, heading ? 'doc-h' : 'doc-p');
      // a paragraph's wrapped lines run on (a list item, a table row or code keeps its own line)
      const raw = heading ? clean(block.replace(/^\s*#{1,6}\s+/, '').trim()) : block.split('\n').map(clean)
        .reduce((out, line) => !out ? line : out + (/^\s*(?:•|\d+[.)]\s|\||```|\s{4})/.test(line) ? '\n' : ' ') + line.trim(), '');
      for (const s of sentences(raw)) { if (!heading && cited.length && isCited(s, cited)) {
          const m = el('mark', s); p.append(m); if (!first) first = m; } else p.append(s); }
      box.append(p); }
    return first; }
  // The reader's answer span, marked where it stands in the rendered text (the first text node holding
  // it; a span the product labelled, "Plot: Half plot; Rent: 48 pounds", by its longest piece found).
  function markSpan(box, span) { const wanted = String(span || '').trim(); if (!wanted) return null;
    const pieces = [wanted, ...wanted.split(/[;:]\s+|\.\s+/).map(x => x.trim()).filter(x => x.length > 2)
      .sort((a, b) => b.length - a.length)];
    for (const piece of pieces) { const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
      for (let node = walk.nextNode(); node; node = walk.nextNode()) { const at = node.data.indexOf(piece);
        if (at < 0) continue;
        const rest = node.splitText(at); rest.splitText(piece.length);
        const m = el('mark', piece, 'span-mark'); rest.replaceWith(m); return m; } }
    return null; }
  // A passage's text with the span marked, else (no span, or not found) its cited sentences.
  function renderMarked(box, text, cited, span) {
    if (span) { render(box, text, []); const m = markSpan(box, span); if (m) return m; box.replaceChildren(); }
    return render(box, text, cited); }

  // ---------------------------------------------------------------- a cited passage
  // A stored source keeps the note's first 160 characters: shown up to its last whole word.
  function wholeWords(t) { if (t.length < 160 || /[.!?…"')\]]$/.test(t)) return t;
    const space = t.lastIndexOf(' '); return (space > 40 ? t.slice(0, space) : t).replace(/[,;:\s-]+$/, '') + '…'; }
  function label(s) { return (s.title || 'Untitled note') + (s.page ? ' · p. ' + s.page : ''); }
  function passage(source, answer, from) {
    const box = show(label(source), from), cited = citing(answer, source.id);
    const text = el('div', null, 'passage'); text.textContent = 'Loading the passage…'; box.append(text);
    const actions = el('p', null, 'panel-actions');
    if (source.documentId) { const open = el('button', 'Open document', 'btn small'); open.type = 'button';
      open.onclick = () => documentView(source.documentId, {page: source.page, cited, title: source.title, span: source.highlight}); actions.append(open); }
    box.append(actions);
    api('/notes/' + encodeURIComponent(source.id)).then(n => { text.replaceChildren(); renderMarked(text, n.text, cited, source.highlight); })
      .catch(err => { text.replaceChildren(); if (err.status === 404) {  // the note is gone: what the answer stored
        renderMarked(text, wholeWords(source.text || ''), cited, source.highlight); text.append(el('p', 'This passage is no longer in your documents.', 'muted small')); }
      else fail(err); }); }

  // ---------------------------------------------------------------- the document viewer
  async function notesOf(id) { const all = []; let cursor = null;
    do { const p = await api('/notes?limit=200&documentId=' + encodeURIComponent(id) + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
      all.push(...p.items); cursor = p.cursor; } while (cursor && all.length < 5000);
    return all.sort((a, b) => a.chunkIndex - b.chunkIndex); }
  function joined(chunks) {  // consecutive chunks overlap by ~100 characters: each tail is kept once
    let out = '';
    for (const c of chunks) { let t = c.text;
      for (let k = Math.min(300, t.length, out.length); k > 20; k--) if (out.endsWith(t.slice(0, k))) { t = t.slice(k); break; }
      out += (out && t && !/^\s/.test(t) && !/\s$/.test(out) ? '\n\n' : '') + t; }
    return out; }
  function download(name, text) { const a = el('a', 'Download text', 'btn small');
    a.href = URL.createObjectURL(new Blob([text], {type: 'text/plain;charset=utf-8'}));
    a.download = (name || 'document').replace(/[\\/:*?"<>|]+/g, '_').replace(/\.(md|txt|html?|pdf)$/i, '') + '.txt'; return a; }
  // On AWS the text comes as a link (a presigned GET of any size, past Lambda's 6 MB answers): read
  // it without the user's token, which is for the API only.
  async function linkedText(url) {
    const res = await fetch(url, {credentials: 'omit', referrerPolicy: 'no-referrer'});
    if (!res.ok) throw new Error('The document text could not be read (' + res.status + '): open it again.');
    return res.text(); }
  async function documentView(id, opts, from) {
    opts = opts || {}; const box = show(opts.title || 'Document', from); box.append(el('p', 'Loading the document…', 'muted'));
    try { const doc = await api('/documents/' + encodeURIComponent(id));
      show(doc.title || 'Untitled note');
      if (doc.contentType === 'application/pdf') return pdfPage(doc, opts.page || 1, opts.cited || [], 0, opts.span);
      const full = await api('/documents/' + encodeURIComponent(id) + '?include=body');
      docText = full.bodyUrl ? await linkedText(full.bodyUrl) : (full.body || '');
      // a picture read by OCR is shown above its text (a TIFF, which browsers cannot show, is not)
      const picture = doc.textFrom === 'ocr' && doc.contentType !== 'image/tiff' ? pageImage(doc, 1) : null;
      const find = viewer(doc, docText, opts.cited || [], null, picture && picture.fig, opts.span);
      if (picture) picture.load(find);
    } catch (err) { box.replaceChildren(); fail(err); } }
  // The text shown (a page's, with ``image`` above it); returns what it marked (the passages to box on the image).
  function viewer(doc, text, cited, pager, image, span) {
    const box = body; box.replaceChildren();
    const bar = el('div', null, 'panel-actions'); bar.append(download(doc.title, text)); if (pager) bar.prepend(pager);
    const page = el('div', null, 'doc-text'); const first = renderMarked(page, text, cited, span);
    const picture = /^image\//.test(doc.contentType || '');
    box.append(bar); if (image) box.append(image, el('h3', picture ? 'Text read from the picture' : 'Text of this page', 'doc-h'));
    if (doc.textFrom === 'ocr') box.append(el('p', 'Text read by OCR: check names and numbers against the original.', 'muted small ocr-note'));
    box.append(page);
    if (first && image) { const go = el('button', 'Cited text ↓', 'btn small'); go.type = 'button';
      go.onclick = () => first.scrollIntoView({block: 'center'}); bar.append(go); }
    else if (first) first.scrollIntoView({block: 'center'});
    return marked(page); }
  // The passages marked in a page's text: the page image's ``find`` (at most 8 and 1800 characters, in
  // at most 4000 characters of the address: API Gateway takes URLs of 8192 characters, edge-optimized).
  function marked(page) { const out = []; let room = 1800, bytes = 4000;
    for (const m of page.querySelectorAll('mark, tr.cited')) { const t = m.textContent.replace(/\s+/g, ' ').trim();
      const size = encodeURIComponent(t).length + 3;
      if (t && t.length < room && size <= bytes && out.length < 8) { out.push(t); room -= t.length + 1; bytes -= size; } }
    return out; }
  // A PDF page as the reader sees it (rendered by the server: GET /documents/{id}/pages/{n}), and its
  // text below, with the cited sentences highlighted (findable and selectable), and boxed on the image
  // where the page has them (the server finds them in the page's own text: ``find`` → ``marks``).
  function pageImage(doc, n) { const fig = el('figure', null, 'pdf-page'), frame = el('div', null, 'page-frame'), img = el('img');
    img.alt = (/^image\//.test(doc.contentType || '') ? 'The picture ' : 'Page ' + n + ' of ') + (doc.title || 'the document'); frame.append(img); fig.append(frame); wide(true);
    img.title = 'Click to zoom'; img.onclick = () => fig.classList.toggle('zoomed');
    const fetchPage = find => api('/documents/' + encodeURIComponent(doc.id) + '/pages/' + n +
      (find.length ? '?find=' + encodeURIComponent(find.join('\n')) : ''));
    // the boxes are a help: a refusal of what was asked to find still shows the page
    const load = find => fetchPage(find).catch(err => (find.length && [400, 413, 414].includes(err.status) ? fetchPage([]) : Promise.reject(err))).then(r => {
      img.width = r.width; img.height = r.height; img.src = r.image;
      for (const m of r.marks || []) { const box = el('div', null, 'page-mark'); box.setAttribute('aria-hidden', 'true');
        Object.assign(box.style, {left: 100 * m.x + '%', top: 100 * m.y + '%', width: 100 * m.width + '%', height: 100 * m.height + '%'});
        frame.append(box); }
      return r.pages; })
      .catch(err => { fig.replaceChildren(el('p', 'The page image could not be shown. ' + describe(err), 'muted small')); return 0; });
    return {fig, load}; }
  async function pdfPage(doc, n, cited, count, span) {
    const notes = await notesOf(doc.id), known = [...new Set(notes.map(x => (x.metadata || {}).page).filter(Boolean))];
    let last = Math.max(1, count || 0, ...known); n = Math.min(Math.max(1, n || 1), last);
    const shown = pageImage(doc, n), text = joined(notes.filter(x => (x.metadata || {}).page === n));
    if (notes.some(x => (x.metadata || {}).ocr)) doc = {...doc, textFrom: 'ocr'};  // a scanned PDF, read by OCR
    const pager = el('span', null, 'pager'), prev = el('button', '‹ Previous page', 'btn small'), next = el('button', 'Next page ›', 'btn small');
    prev.type = next.type = 'button'; prev.disabled = n <= 1; next.disabled = n >= last;
    prev.onclick = () => pdfPage(doc, n - 1, cited, last, span); next.onclick = () => pdfPage(doc, n + 1, cited, last, span);
    const where = el('strong', 'Page ' + n + ' of ' + last, 'page-no');
    pager.append(prev, where, next); const find = viewer(doc, text || '(No text on this page.)', cited, pager, shown.fig, span);
    // the page count from the PDF itself (pages with no text have no notes)
    shown.load(find).then(pages => { if (pages > last) { last = pages; where.textContent = 'Page ' + n + ' of ' + pages;
      next.disabled = n >= pages; } }); }
  return {passage, documentView, hide};
})();
