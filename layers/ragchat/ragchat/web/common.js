// Shared by every page: sign-in, API calls (same origin and stage), DOM helpers. Rendered with
// textContent only, never as HTML. Each page's own script runs after this one and calls boot().
const base = location.pathname.replace(/\/(ui(\/c\/[^/]+)?|write|documents\/ui)$/, '');
const JSON_HEADERS = {'Content-Type': 'application/json'};
const CONFIG = JSON.parse(document.getElementById('ragchat-config').textContent);
const AUTH_KEY = 'ragchat.authorization';  // sessionStorage (Cognito): the Authorization value of every call
// Local (auth 'token'): the token is traded once for an HttpOnly session cookie; the cookie counts only
// with this origin's half, kept in localStorage (every tab of this server, no other port or site):
// serving/sessions.py.
const SESSION_KEY = 'ragchat.session';
function authorization() { return CONFIG.auth === 'cognito' ? sessionStorage.getItem(AUTH_KEY) : null; }
function signedIn() { return CONFIG.auth === 'none' || !!(CONFIG.auth === 'token' ? localStorage.getItem(SESSION_KEY) : authorization()); }
function authHeaders() { if (CONFIG.auth === 'token') { const s = localStorage.getItem(SESSION_KEY);
    return s ? {'X-Ragchat-Csrf': s} : {}; }
  const auth = authorization(); return auth ? {Authorization: auth} : {}; }
function withAuth(opts) { const o = Object.assign({}, opts), headers = new Headers(o.headers || {});
  for (const [k, v] of Object.entries(authHeaders())) headers.set(k, v); o.headers = headers; return o; }
// The token (from the link or typed) for this server's session cookie; the token is kept nowhere.
async function startSession(auth) { const r = await fetch(base + '/session', {method: 'POST', headers: {Authorization: auth}});
  const body = await r.json().catch(() => ({}));
  if (!r.ok) { const err = new Error(r.status === 401 ? 'That token is not this server\'s: open the link ragchat serve ' +
      'prints, or paste the token from its serve.token file.' : String(body.error || ('HTTP ' + r.status)));
    err.status = r.status; throw err; }
  localStorage.setItem(SESSION_KEY, body.csrf); }
function signOut() { const done = () => showSignIn('Signed out');
  if (CONFIG.auth !== 'token') return done();
  fetch(base + '/session', withAuth({method: 'DELETE'})).catch(() => {}).finally(done); }
function api(path, opts) { return fetch(base + path, withAuth(opts)).then(async r => {
  const body = r.status === 204 ? {} : await r.json().catch(() => ({}));
  if (!r.ok) throw httpError(r.status, body); return body; }); }
// An API refusal as an Error carrying the status, said in plain words (a 401 also signs out).
function httpError(status, body) {
  if (status === 401 && CONFIG.auth !== 'none') showSignIn('Signed out: please sign in again');
  let text = String(body.error || body.message || ('HTTP ' + status));
  if (status === 429) text = text.replace(/\.?$/, '.') + (body.retryAfter ?
    ' Please wait ' + body.retryAfter + ' s and try again.' : ' Please wait a moment and try again.');
  const err = new Error(text); err.status = status; err.retryAfter = body.retryAfter; return err; }
// What to tell the user about a failed call.
function describe(err) {
  if (err instanceof TypeError) return 'Could not reach the server. Check the connection and try again.';
  if (err.status === 429) return err.message;
  if (err.status >= 500) return 'Something went wrong on the server (' + err.message + '). Please try again.';
  return err.message; }  // the API's own words, as the CLI prints them (after its "error: ")
function showSignIn(note) { sessionStorage.removeItem(AUTH_KEY); localStorage.removeItem(SESSION_KEY);
  $('app').hidden = true; $('account').hidden = true; $('signin').hidden = false;
  $('signin-note').textContent = note || ''; $('signin-error').textContent = ''; }
function showApp() { $('signin').hidden = true; $('app').hidden = false;
  $('account').hidden = CONFIG.auth === 'none'; }
async function cognitoIdToken(username, password) {
  let r; try {
    r = await fetch(CONFIG.cognitoEndpoint, {method: 'POST', headers: {
      'Content-Type': 'application/x-amz-json-1.1',
      'X-Amz-Target': 'AWSCognitoIdentityProviderService.InitiateAuth'},
      body: JSON.stringify({AuthFlow: 'USER_PASSWORD_AUTH', ClientId: CONFIG.clientId,
        AuthParameters: {USERNAME: username, PASSWORD: password}})});
  } catch (err) { throw new Error('Could not reach Cognito: ' + err.message); }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) { const type = String(body.__type || '').split('#').pop();
    throw new Error((body.message || body.Message || ('Cognito answered HTTP ' + r.status)) +
      (type ? ' (' + type + ')' : '')); }
  if (body.ChallengeName === 'NEW_PASSWORD_REQUIRED') throw new Error('This account needs its ' +
    'password set before it can sign in here: an administrator runs `aws cognito-idp ' +
    'admin-set-user-password --permanent` for it (see docs/deploy.md), then sign in with that password.');
  if (body.ChallengeName) throw new Error('Cognito asks for ' + body.ChallengeName +
    ', which these pages do not support: sign in with the AWS CLI instead.');
  const token = body.AuthenticationResult && body.AuthenticationResult.IdToken;
  if (!token) throw new Error('Cognito returned no ID token'); return token; }
