// The Clawboo web board: plain JavaScript over the REST API and the live feed
// (/api/events). Everything that came from an agent is put on the page as text
// (textContent), never as markup, except the HTML the server rendered from markdown and
// sanitized (descriptions, comments and posts: `richText`).
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
  /** The open task's short id (`RED-12`), its address. */
  openShortId: null,
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
  afterBoardRender();
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
    task.shortId ? h('span', { class: 'short-id', title: 'short id' }, task.shortId) : null,
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
    pathsMarker(task),
    task.reclaimedAt && !task.assigneeAgentId ? h('span', {
      class: 'marker reclaimed', title: `${task.reclaimedFrom}'s lease ran out at ${when(task.reclaimedAt)}`,
    }, `reclaimed from @${task.reclaimedFrom}`) : null,
  ];
  return h('button', {
    type: 'button', class: 'card', dataset: { taskId: task.id },
    onclick: () => openTask(task.id),
  }, h('span', { class: 'card-title' }, task.title), h('span', { class: 'card-meta' }, markers));
}

/** Open the task `ref` names: its id, or its short id (`RED-12`, what its address shows). */
async function openTask(ref) {
  const known = state.tasks.find((t) => t.id === ref || t.shortId === ref);
  state.openTaskId = known ? known.id : ref;
  state.openShortId = known?.shortId || null;
  setAddress(`task/${state.openShortId || ref}`);
  $('comment-text').value = '';
  const loaded = await attempt(async () => { await loadDetail(state.openTaskId); return true; });
  if (!loaded) {
    // No such task (a mistyped short id, another board's link): the toast says so.
    if ($('task-dialog').open) $('task-dialog').close();
    state.openTaskId = null;
    state.openShortId = null;
    setAddress('board', true);
    return;
  }
  const dialog = $('task-dialog');
  if (!dialog.open) dialog.showModal();
}

function taskLink(id) {
  const t = state.tasks.find((x) => x.id === id);
  return h('button', { type: 'button', class: 'link', onclick: () => openTask(id) },
    t ? t.title : id, t ? h('span', { class: 'pill' }, STATUS_LABELS[t.status] || t.status) : null);
}

async function loadDetail(id) {
  const { task, comments, ancestors, links } = await api(`/api/board/${encodeURIComponent(id)}`);
  // A late answer for a task no longer open (another was opened meanwhile) draws nothing.
  if (state.openTaskId !== id) return;
  // A pasted `#task/RED-12` is known by its id from now on, and shows its short id.
  state.openTaskId = task.id;
  state.openShortId = task.shortId || null;
  if (task.shortId && parseAddress(location.hash).view === 'task') setAddress(`task/${task.shortId}`, true);
  fill($('task-dialog-title'),
    task.shortId ? h('span', { class: 'short-id', title: 'short id' }, task.shortId) : null, task.title);
  const moves = (state.workflow?.transitions[task.status] || []).map((to) =>
    h('button', { type: 'button', dataset: { move: to }, onclick: () => safeMove(task, to) },
      `Move to ${STATUS_LABELS[to] || to}`));
  const subtasks = state.tasks.filter((t) => t.parentTaskId === task.id);
  fill($('task-detail'), 
    h('p', { class: 'card-meta' },
      h('span', { class: 'pill status', dataset: { status: task.status } }, STATUS_LABELS[task.status] || task.status),
      h('span', { class: 'pill' }, `P${task.priority}`),
      task.assigneeAgentId ? h('span', { class: 'assignee' }, `@${task.assigneeAgentId}`) : h('span', { class: 'muted' }, 'unassigned'),
      task.teamId ? h('span', { class: 'muted' }, `team ${teamName(task.teamId)}`) : null,
      h('span', { class: 'muted' }, 'updated ', timeEl(task.updatedAt))),
    ancestors.length ? h('nav', { class: 'crumbs', 'aria-label': 'Ancestors' },
      ancestors.map((a) => [taskLink(a.id), ' › '])) : null,
    task.description ? richText('description', task.descriptionHtml, task.description)
      : h('div', { class: 'description' }, h('span', { class: 'muted' }, 'No description.')),
    editForm(task),
    pathsSection(task),
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
    depPicker(task, ancestors),
    subtasks.length ? [h('h3', {}, 'Sub-tasks'),
      h('ul', { class: 'links' }, subtasks.map((s) => h('li', {}, taskLink(s.id))))] : null,
    h('h3', {}, `Comments (${comments.length})`),
    h('ol', { class: 'comments' }, comments.map((c) => h('li', {},
      h('div', { class: 'comment-head' }, commentHead(c)),
      richText('comment-body', c.bodyHtml, c.body)))),
    linksSection(links || []),
  );
}

// Path reservations and links (SPEC §19).

/** Whether a task's paths are reserved now: claimed in progress under a live lease. */
function reserving(task) {
  return task.status === 'in_progress' && task.assigneeAgentId
    && (!task.leaseExpiresAt || task.leaseExpiresAt > Date.now());
}

