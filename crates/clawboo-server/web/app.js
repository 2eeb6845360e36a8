// The Clawboo web board: plain JavaScript over the REST API and the live feed
// (/api/events). Everything that came from an agent is put on the page as text
// (textContent), never as markup.
'use strict';

const VIEWS = ['board', 'room', 'memory', 'approvals', 'audit'];
const STATUS_LABELS = {
  backlog: 'Backlog', todo: 'To do', in_progress: 'In progress', in_review: 'In review',
  blocked: 'Blocked', done: 'Done', cancelled: 'Cancelled',
};

const state = {
  view: 'board',
  team: '',
  teams: [],
  workflow: null,
  tasks: [],
  agents: [],
  openTaskId: null,
  room: '',
  posts: [],
  roomCursor: 0,
  marks: null,
};

// ---------- small helpers ----------

const $ = (id) => document.getElementById(id);

/** An element with attributes (`on*` are listeners) and children (strings become text). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  appendAll(el, children);
  return el;
}

/** Append children (nested arrays flattened; null, undefined and false skipped; strings as text). */
function appendAll(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children, with the same rules as `h`. */
function fill(el, ...children) {
  el.replaceChildren();
  appendAll(el, children);
}

/** A lease's time left, counted down on the page (`lease 12:05`, `lease expired`). */
function leaseLeft(expiresAt) {
  const left = Math.ceil((expiresAt - Date.now()) / 1000);
  if (left <= 0) return 'lease expired';
  const m = Math.floor(left / 60);
  const s = String(left % 60).padStart(2, '0');
  return m >= 60 ? `lease ${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m` : `lease ${m}:${s}`;
}

/** A countdown element the one-second ticker keeps current. */
function countdown(expiresAt) {
  return h('span', { class: 'lease', title: `lease runs out at ${when(expiresAt)}`, dataset: { leaseExpiresAt: expiresAt } },
    leaseLeft(expiresAt));
}

/** Every second: countdowns tick, and an agent whose calls stopped turns silent. */
function tickCountdowns() {
  for (const el of document.querySelectorAll('[data-lease-expires-at]')) {
    el.textContent = leaseLeft(Number(el.dataset.leaseExpiresAt));
  }
  for (const el of document.querySelectorAll('.agent.alive[data-alive-until]')) {
    if (Date.now() >= Number(el.dataset.aliveUntil)) {
      el.className = 'agent silent';
      el.querySelector('.agent-state').textContent = 'silent';
    }
  }
}

function when(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  return d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, options = {}) {
  const init = { ...options, headers: { accept: 'application/json' } };
  if (options.body !== undefined) {
    init.body = JSON.stringify(options.body);
    init.headers['content-type'] = 'application/json';
  }
  const res = await fetch(path, init);
  let body = {};
  try { body = await res.json(); } catch { /* an empty or non-JSON body */ }
  if (res.status === 401) $('gate').hidden = false;
  if (!res.ok) throw new ApiError(res.status, body.error || `${res.status} ${res.statusText}`);
  return body;
}

let toastTimer = null;
function toast(message) {
  const el = $('toast');
  el.textContent = message;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 8000);
}

/** Run an action; show its error instead of throwing. */
async function attempt(action) {
  try { return await action(); } catch (e) { toast(e.message || String(e)); return undefined; }
}

/** Coalesce refreshes: at most one in flight per key, one more queued behind it. */
const refreshers = new Map();
function refresh(key, load) {
  let entry = refreshers.get(key);
  if (!entry) { entry = { running: null, again: false }; refreshers.set(key, entry); }
  if (entry.running) { entry.again = true; return entry.running; }
  entry.running = (async () => {
    do {
      entry.again = false;
      await attempt(load);
    } while (entry.again);
    entry.running = null;
  })();
  return entry.running;
}

// ---------- teams ----------

async function loadTeams() {
  const { teams } = await api('/api/teams');
  state.teams = teams;
  renderTeamPickers();
}

/** Teams named on the board but never registered (agents bound by a signed URL may use
 *  any team id) join the pickers under their id, so their rooms can be opened too. */
function addTeamsSeenOn(tasks) {
  const known = new Set(state.teams.map((t) => t.id));
  const seen = [...new Set(tasks.map((t) => t.teamId).filter((id) => id && !known.has(id)))];
  if (!seen.length) return;
  state.teams = [...state.teams, ...seen.map((id) => ({ id, name: id }))];
  renderTeamPickers();
}