async function checkAuthorization(auth) {  // one cheap call, so a wrong token is said at once
  const r = await fetch(base + '/documents?limit=1', {headers: {Authorization: auth}});
  if (r.ok) return; const body = await r.json().catch(() => ({}));
  throw new Error(body.error || body.message || ('HTTP ' + r.status)); }
async function signIn(e) { e.preventDefault(); const error = $('signin-error'), button = $('signin-button');
  error.textContent = ''; button.disabled = true;
  try { const secret = $('signin-secret');
    if (CONFIG.auth === 'cognito') { const auth = await cognitoIdToken($('signin-user').value.trim(), secret.value);
      await checkAuthorization(auth); sessionStorage.setItem(AUTH_KEY, auth); }
    else await startSession('Bearer ' + secret.value.trim());
    secret.value = ''; showApp(); start();
  } catch (err) { error.textContent = err.message; } finally { button.disabled = false; } }
// The link `ragchat serve` prints (…/ui#token=…, as Jupyter does) signs this browser in: the token is
// traded like a typed one and taken out of the address bar at once (history, bookmarks, a shared screen).
function tokenFromLink() { const hash = new URLSearchParams(location.hash.slice(1));
  const query = new URLSearchParams(location.search), token = hash.get('token') || query.get('token');
  if (token === null) return; hash.delete('token'); query.delete('token');
  const q = query.toString(), h = hash.toString();
  history.replaceState(null, '', location.pathname + (q ? '?' + q : '') + (h ? '#' + h : ''));
  return CONFIG.auth === 'token' && token.trim() ? token.trim() : null; }
async function boot() { const linked = tokenFromLink(); if (CONFIG.auth !== 'none') {
    $('signin-form').onsubmit = signIn; $('sign-out').onclick = signOut; }
  if (linked) try { await startSession('Bearer ' + linked); }
    catch (err) { showSignIn(err.status === 401 ? 'Signed out: please sign in again' : describe(err)); return; }
  if (signedIn()) { showApp(); start(); } else showSignIn(''); }
function el(tag, text, cls) { const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text; if (cls) e.className = cls; return e; }
function $(id) { return document.getElementById(id); }
// Scripts a page needs only once the user does something are fetched then, so its first load stays
// light: the side panel (viewer.js: a cited passage, a document), a file upload (uploads.js).
const lazy = {};
function later(name, get) { if (!lazy[name]) lazy[name] = new Promise((resolve, reject) => {
  const s = document.createElement('script'); s.src = base + '/static/' + name;
  s.onload = () => resolve(get()); s.onerror = () => { delete lazy[name]; reject(new TypeError(name)); };
  document.head.append(s); }); return lazy[name]; }
function sheet(name) { if (!lazy[name]) lazy[name] = new Promise(resolve => {  // a style sheet, once
  const l = document.createElement('link'); l.rel = 'stylesheet'; l.href = base + '/static/' + name;
  l.onload = l.onerror = resolve; document.head.append(l); }); return lazy[name]; }
function viewer() { return later('viewer.js', () => panel); }
// The workspace chosen in this tab ('' = on the chat page every workspace, elsewhere the personal one).
const WS_KEY = 'ragchat.workspace';
function currentWorkspace() { return sessionStorage.getItem(WS_KEY) || ''; }
function workspaceQuery(sep) { const w = currentWorkspace(); return w ? sep + 'workspace=' + encodeURIComponent(w) : ''; }
function withWorkspace(body) { const w = currentWorkspace(); if (w) body.workspace = w; return body; }
// The caller's workspaces (GET /workspaces, once the page has asked) and their role in the chosen one:
// controls a role cannot use are not shown (a viewer has no Disable/Delete, nothing to add to).
let WORKSPACES = [];
function workspaceOf(id) { return WORKSPACES.find(w => id ? w.id === id : w.personal) || null; }
function roleHere() { const w = workspaceOf(currentWorkspace()); return w ? w.role : 'owner'; }
function canEdit() { return roleHere() !== 'viewer'; }
// The switcher (workspaces.js) only for a user in a shared workspace; with the personal one alone
// there is nothing to choose, and the page does not fetch it (opts.manage: a "New shared workspace"
// button, which fetches it when clicked).
function workspacesScript() { return Promise.all([later('workspaces.js', () => mountSwitcher), sheet('workspaces.css')]); }
function mountWorkspaces(onChange, opts) { return api('/workspaces').then(r => { const items = r.items || [];
  WORKSPACES = items;
  if (items.length < 2) { sessionStorage.removeItem(WS_KEY);
    if (opts && opts.manage && !$('new-workspace')) { const b = el('button', 'New shared workspace', 'btn small');
      b.type = 'button'; b.id = 'new-workspace'; $('app').prepend(b);
      b.onclick = () => workspacesScript().then(() => { b.remove(); return newWorkspaceForm(null); }).catch(err => $('app').prepend(el('p', describe(err), 'error'))); }
    return; }
  return workspacesScript().then(([mount]) => mount(items, onChange, opts)); })
  .catch(err => { if (err.status !== 401) $('app').prepend(el('p', describe(err), 'error')); }); }
// Tabs of this site say "a document was added" to each other (the Documents page shows it at once).
const DOCUMENTS_CHANNEL = 'ragchat.documents';
function announceDocument() { try { const c = new BroadcastChannel(DOCUMENTS_CHANNEL); c.postMessage('added'); c.close(); } catch (err) { /* an old browser */ } }
function hidePanel() { if (lazy['viewer.js']) lazy['viewer.js'].then(p => p.hide(), () => {}); }
for (const a of document.querySelectorAll('a[data-p]')) a.href = base + a.dataset.p;