/** A card's marker of the paths its task works on (reserved or only declared). */
function pathsMarker(task) {
  if (!task.paths?.length) return null;
  const held = reserving(task);
  return h('span', {
    class: held ? 'marker reserved' : 'marker',
    title: `${held ? `reserved by @${task.assigneeAgentId}` : 'declared'}: ${task.paths.join(', ')}`,
  }, `${held ? 'reserves' : 'paths'} ${task.paths.length === 1 ? task.paths[0] : `${task.paths.length} globs`}`);
}

/** The task view's paths: reserved by the holder while claimed, else declared. */
function pathsSection(task) {
  if (!task.paths?.length) return null;
  const held = reserving(task);
  return [
    h('h3', {}, held ? `Reserved paths (@${task.assigneeAgentId})` : 'Paths'),
    h('ul', { class: 'paths', 'aria-label': held ? 'Reserved paths' : 'Declared paths' },
      task.paths.map((p) => h('li', {}, h('code', {}, p)))),
  ];
}

const LINK_KINDS = { fact: 'memory', post: 'chat', audit: 'tool call' };

/** The task view's links: the newest facts, posts and tool calls about the task. */
function linksSection(links) {
  return [
    h('h3', {}, `Links (${links.length})`),
    links.length ? h('ol', { class: 'task-links', 'aria-label': 'Links' }, links.map((l) => h('li', {
      dataset: { kind: l.kind }, title: `${l.kind} ${l.id}`,
    }, h('span', { class: 'pill' }, LINK_KINDS[l.kind] || l.kind), ' ', l.line, ' ',
    h('span', { class: 'muted' }, when(l.createdAt)))))
      : h('p', { class: 'muted' }, 'No fact, post or tool call names this task yet.'),
  ];
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
    const fromServer = p.kind === 'system';
    return h('li', { class: fromOperator ? 'post operator' : fromServer ? 'post system' : 'post evidence', dataset: { seq: p.seq } },
      h('div', { class: 'post-head' },
        fromOperator ? h('span', { class: 'pill' }, 'operator')
          : fromServer ? h('span', { class: 'pill' }, 'system')
            : h('span', { class: 'pill evidence-tag' }, 'untrusted evidence'),
        ' ', h('strong', {}, p.authorAgentId), ' · #', p.seq, ' · ', timeEl(p.createdAt)),
      richText('post-body', p.bodyHtml, p.body, 'blockquote'));
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
  fill($('facts'), ...hits.map(({ fact, note }) => h('li', { class: 'item', dataset: { factId: fact.id } },
    h('div', { class: 'item-head' }, h('strong', {}, fact.title), ' ', h('span', { class: 'muted' }, note)),
    h('div', { class: 'item-body' }, fact.content),
    h('div', { class: 'card-meta' }, fact.tags.map((t) => h('span', { class: 'pill' }, t)),
      fact.teamId ? h('span', { class: 'muted' }, `team ${teamName(fact.teamId)}`) : h('span', { class: 'muted' }, 'global'),
      h('button', { type: 'button', class: 'danger retire', onclick: () => retireFact(fact) }, 'Retire…')))));
  if (!hits.length) $('facts').append(h('li', { class: 'muted' }, 'Nothing found.'));
  await loadProcedures();
}

/** Retire `fact` once the operator confirms and says why (a retirement is final). */
async function retireFact(fact) {
  const dialog = $('retire-dialog');
  $('retire-fact').textContent = `“${fact.title}”`;
  $('retire-reason').value = '';
  dialog.returnValue = '';
  dialog.showModal();
  $('retire-reason').focus();
  const ok = await new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
  });
  if (!ok) return;
  await attempt(async () => {
    await api(`/api/memory/facts/${encodeURIComponent(fact.id)}/retire`, {
      method: 'POST', body: { reason: $('retire-reason').value },
    });
    toast(`Retired “${fact.title}”.`);
    await loadMemory();
  });
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
  const [{ approvals: all }, { agents }] = await Promise.all([api('/api/tools/approvals'), api('/api/agents')]);
  waiting.approvals = all;
  showWaiting();
  const holders = new Map(agents.map((a) => [a.id, a.held]));
  const approvals = all.filter((a) => !state.team || a.teamId === state.team);
  fill($('approvals'), ...approvals.map((a) => approvalItem(a, holders.get(a.agentId) || [])));
  if (!approvals.length) {
    $('approvals').append(h('li', { class: 'muted' }, all.length
      ? `Nothing is waiting for you in this team (${all.length} in other teams).` : 'Nothing is waiting for you.'));
  }
}

/** One waiting call: what it wants, who asks and what they hold, how long it waits, and
 *  the answers (for a destructive tool Deny is the filled button, not Allow). */
