// The workspace switcher (docs/workspaces.md), fetched by common.js's mountWorkspaces() (with
// workspaces.css) only for a user who belongs to more than the personal workspace: a <select> of the
// caller's workspaces at the top of the page (on the chat page in its sidebar); the choice is kept in
// sessionStorage (common.js: currentWorkspace()). On the Documents page the owner of a shared workspace
// also manages its members here.
function mountSwitcher(items, onChange, opts) { const all = !!(opts && opts.all), write = !!(opts && opts.write);
  let bar = $('workspace-bar');
  if (!bar) { bar = el('div', null, 'workspace-bar'); bar.id = 'workspace-bar';
    if (opts && opts.after) opts.after.after(bar); else if (opts && opts.before) opts.before.before(bar); else $('app').prepend(bar); }
  const label = el('label', write ? 'Add to workspace ' : 'Workspace '), select = el('select'); select.id = 'workspace';
  label.htmlFor = 'workspace'; bar.replaceChildren(label, select);
  if (all) select.append(new Option('All my workspaces', ''));
  for (const w of items) { const o = new Option(w.name + (w.personal ? '' : ' (' + w.role + ')'), w.personal && !all ? '' : w.id);
    // where content is added, a workspace the role cannot add to is shown, not offered, with the reason
    if (write && w.role === 'viewer') { o.disabled = true; o.textContent = w.name + ' (viewer: cannot add here)'; }
    select.append(o); }
  if (opts && opts.manage) { const b = el('button', 'New shared workspace', 'btn small'); b.type = 'button';
    b.id = 'new-workspace'; b.onclick = () => newWorkspaceForm(bar); bar.append(b); }
  const known = [...select.options].filter(o => !o.disabled).map(o => o.value), wanted = currentWorkspace();
  select.value = known.includes(wanted) ? wanted : '';
  if (select.value !== wanted) sessionStorage.setItem(WS_KEY, select.value);
  select.onchange = () => { sessionStorage.setItem(WS_KEY, select.value);
    if (opts && opts.members) showMembers(items); onChange(); };
  if (opts && opts.members) showMembers(items); }
// A new shared workspace (anyone may make one; its maker is its owner): a name, then the page shows it.
function newWorkspaceForm(bar) { if ($('new-ws-form')) { $('new-ws-name').focus(); return; }
  const form = el('form', null, 'member-form'), name = el('input'), ok = el('button', 'Create', 'btn small primary'), note = el('p', '', 'error');
  form.id = 'new-ws-form'; name.id = 'new-ws-name'; name.required = true; name.maxLength = 200;
  name.placeholder = 'Name of the new workspace'; name.setAttribute('aria-label', 'Name of the new workspace'); ok.type = 'submit';
  form.append(name, ok, note); if (bar) bar.after(form); else $('app').prepend(form); name.focus();
  form.onsubmit = e => { e.preventDefault();
    api('/workspaces', {method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({name: name.value.trim()})})
      .then(w => { sessionStorage.setItem(WS_KEY, w.id); location.reload(); })
      .catch(err => { note.textContent = describe(err); }); }; }
const ROLE_SAYS = {viewer: 'You are a viewer here: you can read and ask; editors add, disable and delete documents.',
  editor: 'You are an editor here: you can add, disable and delete documents; owners manage members.',
  owner: 'You are an owner here: you manage its name and members.'};
// The members of the chosen shared workspace; its owner renames it, adds members, changes roles and
// removes them; others see who is in it and what their own role allows.
function showMembers(items) { let box = $('members');
  if (!box) { box = el('section', null, 'members'); box.id = 'members'; $('workspace-bar').after(box); }
  const ws = items.find(w => w.id === currentWorkspace() && !w.personal);
  box.replaceChildren(); box.hidden = !ws; if (!ws) return;
  const owner = ws.role === 'owner', note = el('p', '', 'error');
  const fail = err => { note.textContent = describe(err); };
  const reload = () => showMembers(items);
  const head = el('div', null, 'members-head'); head.append(el('h2', 'Members of ' + ws.name));
  box.append(head, el('p', ROLE_SAYS[ws.role] || '', 'muted small role-says'));
  if (owner) { const r = el('button', 'Rename', 'btn small'); r.type = 'button'; r.id = 'rename-workspace'; head.append(r);
    r.onclick = () => { const form = el('form', null, 'member-form'), name = el('input'), ok = el('button', 'Save', 'btn small');
      name.value = ws.name; name.id = 'workspace-name'; name.setAttribute('aria-label', 'New name'); name.maxLength = 200; ok.type = 'submit';
      form.append(name, ok); head.after(form); name.focus(); name.select(); r.disabled = true;
      form.onsubmit = e => { e.preventDefault(); api('/workspaces/' + encodeURIComponent(ws.id), {method: 'PATCH', headers: JSON_HEADERS,
        body: JSON.stringify({name: name.value.trim()})}).then(() => location.reload()).catch(fail); }; }; }
  const list = el('ul'); box.append(list, note);
  const path = '/workspaces/' + encodeURIComponent(ws.id) + '/members';
  api(path).then(r => { for (const m of r.items || []) { const li = el('li', m.userId + ' — ');
    li.dataset.user = m.userId;
    if (owner) { const role = el('select'); role.setAttribute('aria-label', 'Role of ' + m.userId);
      for (const v of ['viewer', 'editor', 'owner']) role.append(new Option(v, v)); role.value = m.role;
      role.onchange = () => api(path + '/' + encodeURIComponent(m.userId), {method: 'PUT', headers: JSON_HEADERS,
        body: JSON.stringify({role: role.value})}).then(reload).catch(err => { fail(err); role.value = m.role; });
      const b = el('button', 'Remove', 'btn small danger'); b.type = 'button'; b.setAttribute('aria-label', 'Remove ' + m.userId);
      b.onclick = () => api(path + '/' + encodeURIComponent(m.userId), {method: 'DELETE'}).then(reload).catch(fail);
      li.append(role, ' ', b); }
    else li.append(m.role);
    list.append(li); } }).catch(fail);
  if (!owner) return;
  const form = el('form', null, 'member-form'), who = el('input'), role = el('select'), add = el('button', 'Add or change', 'btn small');
  who.placeholder = 'user id or name'; who.required = true; who.id = 'member-user';
  for (const r of ['viewer', 'editor', 'owner']) role.append(new Option(r, r));
  role.id = 'member-role'; add.type = 'submit'; form.append(who, ' ', role, ' ', add); box.append(form);
  form.onsubmit = e => { e.preventDefault();
    api(path + '/' + encodeURIComponent(who.value.trim()), {method: 'PUT', headers: JSON_HEADERS,
      body: JSON.stringify({role: role.value})}).then(reload).catch(fail); }; }