function renderTeamPickers() {
  const teams = state.teams;
  for (const select of [$('team-filter'), $('create-team')]) {
    const keep = select.value;
    fill(select, select.options[0]);
    for (const t of teams) select.append(h('option', { value: t.id }, t.name || t.id));
    select.value = keep;
  }
  const room = $('room-team');
  fill(room, ...teams.map((t) => h('option', { value: t.id }, t.name || t.id)));
  if (!state.room && teams.length) state.room = state.team || teams[0].id;
  room.value = state.room;
}

// ---------- board ----------

function teamName(id) {
  const t = state.teams.find((x) => x.id === id);
  return t ? (t.name || t.id) : id;
}

async function loadBoard() {
  const params = new URLSearchParams();
  if (state.team) params.set('teamId', state.team);
  if ($('show-dropped').checked) params.set('includeDropped', 'true');
  // The board comes a page at a time; the page shows every task, so fetch until the
  // last page (no nextCursor).
  params.set('limit', '200');
  const tasks = [];
  for (;;) {
    const page = await api(`/api/board?${params}`);
    tasks.push(...page.tasks);
    if (!page.nextCursor) break;
    params.set('cursor', page.nextCursor);
  }
  const agentParams = new URLSearchParams();
  if (state.team) agentParams.set('teamId', state.team);
  const { agents } = await api(`/api/agents?${agentParams}`);
  state.tasks = tasks;
  state.agents = agents;
  addTeamsSeenOn(tasks);
  renderBoard();
  renderAgents();
  if (state.openTaskId && $('task-dialog').open) await loadDetail(state.openTaskId);
}

function renderBoard() {
  const byId = new Map(state.tasks.map((t) => [t.id, t]));
  const children = new Map();
  for (const t of state.tasks) {
    if (t.parentTaskId) children.set(t.parentTaskId, (children.get(t.parentTaskId) || 0) + 1);
  }
  const statuses = state.workflow ? state.workflow.statuses : Object.keys(STATUS_LABELS);
  const columns = statuses.map((status) => {
    const tasks = state.tasks.filter((t) => t.status === status);
    return h('section', { class: 'column', dataset: { status }, 'aria-label': STATUS_LABELS[status] },
      h('h3', {}, STATUS_LABELS[status] || status, ' ', h('span', { class: 'count' }, tasks.length)),
      h('ol', { class: 'cards' }, tasks.map((t) => h('li', {}, card(t, byId, children.get(t.id) || 0)))));
  });
  fill($('columns'), ...columns);
}

/** Who works here: alive (calls are coming) or silent, and what each holds. */
function renderAgents() {
  const items = state.agents.map((a) => h('li', {
    class: `agent ${a.alive ? 'alive' : 'silent'}`, dataset: { agentId: a.id, aliveUntil: a.aliveUntil },
  },
  h('span', { class: 'agent-name' }, a.name),
  h('span', { class: 'agent-state', title: a.lastSeenAt ? `last call ${when(a.lastSeenAt)}` : 'no call seen' },
    a.alive ? 'alive' : 'silent'),
  a.runtime ? h('span', { class: 'muted' }, a.runtime) : null,
  h('ul', { class: 'held', 'aria-label': `held by ${a.name}` }, a.held.map((t) => h('li', {},
    taskLink(t.id), t.leaseExpiresAt ? countdown(t.leaseExpiresAt) : null)))));
  fill($('agent-list'), items.length ? items : h('li', { class: 'muted' }, 'No agent has called yet.'));
}

function card(task, byId, childCount) {
  const waiting = task.dependsOn.filter((id) => byId.get(id)?.status !== 'done').length;
  const markers = [
    h('span', { class: 'pill', title: 'priority' }, `P${task.priority}`),
    task.assigneeAgentId
      ? h('span', { class: 'assignee', title: 'assignee' }, `@${task.assigneeAgentId}`)
      : h('span', { class: 'muted' }, 'unassigned'),
    task.dependsOn.length ? h('span', {
      class: waiting ? 'marker waiting' : 'marker',
      title: `depends on ${task.dependsOn.length} task(s), ${waiting} not done`,
    }, `deps ${task.dependsOn.length}${waiting ? ` (${waiting} open)` : ''}`) : null,
    task.parentTaskId ? h('span', { class: 'marker', title: 'a sub-task' }, '↳ sub-task') : null,
    childCount ? h('span', { class: 'marker', title: `${childCount} sub-task(s)` }, `▣ ${childCount}`) : null,
    task.teamId && !state.team ? h('span', { class: 'muted' }, teamName(task.teamId)) : null,
    task.dropped ? h('span', { class: 'marker waiting' }, 'dropped') : null,
    task.leaseExpiresAt ? countdown(task.leaseExpiresAt) : null,
    task.reclaimedAt && !task.assigneeAgentId ? h('span', {
      class: 'marker reclaimed', title: `${task.reclaimedFrom}'s lease ran out at ${when(task.reclaimedAt)}`,
    }, `reclaimed from @${task.reclaimedFrom}`) : null,
  ];
  return h('button', {
    type: 'button', class: 'card', dataset: { taskId: task.id },
    onclick: () => openTask(task.id),
  }, h('span', { class: 'card-title' }, task.title), h('span', { class: 'card-meta' }, markers));
}