function approvalItem(a, held) {
  const destructive = a.risk === 'destructive';
  return h('li', { class: 'item approval', dataset: { approvalId: a.id } },
    h('div', { class: 'item-head' }, h('strong', {}, a.toolName), ' ',
      h('span', { class: `pill risk-${a.risk}` }, a.risk), ' ',
      h('span', { class: 'muted' }, `${a.agentId ? `@${a.agentId}` : 'unbound agent'}${a.teamId ? ` · team ${teamName(a.teamId)}` : ''} · asked `,
        timeEl(a.createdAt), ' · '), expiryEl(a.expiresAt)),
    h('p', {}, a.message),
    held.length ? h('p', { class: 'held-by' }, `@${a.agentId} holds `, held.map((t, i) => [i ? ', ' : '',
      h('button', { type: 'button', class: 'link', onclick: () => openTask(t.id) }, t.title)])) : null,
    h('pre', { class: 'args', 'aria-label': 'arguments (scrubbed)' }, prettyArgs(a.argsJson)),
    h('div', { class: 'row answers', role: 'group', 'aria-label': `Answer ${a.toolName}` },
      h('button', { type: 'button', class: destructive ? null : 'primary', onclick: () => decide(a.id, 'allow_once') }, 'Allow once'),
      h('button', { type: 'button', onclick: () => confirmAllowAlways(a) }, 'Allow always…'),
      h('button', { type: 'button', class: destructive ? 'danger filled' : 'danger', onclick: () => decide(a.id, 'deny') }, 'Deny')));
}

/** "Allow always" stops every later ask for this tool and caller: say so before sending it. */
async function confirmAllowAlways(a) {
  const who = a.agentId ? `@${a.agentId}` : 'this caller';
  const ok = await askConfirm({
    title: `Always allow ${a.toolName}?`,
    lines: [`From now on ${who}'s ${a.toolName} calls run without asking you.`,
      a.risk === 'destructive' ? `${a.toolName} is destructive: what it removes does not come back.` : null],
    ok: 'Allow always',
    danger: true,
  });
  if (ok) await decide(a.id, 'allow_always');
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
  const activityParams = new URLSearchParams({ limit: '200' });
  if (state.team) activityParams.set('teamId', state.team);
  const [{ audit }, { approvals }, { activity }] = await Promise.all([api(`/api/tools/audit?${params}`),
    api('/api/tools/approvals'), api(`/api/board/activity?${activityParams}`)]);
  const calls = auditCalls(audit, approvals.filter((a) => !tool || a.toolName === tool))
    .filter((c) => !state.team || c.teamId === state.team);
  // The operator's own moves, edits and comments sit beside the calls (not under a tool
  // filter: they are no tool's).
  const rows = [...calls, ...(tool ? [] : activity.map((a) => ({ ...a, operatorActivity: true })))]
    .sort((x, y) => y.createdAt - x.createdAt);
  fill($('audit').tBodies[0], ...rows.map((c) => c.operatorActivity ? activityRow(c) : h('tr', {
    class: c.decision === 'deny' || c.isError ? 'bad' : c.decision === 'waiting' ? 'waiting' : '', dataset: { callId: c.callId },
  },
  h('td', {}, timeEl(c.createdAt)), h('td', {}, c.toolName),
  h('td', {}, c.decision === 'waiting' ? 'waiting for you' : c.decision || '', c.isError ? ' · failed' : ''),
  h('td', {}, decidedByLabel(c.decidedBy)),
  h('td', {}, c.agentId || ''), h('td', {}, c.teamId ? teamName(c.teamId) : ''),
  h('td', {}, [c.reason, ...(c.observations || [])].filter(Boolean).join(', ')),
  h('td', {}, h('code', { class: 'clip' }, c.argsJson || ''),
    c.resultText ? h('code', { class: 'clip result' }, `→ ${c.resultText}`) : null))));
  if (!rows.length) {
    $('audit').tBodies[0].append(h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No tool calls yet.')));
  }
}

/** One thing the operator did to a task: who, what, when and which task (a link to it). */
function activityRow(a) {
  return h('tr', { class: 'operator-activity', dataset: { activityId: a.id } },
    h('td', {}, timeEl(a.createdAt)), h('td', {}, `task ${a.action}`), h('td', {}, a.detail),
    h('td', {}, decidedByLabel(a.actor)), h('td', {}, ''), h('td', {}, a.teamId ? teamName(a.teamId) : ''),
    h('td', {}, h('button', { type: 'button', class: 'link', onclick: () => openTask(a.taskId) }, a.taskTitle)),
    h('td', {}, ''));
}

/** The audit's two rows of a call (its decision and its result) as one, newest first, with
 *  the calls still waiting for a human (no audit row yet) from the pending approvals. */
function auditCalls(rows, pending) {
  const calls = new Map();
  for (const r of rows) {
    let c = calls.get(r.callId);
    if (!c) {
      c = { callId: r.callId, toolName: r.toolName, agentId: r.agentId, teamId: r.teamId, createdAt: r.createdAt };
      calls.set(r.callId, c);
    }
    if (r.phase === 'before') {
      Object.assign(c, { decision: r.decision, reason: r.reason, observations: r.observations,
        decidedBy: r.decidedBy, argsJson: r.argsJson, createdAt: r.createdAt });
    } else {
      Object.assign(c, { resultText: r.resultText, isError: r.isError });
    }
  }
  const waitingCalls = pending.filter((a) => !calls.has(a.callId)).map((a) => ({
    callId: a.callId, toolName: a.toolName, agentId: a.agentId, teamId: a.teamId, createdAt: a.createdAt,
    decision: 'waiting', reason: a.message, argsJson: a.argsJson,
  }));
  return [...waitingCalls, ...calls.values()].sort((x, y) => y.createdAt - x.createdAt);
}

/** Who decided a call, in the operator's words. */
function decidedByLabel(by) {
  const labels = {
    policy: 'policy', allow_always: 'remembered grant', api: 'operator', web: 'operator', cli: 'operator (CLI)',
    elicitation: "the agent's user", expired: 'nobody (expired)',
  };
  return by ? (labels[by] || by) : '';
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
    if (!before || marks.approvals !== before.approvals || marks.pendingApprovals !== before.pendingApprovals) {
      refresh('waiting', loadWaiting);
    }
    if (!before) return;
    for (const [area, view] of Object.entries(AREA_VIEWS)) {
      if (marks[area] !== before[area] && state.view === view) loaders[view]();
    }
    if (marks.board !== before.board && $('task-dialog').open && state.view !== 'board') loaders.board();
  });
}

