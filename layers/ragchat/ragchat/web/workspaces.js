// The workspace switcher (docs/workspaces.md), fetched by common.js's mountWorkspaces() (with
// workspaces.css) only for a user who belongs to more than the personal workspace: a <select> of the
// caller's workspaces at the top of the page (on the chat page in its sidebar); the choice is kept in
// sessionStorage (common.js: currentWorkspace()). On the Documents page the owner of a shared workspace
// also manages its members here.
function mountSwitcher(items, onChange, opts) { const all = !!(opts && opts.all);
  let bar = $('workspace-bar');
  if (!bar) { bar = el('div', null, 'workspace-bar'); bar.id = 'workspace-bar';
    if (opts && opts.before) opts.before.before(bar); else $('app').prepend(bar); }
  const label = el('label', 'Workspace '), select = el('select'); select.id = 'workspace';
  label.htmlFor = 'workspace'; bar.replaceChildren(label, select);
  if (all) select.append(new Option('All my workspaces', ''));
  for (const w of items) select.append(new Option(w.name + (w.personal ? '' : ' (' + w.role + ')'),
    w.personal && !all ? '' : w.id));
  const known = [...select.options].map(o => o.value), wanted = currentWorkspace();
  select.value = known.includes(wanted) ? wanted : '';
  if (select.value !== wanted) sessionStorage.setItem(WS_KEY, select.value);
  select.onchange = () => { sessionStorage.setItem(WS_KEY, select.value);
    if (opts && opts.members) showMembers(items); onChange(); };
  if (opts && opts.members) showMembers(items); }
// The members of the chosen shared workspace; its owner adds, changes and removes them.
function showMembers(items) { let box = $('members');
  if (!box) { box = el('section', null, 'members'); box.id = 'members'; $('workspace-bar').after(box); }
  const ws = items.find(w => w.id === currentWorkspace() && !w.personal);
  box.replaceChildren(); box.hidden = !ws; if (!ws) return;
  const owner = ws.role === 'owner', note = el('p', '', 'error');
  const fail = err => { note.textContent = describe(err); };
  const reload = () => showMembers(items);
  box.append(el('h2', 'Members of ' + ws.name));
  const list = el('ul'); box.append(list, note);
  const path = '/workspaces/' + encodeURIComponent(ws.id) + '/members';
  api(path).then(r => { for (const m of r.items || []) { const li = el('li', m.userId + ' — ' + m.role + ' ');
    if (owner) { const b = el('button', 'Remove', 'btn small danger'); b.type = 'button';
      b.onclick = () => api(path + '/' + encodeURIComponent(m.userId), {method: 'DELETE'}).then(reload).catch(fail);
      li.append(b); }
    list.append(li); } }).catch(fail);
  if (!owner) return;
  const form = el('form', null, 'member-form'), who = el('input'), role = el('select'), add = el('button', 'Add or change', 'btn small');
  who.placeholder = 'user id or name'; who.required = true; who.id = 'member-user';
  for (const r of ['viewer', 'editor', 'owner']) role.append(new Option(r, r));
  role.id = 'member-role'; add.type = 'submit'; form.append(who, ' ', role, ' ', add); box.append(form);
  form.onsubmit = e => { e.preventDefault();
    api(path + '/' + encodeURIComponent(who.value.trim()), {method: 'PUT', headers: JSON_HEADERS,
      body: JSON.stringify({role: role.value})}).then(reload).catch(fail); }; }