async function openTask(id) {
  state.openTaskId = id;
  $('comment-text').value = '';
  await attempt(() => loadDetail(id));
  const dialog = $('task-dialog');
  if (!dialog.open) dialog.showModal();
}

function taskLink(id) {
  const t = state.tasks.find((x) => x.id === id);
  return h('button', { type: 'button', class: 'link', onclick: () => openTask(id) },
    t ? t.title : id, t ? h('span', { class: 'pill' }, STATUS_LABELS[t.status] || t.status) : null);
}

async function loadDetail(id) {
  const { task, comments, ancestors } = await api(`/api/board/${encodeURIComponent(id)}`);
  $('task-dialog-title').textContent = task.title;
  const moves = (state.workflow?.transitions[task.status] || []).map((to) =>
    h('button', { type: 'button', dataset: { move: to }, onclick: () => moveTask(task.id, to) },
      `Move to ${STATUS_LABELS[to] || to}`));
  const subtasks = state.tasks.filter((t) => t.parentTaskId === task.id);
  const candidates = state.tasks.filter((t) => t.id !== task.id && !task.dependsOn.includes(t.id));
  fill($('task-detail'), 
    h('p', { class: 'card-meta' },
      h('span', { class: 'pill status', dataset: { status: task.status } }, STATUS_LABELS[task.status] || task.status),
      h('span', { class: 'pill' }, `P${task.priority}`),
      task.assigneeAgentId ? h('span', { class: 'assignee' }, `@${task.assigneeAgentId}`) : h('span', { class: 'muted' }, 'unassigned'),
      task.teamId ? h('span', { class: 'muted' }, `team ${teamName(task.teamId)}`) : null,
      h('span', { class: 'muted' }, `updated ${when(task.updatedAt)}`)),
    ancestors.length ? h('nav', { class: 'crumbs', 'aria-label': 'Ancestors' },
      ancestors.map((a) => [taskLink(a.id), ' › '])) : null,
    h('div', { class: 'description' }, task.description || h('span', { class: 'muted' }, 'No description.')),
    h('div', { class: 'moves', role: 'group', 'aria-label': 'Change status' },
      moves.length ? moves : h('span', { class: 'muted' }, 'A finished task does not move.')),
    // Moving a task nobody holds into progress claims it: for whom?
    !task.assigneeAgentId && moves.some((b) => b.dataset.move === 'in_progress')
      ? h('label', { class: 'row' }, 'Assignee (for In progress) ',
        h('input', { id: 'move-assignee', placeholder: 'agent id', autocomplete: 'off' }))
      : null,
    h('h3', {}, 'Dependencies'),
    task.dependsOn.length ? h('ul', { class: 'links' }, task.dependsOn.map((d) => h('li', {}, taskLink(d))))
      : h('p', { class: 'muted' }, 'None.'),
    candidates.length ? h('form', {
      class: 'row',
      onsubmit: (e) => { e.preventDefault(); addDependency(task.id, e.target.elements.dep.value); },
    }, h('label', {}, 'Depends on ', h('select', { name: 'dep' },
      candidates.map((c) => h('option', { value: c.id }, c.title)))),
    h('button', { type: 'submit' }, 'Add dependency')) : null,
    subtasks.length ? [h('h3', {}, 'Sub-tasks'),
      h('ul', { class: 'links' }, subtasks.map((s) => h('li', {}, taskLink(s.id))))] : null,
    h('h3', {}, `Comments (${comments.length})`),
    h('ol', { class: 'comments' }, comments.map((c) => h('li', {},
      h('div', { class: 'comment-head' }, c.authorAgentId || c.authorType, ' · ', when(c.createdAt)),
      h('div', { class: 'comment-body' }, c.body)))),
  );
}