function wire() {
  window.addEventListener('hashchange', () => route());
  $('team-filter').addEventListener('change', (e) => {
    state.team = e.target.value;
    setAddress(currentPath(), true);
    if (state.team) { state.room = state.team; $('room-team').value = state.team; loadRoom(true); }
    loaders[state.view]();
  });
  $('show-dropped').addEventListener('change', () => loaders.board());
  $('room-team').addEventListener('change', (e) => { state.room = e.target.value; setAddress(`room/${state.room}`); refresh('room', () => loadRoom(true)); });
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
  $('memory-form').addEventListener('submit', (e) => { e.preventDefault(); setAddress(memoryPath()); loaders.memory(); });
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
  $('task-dialog').addEventListener('close', () => {
    state.openTaskId = null;
    state.openShortId = null;
    leaveTaskAddress();
  });
}

// ---------- approvals everywhere (issue 46) ----------

const BASE_TITLE = document.title;

/** The calls waiting for a human, whichever view is open. */
const waiting = { approvals: [] };

async function loadWaiting() {
  const { approvals } = await api('/api/tools/approvals');
  waiting.approvals = approvals;
  showWaiting();
}

/** The count in the page title, the banner, the badge and the "waiting for you" marks. */
function showWaiting() {
  const list = waiting.approvals;
  document.title = list.length ? `(${list.length}) waiting · ${BASE_TITLE}` : BASE_TITLE;
  const banner = $('waiting-banner');
  banner.hidden = !list.length;
  if (list.length) {
    fill(banner, h('strong', {}, list.length === 1 ? '1 call waits for your approval' : `${list.length} calls wait for your approval`),
      ': ', list.slice(0, 3).map((a, i) => [i ? ', ' : '', `${a.toolName} by ${a.agentId ? `@${a.agentId}` : 'an unbound agent'}`]),
      list.length > 3 ? ', …' : '', ' ', h('a', { href: hashFor('approvals') }, 'Answer'));
  } else {
    banner.replaceChildren();
  }
  setBadge(list.length);
  if (state.agents.length) { renderAgents(); tidyAgents(); }
  markWaiting();
}

/** Mark the agents who wait on a human, in the agents panel and on the cards they hold. */
function markWaiting() {
  const agents = new Set(waiting.approvals.map((a) => a.agentId).filter(Boolean));
  for (const el of document.querySelectorAll('.agent[data-agent-id]')) {
    if (!agents.has(el.dataset.agentId)) continue;
    // Its calls stopped because it waits: not silent, and the ticker must not say so.
    el.className = 'agent waiting-you';
    delete el.dataset.aliveUntil;
    el.querySelector('.agent-state').textContent = 'waiting for you';
  }
  const byId = new Map(state.tasks.map((t) => [t.id, t]));
  for (const el of document.querySelectorAll('#columns .card[data-task-id]')) {
    const task = byId.get(el.dataset.taskId);
    const is = Boolean(task && task.assigneeAgentId && agents.has(task.assigneeAgentId));
    el.classList.toggle('waiting-you', is);
    const tag = el.querySelector('.waiting-tag');
    if (is && !tag) el.querySelector('.card-meta').prepend(h('span', { class: 'waiting-tag' }, 'waiting for you'));
    if (!is && tag) tag.remove();
  }
}

/** Time left before a waiting call expires (`expires in 4:32`). */
function expiryLeft(expiresAt) {
  const left = Math.ceil((expiresAt - Date.now()) / 1000);
  if (left <= 0) return 'expired';
  return `expires in ${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')}`;
}

function expiryEl(expiresAt) {
  return h('span', { class: 'expiry', title: `expires at ${when(expiresAt)}`, dataset: { expiresAt } }, expiryLeft(expiresAt));
}

/** A modal question; resolves true when the operator confirms. `lines` are paragraphs. */
function askConfirm({ title, lines, ok, danger }) {
  const dialog = $('confirm-dialog');
  $('confirm-title').textContent = title;
  fill($('confirm-text'), lines.filter(Boolean).map((line) => h('p', {}, line)));
  const okButton = $('confirm-ok');
  okButton.textContent = ok;
  okButton.className = danger ? 'danger filled' : 'primary';
  dialog.returnValue = '';
  dialog.showModal();
  $('confirm-cancel').focus();
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
  });
}

// ---------- addresses (issue 46) ----------