async function moveTask(id, to) {
  await attempt(async () => {
    const body = { status: to };
    const assignee = $('move-assignee')?.value.trim();
    if (to === 'in_progress' && assignee) body.assigneeAgentId = assignee;
    await api(`/api/board/${encodeURIComponent(id)}`, { method: 'PATCH', body });
    await loadBoard();
  });
}

async function addDependency(id, dependsOn) {
  await attempt(async () => {
    await api(`/api/board/${encodeURIComponent(id)}/deps`, { method: 'POST', body: { dependsOnTaskId: dependsOn } });
    await loadBoard();
  });
}

// ---------- team room ----------

async function loadRoom(reset) {
  if (!state.room) {
    fill($('posts'), h('li', { class: 'muted' }, 'No team yet: rooms belong to teams.'));
    return;
  }
  if (reset) { state.posts = []; state.roomCursor = 0; }
  const room = state.room;
  // Read forward from the cursor, a page at a time, so long histories arrive in order.
  for (let page = 0; page < 20; page += 1) {
    const params = new URLSearchParams({ teamId: room, sinceSeq: String(state.roomCursor), limit: '500' });
    const { posts, nextSeq } = await api(`/api/team-chat?${params}`);
    if (room !== state.room) return;
    state.posts.push(...posts);
    state.roomCursor = nextSeq;
    if (posts.length < 500) break;
  }
  state.posts = state.posts.slice(-500);
  renderRoom();
}

function renderRoom() {
  const items = state.posts.map((p) => {
    const fromOperator = p.kind === 'user';
    return h('li', { class: fromOperator ? 'post operator' : 'post evidence', dataset: { seq: p.seq } },
      h('div', { class: 'post-head' },
        fromOperator ? h('span', { class: 'pill' }, 'operator')
          : h('span', { class: 'pill evidence-tag' }, p.kind === 'system' ? 'system' : 'untrusted evidence'),
        ' ', h('strong', {}, p.authorAgentId), ' · #', p.seq, ' · ', when(p.createdAt)),
      h('blockquote', { class: 'post-body' }, p.body));
  });
  fill($('posts'), ...(items.length ? items : [h('li', { class: 'muted' }, 'No posts yet.')]));
}

// ---------- memory ----------

async function loadMemory() {
  const params = new URLSearchParams({ limit: '25' });
  const query = $('memory-query').value.trim();
  const mode = $('memory-mode').value;
  if (query) params.set('query', query);
  if (mode) params.set('mode', mode);
  if (state.team) params.set('teamId', state.team);
  const body = await api(`/api/memory?${params}`);
  const hits = body.results
    ? body.results.map((r) => ({ fact: r.fact, note: `score ${Number(r.score).toFixed(3)} · matched by ${r.matchedVia === 'both' ? 'full text + vector' : r.matchedVia}` }))
    : body.facts.map((fact) => ({ fact, note: when(fact.createdAt) }));
  $('memory-summary').textContent = body.results
    ? `${hits.length} result(s) for “${query}” (${body.mode})` : 'Newest facts';
  fill($('facts'), ...hits.map(({ fact, note }) => h('li', { class: 'item' },
    h('div', { class: 'item-head' }, h('strong', {}, fact.title), ' ', h('span', { class: 'muted' }, note)),
    h('div', { class: 'item-body' }, fact.content),
    h('div', { class: 'card-meta' }, fact.tags.map((t) => h('span', { class: 'pill' }, t)),
      fact.teamId ? h('span', { class: 'muted' }, `team ${teamName(fact.teamId)}`) : h('span', { class: 'muted' }, 'global')))));
  if (!hits.length) $('facts').append(h('li', { class: 'muted' }, 'Nothing found.'));
  await loadProcedures();
}

async function loadProcedures() {
  const params = new URLSearchParams();
  if (state.team) params.set('teamId', state.team);
  const { procedures } = await api(`/api/memory/procedures?${params}`);
  // A live refresh re-renders the list: procedures the operator had opened stay open (the
  // `toggle` their `open` fires loads their versions again).
  const opened = new Set([...$('procedures').querySelectorAll('details[open]')].map((d) => d.dataset.name));
  fill($('procedures'), ...procedures.map((p) => h('li', { class: 'item' },
    h('details', {
      dataset: { name: p.name },
      ontoggle: (e) => { if (e.target.open) showVersions(p.name, e.target); },
      open: opened.has(p.name),
    },
      h('summary', {}, h('strong', {}, p.name), ` v${p.version}`, ' ', h('span', { class: 'muted' }, when(p.createdAt))),
      h('div', { class: 'versions' }, h('pre', {}, p.content))))));
  if (!procedures.length) $('procedures').append(h('li', { class: 'muted' }, 'No procedures saved yet.'));
}