/** `#view[/arg][?query]`: the view, its argument (a task id, a room) and the query (the
 *  team filter as `team`, the memory search as `q`). */
function parseAddress(hash) {
  const raw = hash.replace(/^#/, '');
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  const [view, ...rest] = path.split('/');
  return { view: view || 'board', arg: rest.length ? decodeURIComponent(rest.join('/')) : '', params };
}

/** The address of `path` with the team filter. */
function hashFor(path) {
  if (!state.team) return `#${path}`;
  return `#${path}${path.includes('?') ? '&' : '?'}team=${encodeURIComponent(state.team)}`;
}

/** The address of what is on screen now, without the team filter. */
function currentPath() {
  const { view, arg, params } = parseAddress(location.hash);
  params.delete('team');
  const query = params.toString();
  return `${view}${arg ? `/${encodeURIComponent(arg)}` : ''}${query ? `?${query}` : ''}`;
}

/** Put `path` in the address bar (a new history entry unless `replace`), without routing. */
function setAddress(path, replace) {
  const next = hashFor(path);
  if (location.hash !== next) {
    if (replace) history.replaceState(null, '', next);
    else history.pushState(null, '', next);
  }
  updateTabLinks();
}

function memoryPath() {
  const query = $('memory-query').value.trim();
  return query ? `memory?${new URLSearchParams({ q: query })}` : 'memory';
}

/** The tabs keep the team filter. */
function updateTabLinks() {
  for (const a of document.querySelectorAll('.tabs a[data-view]')) a.setAttribute('href', hashFor(a.dataset.view));
}

/** Closing a task's dialog by hand leaves its address for the board's. */
function leaveTaskAddress() {
  if (parseAddress(location.hash).view === 'task') setAddress('board');
}

/** Show what the address names: on load, on back and forward, on a pasted link. */
async function route() {
  const { view, arg, params } = parseAddress(location.hash);
  const team = params.get('team') || '';
  if (team !== state.team) {
    state.team = team;
    if (team && ![...$('team-filter').options].some((o) => o.value === team)) {
      state.teams = [...state.teams, { id: team, name: team }];
      renderTeamPickers();
    }
    $('team-filter').value = team;
    if (team) { state.room = team; $('room-team').value = team; state.posts = []; state.roomCursor = 0; }
  }
  updateTabLinks();
  if (view === 'task' && arg) {
    if (state.view !== 'board' || $('view-board').hidden) showView('board');
    const showing = [state.openTaskId, state.openShortId].includes(arg);
    if (!showing || !$('task-dialog').open) await openTask(arg);
    return;
  }
  if ($('task-dialog').open) $('task-dialog').close();
  if (view === 'room' && arg && arg !== state.room) {
    state.room = arg;
    if (![...$('room-team').options].some((o) => o.value === arg)) {
      state.teams = [...state.teams, { id: arg, name: arg }];
      renderTeamPickers();
    }
    $('room-team').value = arg;
    state.posts = [];
    state.roomCursor = 0;
  }
  if (view === 'memory') $('memory-query').value = params.get('q') || '';
  showView(view);
}

async function copyTaskLink() {
  if (!state.openTaskId) return;
  const ref = state.openShortId || state.openTaskId;
  const link = `${location.origin}${location.pathname}#task/${encodeURIComponent(ref)}`;
  try {
    await navigator.clipboard.writeText(link);
    $('copy-link').textContent = 'Copied';
    setTimeout(() => { $('copy-link').textContent = 'Copy link'; }, 1500);
  } catch {
    toast(`Copy this link: ${link}`);
  }
}

// ---------- habits: times, authors, theme, keyboard (issue 46) ----------

/** `3 min ago` (or `in 2 min`), the absolute time on hover. */
function relTime(ms) {
  const diff = Math.round((Date.now() - ms) / 1000);
  const abs = Math.abs(diff);
  const say = (n, unit) => (diff >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`);
  if (abs < 45) return diff >= 0 ? 'just now' : 'in a moment';
  if (abs < 3600) return say(Math.max(1, Math.round(abs / 60)), 'min');
  if (abs < 86400) return say(Math.round(abs / 3600), 'h');
  if (abs < 7 * 86400) return say(Math.round(abs / 86400), 'd');
  return new Date(ms).toLocaleDateString();
}

function timeEl(ms) {
  if (!ms) return '';
  return h('time', { datetime: new Date(ms).toISOString(), title: when(ms), dataset: { rel: ms } }, relTime(ms));
}

/** The operator is "operator" everywhere; the server's notices are "system". */
function authorName(type) {
  return type === 'user' ? 'operator' : type;
}

/** Agents' words are untrusted evidence; the operator's and the server's are not. */
function authorTag(type) {
  if (type === 'agent') return h('span', { class: 'pill evidence-tag' }, 'untrusted evidence');
  return h('span', { class: 'pill' }, authorName(type));
}

/** `operator · 3 min ago`, `system · …`, or an agent's id behind the untrusted tag. */
function commentHead(c) {
  const who = c.authorType === 'agent' ? [authorTag('agent'), ' ', c.authorAgentId || 'agent'] : authorTag(c.authorType);
  return [who, ' · ', timeEl(c.createdAt)];
}

/** Markdown the server rendered and sanitized (pulldown-cmark, then ammonia), or the
 *  plain text when no rendering came. Parsed inert in a template: nothing in it runs, and
 *  the page's CSP allows no inline script anyway. */
function richText(cls, html, text, tag = 'div') {
  const el = h(tag, { class: `${cls} md` });
  if (typeof html !== 'string') { el.textContent = text; return el; }
  const template = document.createElement('template');
  template.innerHTML = html;
  el.append(template.content);
  for (const a of el.querySelectorAll('a[href]')) a.target = '_blank';
  return el;
}

/** Every second: expiry countdowns and relative times. */
function tickHabits() {
  for (const el of document.querySelectorAll('[data-expires-at]')) el.textContent = expiryLeft(Number(el.dataset.expiresAt));
  for (const el of document.querySelectorAll('time[data-rel]')) el.textContent = relTime(Number(el.dataset.rel));
}

const THEMES = ['auto', 'dark', 'light'];

/** `auto` follows the system's `prefers-color-scheme`; a choice is remembered. */
function applyTheme(theme) {
  if (theme === 'auto') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  $('theme-toggle').textContent = `Theme: ${theme}`;
}

function savedTheme() {
  try { return THEMES.includes(localStorage.getItem('clawboo.theme')) ? localStorage.getItem('clawboo.theme') : 'auto'; } catch { return 'auto'; }
}

function cycleTheme() {
  const next = THEMES[(THEMES.indexOf(savedTheme()) + 1) % THEMES.length];
  try { localStorage.setItem('clawboo.theme', next); } catch { /* private mode: this page only */ }
  applyTheme(next);
}

/** The board's cards narrowed to those whose title or short id holds the filter text. */
function applyBoardSearch() {
  const query = $('board-search').value.trim().toLowerCase();
  for (const li of document.querySelectorAll('#columns .cards > li')) {
    const title = li.querySelector('.card-title')?.textContent.toLowerCase() || '';
    const short = li.querySelector('.short-id')?.textContent.toLowerCase() || '';
    li.hidden = Boolean(query) && !title.includes(query) && short !== query;
  }
}

function afterBoardRender() {
  tidyAgents();
  markWaiting();
  roomForColumns();
  applyBoardSearch();
}

function focusSearch() {
  const targets = { board: 'board-search', memory: 'memory-query', audit: 'audit-tool' };
  if (!targets[state.view]) location.hash = hashFor('board');
  $(targets[state.view] || 'board-search').focus();
}

/** `j`/`k`: the next or previous visible card takes the focus. */
function moveCardFocus(step) {
  const cards = [...document.querySelectorAll('#columns .card')].filter((c) => c.offsetParent !== null);
  if (!cards.length) return;
  const at = cards.indexOf(document.activeElement);
  const next = cards[at < 0 ? 0 : Math.min(cards.length - 1, Math.max(0, at + step))];
  next.focus();
  next.scrollIntoView({ block: 'nearest', inline: 'nearest' });
}

const GO_KEYS = { b: 'board', r: 'room', m: 'memory', a: 'approvals', l: 'audit' };
let goPending = false;

function onShortcut(e) {
  const t = e.target;
  const typing = t instanceof HTMLElement && (t.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName));
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
    const form = typing ? t.closest('form') : null;
    if (form) { e.preventDefault(); form.requestSubmit(); }
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey || document.querySelector('dialog[open]')) return;
  if (goPending) {
    goPending = false;
    if (GO_KEYS[e.key]) { e.preventDefault(); location.hash = hashFor(GO_KEYS[e.key]); }
    return;
  }
  switch (e.key) {
    case 'c':
      e.preventDefault();
      if (state.view !== 'board') location.hash = hashFor('board');
      $('new-task-button').click();
      break;
    case '/': e.preventDefault(); focusSearch(); break;
    case 'j': moveCardFocus(1); break;
    case 'k': moveCardFocus(-1); break;
    case 'g': goPending = true; setTimeout(() => { goPending = false; }, 1500); break;
    case '?': e.preventDefault(); $('shortcuts-dialog').showModal(); break;
    default:
  }
}

function wireHabits() {
  applyTheme(savedTheme());
  $('theme-toggle').addEventListener('click', cycleTheme);
  $('shortcuts-button').addEventListener('click', () => $('shortcuts-dialog').showModal());
  document.addEventListener('keydown', onShortcut);
  $('board-search').addEventListener('input', applyBoardSearch);
  $('copy-link').addEventListener('click', copyTaskLink);
  wireKanban();
  setInterval(tickHabits, 1000);
}

// ---------- a kanban with room (issue 46) ----------

/** What the operator folded away, remembered across visits. */
const kanban = {
  collapsed: new Set(readPref('clawboo.collapsed', ['backlog', 'done', 'cancelled'])),
  agentsOpen: readPref('clawboo.agentsOpen', !window.matchMedia('(max-width: 760px)').matches),
  showSilent: false,
  phoneColumn: 'todo',
};

function readPref(key, fallback) {
  try { const v = localStorage.getItem(key); return v === null ? fallback : JSON.parse(v); } catch { return fallback; }
}

function writePref(key, value) {
  try { localStorage.setItem(key, JSON.stringify(value)); } catch { /* private mode: this page only */ }
}

/** The agents strip folds away; agents silent with nothing held hide behind a button. */
function tidyAgents() {
  const list = $('agent-list');
  list.hidden = !kanban.agentsOpen;
  $('agents-toggle').setAttribute('aria-expanded', String(kanban.agentsOpen));
  const silentIdle = state.agents.filter((a) => !a.alive && !a.held.length).map((a) => a.id);
  const held = state.agents.reduce((n, a) => n + a.held.length, 0);
  $('agents-summary').textContent = state.agents.length
    ? `${state.agents.length - silentIdle.length} active · ${held} task(s) held${silentIdle.length ? ` · ${silentIdle.length} silent` : ''}` : '';
  const hidden = new Set(kanban.showSilent ? [] : silentIdle);
  for (const li of list.querySelectorAll('.agent[data-agent-id]')) li.hidden = hidden.has(li.dataset.agentId);
  $('silent-toggle')?.parentElement.remove();
  if (silentIdle.length) {
    list.append(h('li', {}, h('button', {
      type: 'button', class: 'link', id: 'silent-toggle',
      onclick: () => { kanban.showSilent = !kanban.showSilent; renderAgents(); tidyAgents(); markWaiting(); },
    }, kanban.showSilent ? 'Hide silent agents' : `Show ${silentIdle.length} silent agent(s)`)));
  }
}

/** Fold buttons on Backlog, Done and Cancelled; waiting cards dimmed with what they wait
 *  on; sub-task progress; the phone's one-column switcher. */
function roomForColumns() {
  const byId = new Map(state.tasks.map((t) => [t.id, t]));
  for (const column of document.querySelectorAll('#columns .column[data-status]')) {
    const status = column.dataset.status;
    column.classList.toggle('phone-current', status === kanban.phoneColumn);
    if (!['backlog', 'done', 'cancelled'].includes(status)) continue;
    const folded = kanban.collapsed.has(status);
    column.classList.toggle('collapsed', folded);
    column.querySelector('h3').prepend(h('button', {
      type: 'button', class: 'fold', 'aria-expanded': String(!folded),
      'aria-label': `${folded ? 'Expand' : 'Collapse'} ${STATUS_LABELS[status] || status}`,
      onclick: () => toggleColumn(status),
    }, folded ? '▸' : '▾'));
  }
  for (const el of document.querySelectorAll('#columns .card[data-task-id]')) {
    const task = byId.get(el.dataset.taskId);
    if (!task) continue;
    if (task.teamId) {
      // A colour per team, set through the CSSOM (the CSP allows no style attribute).
      el.classList.add('teamed');
      el.style.setProperty('--team-hue', String(teamHue(task.teamId)));
    }
    const open = task.dependsOn.map((id) => byId.get(id)).filter((d) => d && d.status !== 'done');
    if (open.length && !['done', 'cancelled'].includes(task.status)) {
      el.classList.add('waits');
      el.append(h('span', { class: 'waits-on' }, `waits on ${open.map((d) => d.title).join(', ')}`));
    }
    const kids = state.tasks.filter((t) => t.parentTaskId === task.id);
    if (kids.length) {
      const done = kids.filter((t) => t.status === 'done').length;
      el.querySelector('.card-meta').append(h('span', { class: 'progress', title: `${done} of ${kids.length} sub-tasks done` },
        h('progress', { max: kids.length, value: done }), ` ${done}/${kids.length} done`));
    }
  }
  const counts = new Map();
  for (const t of state.tasks) counts.set(t.status, (counts.get(t.status) || 0) + 1);
  const statuses = state.workflow ? state.workflow.statuses : Object.keys(STATUS_LABELS);
  fill($('column-switcher'), statuses.map((status) => h('button', {
    type: 'button', dataset: { status }, 'aria-pressed': String(status === kanban.phoneColumn),
    onclick: () => { kanban.phoneColumn = status; roomForPhone(); },
  }, STATUS_LABELS[status] || status, ' ', h('span', { class: 'count' }, counts.get(status) || 0))));
}

/** A stable hue for a team id, so each team's cards carry the same colour everywhere. */
function teamHue(id) {
  let hash = 0;
  for (const ch of id) hash = (hash * 31 + ch.codePointAt(0)) % 360;
  return hash;
}

function roomForPhone() {
  for (const column of document.querySelectorAll('#columns .column[data-status]')) {
    column.classList.toggle('phone-current', column.dataset.status === kanban.phoneColumn);
  }
  for (const b of $('column-switcher').querySelectorAll('button')) {
    b.setAttribute('aria-pressed', String(b.dataset.status === kanban.phoneColumn));
  }
}

function toggleColumn(status) {
  if (kanban.collapsed.has(status)) kanban.collapsed.delete(status);
  else kanban.collapsed.add(status);
  writePref('clawboo.collapsed', [...kanban.collapsed]);
  renderBoard();
  afterBoardRender();
}

function wireKanban() {
  $('agents-toggle').addEventListener('click', () => {
    kanban.agentsOpen = !kanban.agentsOpen;
    writePref('clawboo.agentsOpen', kanban.agentsOpen);
    tidyAgents();
  });
}


// ---------- safe moves and editing (issue 46) ----------

/** Ask before a move that cannot be undone (Done, Cancelled), one that leaves dependencies
 *  open, or one that takes a task from the agent who holds it. */
async function safeMove(task, to) {
  const label = STATUS_LABELS[to] || to;
  const byId = new Map(state.tasks.map((t) => [t.id, t]));
  const open = task.dependsOn.filter((id) => byId.get(id)?.status !== 'done');
  const final = to === 'done' || to === 'cancelled';
  // Only a move back to To do clears the holder (the store's rule).
  const takesBack = Boolean(task.assigneeAgentId) && to === 'todo';
  const lines = [
    final ? `${label} is final: the task does not move again.` : null,
    to === 'done' && open.length ? `It depends on ${open.length} task(s) not done yet: ${open.map((id) => byId.get(id)?.title || id).join(', ')}.` : null,
    takesBack ? `@${task.assigneeAgentId} holds it: moving it takes it back, ends the agent's claim and lease, and leaves a comment saying so.` : null,
  ];
  if (lines.some(Boolean)) {
    const ok = await askConfirm({ title: `Move “${task.title}” to ${label}?`, lines, ok: `Move to ${label}`, danger: final || takesBack });
    if (!ok) return;
  }
  await moveTask(task.id, to);
}

/** The "Depends on" picker: tasks of the same team only, never the task's ancestors,
 *  narrowed by a search. */
function depPicker(task, ancestors) {
  const excluded = new Set([task.id, ...task.dependsOn, ...ancestors.map((a) => a.id)]);
  const candidates = state.tasks.filter((t) => !excluded.has(t.id) && (t.teamId || '') === (task.teamId || ''));
  if (!candidates.length) return h('p', { class: 'muted' }, 'No other task of this team to depend on.');
  // A live redraw keeps the picker being used (its search, its focus, its choice) and
  // only renews its options: replacing it would drop what the operator is typing.
  const existing = $('dep-picker');
  if (existing && existing.dataset.taskId === task.id) {
    existing.renew(candidates);
    return existing;
  }
  const select = h('select', { name: 'dep', id: 'dep-select' });
  const search = h('input', { type: 'search', id: 'dep-search', placeholder: 'title or RED-12', autocomplete: 'off' });
  let offered = candidates;
  const matches = (c, query) => c.title.toLowerCase().includes(query.toLowerCase())
    || (c.shortId || '').toLowerCase() === query.trim().toLowerCase();
  const show = () => {
    const chosen = select.value;
    fill(select, offered.filter((c) => matches(c, search.value))
      .map((c) => h('option', { value: c.id },
        `${c.title} (${STATUS_LABELS[c.status] || c.status}${c.shortId ? `, ${c.shortId}` : ''})`)));
    if (offered.some((c) => c.id === chosen)) select.value = chosen;
  };
  search.addEventListener('input', show);
  show();
  const picker = h('form', {
    class: 'row', id: 'dep-picker', dataset: { taskId: task.id },
    onsubmit: (e) => { e.preventDefault(); if (select.value) addDependency(task.id, select.value); },
  },
  h('label', {}, 'Find ', search),
  h('label', {}, 'Depends on ', select),
  h('button', { type: 'submit' }, 'Add dependency'));
  picker.renew = (fresh) => { offered = fresh; show(); };
  return picker;
}

/** Title, description and priority, edited in place (kept while a live refresh redraws). */
function editForm(task) {
  const existing = $('edit-task');
  if (existing && existing.dataset.taskId === task.id && existing.open) return existing;
  return h('details', { id: 'edit-task', class: 'edit', dataset: { taskId: task.id } },
    h('summary', {}, 'Edit'),
    h('form', { class: 'stack', onsubmit: (e) => { e.preventDefault(); saveEdit(task, e.target); } },
      h('label', {}, 'Title', h('input', { name: 'title', required: true, maxlength: 500, value: task.title })),
      h('label', {}, 'Description', h('textarea', { name: 'description', rows: 4 }, task.description || '')),
      h('label', {}, 'Priority', h('input', { name: 'priority', type: 'number', min: -1000, max: 1000, value: task.priority })),
      h('div', {}, h('button', { type: 'submit', class: 'primary' }, 'Save'))));
}

async function saveEdit(task, form) {
  const body = {};
  const { title, description, priority } = form.elements;
  if (title.value !== task.title) body.title = title.value;
  if (description.value !== (task.description || '')) body.description = description.value;
  if (Number(priority.value) !== task.priority) body.priority = Number(priority.value);
  if (!Object.keys(body).length) { $('edit-task').open = false; return; }
  await attempt(async () => {
    await api(`/api/board/${encodeURIComponent(task.id)}`, { method: 'PATCH', body });
    $('edit-task').open = false;
    await loadBoard();
    await loadDetail(task.id);
  });
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
  wireHabits();
  await route();
  connectLive();
  setInterval(tickCountdowns, 1000);
  attempt(loadToolNames);
  startOpsStrip();
}

start();