async function showVersions(name, details) {
  await attempt(async () => {
    const params = new URLSearchParams({ name });
    if (state.team) params.set('teamId', state.team);
    const { procedures } = await api(`/api/memory/procedures?${params}`);
    const newestFirst = [...procedures].sort((a, b) => b.version - a.version);
    fill(details.querySelector('.versions'), ...newestFirst.map((v) => h('section', { class: 'version' },
      h('h4', {}, `version ${v.version} · ${when(v.createdAt)}`), h('pre', {}, v.content))));
  });
}

// ---------- approvals ----------

function prettyArgs(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

async function loadApprovals() {
  const { approvals } = await api('/api/tools/approvals');
  fill($('approvals'), ...approvals.map((a) => h('li', { class: 'item approval', dataset: { approvalId: a.id } },
    h('div', { class: 'item-head' }, h('strong', {}, a.toolName), ' ',
      h('span', { class: `pill risk-${a.risk}` }, a.risk), ' ',
      h('span', { class: 'muted' }, `${a.agentId ? `@${a.agentId}` : 'unbound agent'}${a.teamId ? ` · team ${teamName(a.teamId)}` : ''} · asked ${when(a.createdAt)} · expires ${when(a.expiresAt)}`)),
    h('p', {}, a.message),
    h('pre', { class: 'args', 'aria-label': 'arguments (scrubbed)' }, prettyArgs(a.argsJson)),
    h('div', { class: 'row', role: 'group', 'aria-label': `Answer ${a.toolName}` },
      h('button', { type: 'button', class: 'primary', onclick: () => decide(a.id, 'allow_once') }, 'Allow once'),
      h('button', { type: 'button', onclick: () => decide(a.id, 'allow_always') }, 'Allow always'),
      h('button', { type: 'button', class: 'danger', onclick: () => decide(a.id, 'deny') }, 'Deny')))));
  if (!approvals.length) $('approvals').append(h('li', { class: 'muted' }, 'Nothing is waiting for you.'));
  setBadge(approvals.length);
}

async function decide(id, decision) {
  await attempt(async () => {
    await api(`/api/tools/approvals/${encodeURIComponent(id)}/resolve`, { method: 'POST', body: { decision } });
    await loadApprovals();
  });
}

function setBadge(count) {
  const badge = $('approvals-badge');
  badge.textContent = String(count);
  badge.hidden = !count;
  badge.setAttribute('aria-label', `${count} pending`);
}

// ---------- audit ----------

async function loadAudit() {
  const params = new URLSearchParams({ limit: '200' });
  const tool = $('audit-tool').value.trim();
  if (tool) params.set('toolName', tool);
  const { audit } = await api(`/api/tools/audit?${params}`);
  fill($('audit').tBodies[0], ...audit.map((r) => h('tr', { class: r.decision === 'deny' || r.isError ? 'bad' : '' },
    h('td', {}, when(r.createdAt)), h('td', {}, r.toolName), h('td', {}, r.phase),
    h('td', {}, r.decision), h('td', {}, r.agentId || ''), h('td', {}, r.teamId ? teamName(r.teamId) : ''),
    h('td', {}, [r.reason, ...(r.observations || [])].filter(Boolean).join(', ')),
    h('td', {}, h('code', { class: 'clip' }, r.phase === 'after' ? (r.resultText || '') : (r.argsJson || ''))))));
  if (!audit.length) {
    $('audit').tBodies[0].append(h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No tool calls yet.')));
  }
}

async function loadToolNames() {
  const { tools } = await api('/api/tools');
  fill($('audit-tools'), ...tools.map((t) => h('option', { value: t.name })));
}

// ---------- views and live updates ----------

const loaders = {
  board: () => refresh('board', loadBoard),
  room: () => refresh('room', () => loadRoom(false)),
  memory: () => refresh('memory', loadMemory),
  approvals: () => refresh('approvals', loadApprovals),
  audit: () => refresh('audit', loadAudit),
};

/** Which views show which areas of the live marks. */
const AREA_VIEWS = { board: 'board', chat: 'room', memory: 'memory', approvals: 'approvals', audit: 'audit' };

function showView(view) {
  state.view = VIEWS.includes(view) ? view : 'board';
  for (const v of VIEWS) $(`view-${v}`).hidden = v !== state.view;
  for (const a of document.querySelectorAll('.tabs a')) {
    if (a.dataset.view === state.view) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  loaders[state.view]();
}

function connectLive() {
  const live = $('live');
  const source = new EventSource('/api/events');
  source.addEventListener('open', () => { live.textContent = 'live'; live.className = 'live on'; });
  source.addEventListener('error', () => { live.textContent = 'reconnecting…'; live.className = 'live off'; });
  source.addEventListener('marks', (event) => {
    const marks = JSON.parse(event.data);
    const before = state.marks;
    state.marks = marks;
    setBadge(marks.pendingApprovals);
    if (!before) return;
    for (const [area, view] of Object.entries(AREA_VIEWS)) {
      if (marks[area] !== before[area] && state.view === view) loaders[view]();
    }
    if (marks.board !== before.board && $('task-dialog').open && state.view !== 'board') loaders.board();
  });
}

function wire() {
  window.addEventListener('hashchange', () => showView(location.hash.slice(1)));
  $('team-filter').addEventListener('change', (e) => {
    state.team = e.target.value;
    if (state.team) { state.room = state.team; $('room-team').value = state.team; loadRoom(true); }
    loaders[state.view]();
  });
  $('show-dropped').addEventListener('change', () => loaders.board());
  $('room-team').addEventListener('change', (e) => { state.room = e.target.value; refresh('room', () => loadRoom(true)); });
  $('post-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = $('post-text').value;
    if (!text.trim() || !state.room) return;
    await attempt(async () => {
      await api('/api/team-chat', { method: 'POST', body: { teamId: state.room, text } });
      $('post-text').value = '';
      await loaders.room();
    });
  });
  $('memory-form').addEventListener('submit', (e) => { e.preventDefault(); loaders.memory(); });
  $('memory-mode').addEventListener('change', () => loaders.memory());
  $('audit-tool').addEventListener('change', () => loaders.audit());
  $('new-task-button').addEventListener('click', () => {
    $('create-form').reset();
    $('create-team').value = state.team;
    $('create-dialog').showModal();
  });
  $('create-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    await attempt(async () => {
      const body = {
        title: $('create-name').value,
        status: $('create-status').value,
        priority: Number($('create-priority').value || 0),
      };
      const description = $('create-description').value.trim();
      if (description) body.description = description;
      if ($('create-team').value) body.teamId = $('create-team').value;
      await api('/api/board', { method: 'POST', body });
      $('create-dialog').close();
      await loadBoard();
    });
  });
  $('comment-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const id = state.openTaskId;
    const body = $('comment-text').value;
    if (!id || !body.trim()) return;
    await attempt(async () => {
      await api(`/api/board/${encodeURIComponent(id)}/comments`, { method: 'POST', body: { body, authorType: 'user' } });
      $('comment-text').value = '';
      await loadDetail(id);
    });
  });
  for (const button of document.querySelectorAll('[data-close]')) {
    button.addEventListener('click', () => button.closest('dialog').close());
  }
  $('task-dialog').addEventListener('close', () => { state.openTaskId = null; });
}

// ---------- operations strip ----------

const OPS_EVERY_MS = 2000;
let opsLast = null;

/** Read /api/ops and show calls a second (from the change since the last read), this
 * server's tool-errors so far, approvals waiting and leases lapsing within a minute. */
async function loadOps() {
  let ops;
  try { ops = await api('/api/ops'); } catch { return; }
  const at = performance.now();
  if (opsLast) {
    const perSecond = Math.max(0, ops.calls - opsLast.calls) / ((at - opsLast.at) / 1000);
    $('ops-rate').textContent = perSecond.toFixed(1);
  }
  opsLast = { at, calls: ops.calls };
  const show = (id, value) => {
    $(id).textContent = String(value);
    $(id).classList.toggle('warn', value > 0);
  };
  show('ops-errors', ops.errors);
  show('ops-approvals', ops.approvalsPending);
  show('ops-lapsing', ops.leasesExpiring);
}

function startOpsStrip() {
  loadOps();
  setInterval(loadOps, OPS_EVERY_MS);
}

async function start() {
  wire();
  await attempt(async () => {
    state.workflow = await api('/api/board/workflow');
    await loadTeams();
  });
  showView(location.hash.slice(1) || 'board');
  connectLive();
  setInterval(tickCountdowns, 1000);
  attempt(loadToolNames);
  startOpsStrip();
}

start();
