// canonflow fleet and live chat view: plain JS, no build step, nothing loaded from elsewhere.
//
// The fleet counters and the runtime × model table come from /api/fleet (polled); the
// search asks /api/sessions?q= which sessions hold the text; an open session's
// model, tokens, cost and timings come from /api/sessions/ID/timings (polled).
//
// Two Server-Sent Event streams: /events (the session list: a full snapshot, then
// one summary per change) and /events?session=ID (the session's chat records, oldest
// first, then live). A dropped stream reconnects by itself; the browser sends
// Last-Event-ID (the last seq it got) and the server sends only what was missed.
// Record text reaches the page through textContent (markdown.js builds assistant text
// the same way), never as HTML.
"use strict";

const STATE_LABEL = {
  working: "working",
  waiting: "waiting on you",
  stalled: "stalled",
  exited: "exited",
  waiting_approval: "waiting for approval",
  waiting_answer: "waiting for answer",
  done: "done",
  failed: "failed",
};

// What an approval asks for, in words (the chat's request_type is the runtime's kind).
const REQUEST_WHAT = {
  command_execution_approval: "run a command",
  exec_command_approval: "run a command",
  file_change_approval: "change a file",
  apply_patch_approval: "apply a patch",
  dynamic_tool_call: "use a tool",
  auth_tokens_refresh: "refresh its sign-in",
  tool_user_input: "ask you something",
};

// A resolved approval's shared outcome, whatever the runtime's own word (`decision`).
const OUTCOME = {
  accept: { allowed: true, label: "Allowed" },
  accept_for_session: { allowed: true, label: "Allowed for this session" },
  decline: { allowed: false, label: "Denied" },
  cancel: { allowed: false, label: "Denied, and the turn stopped" },
};

// Tool names the runtime left out: the item's kind, in words.
const ITEM_NAMES = {
  command_execution: "Command",
  file_change: "File change",
  mcp_tool_call: "MCP tool",
  dynamic_tool_call: "Tool",
  collab_agent_tool_call: "Agent",
  web_search: "Web search",
  image_view: "Image",
};

// Approval options as runtimes send them, in words.
const OPTION_WORDS = {
  accept: "allow", acceptForSession: "allow for this session", decline: "deny",
  cancel: "deny and stop", once: "allow once", always: "always allow", reject: "deny",
  allow: "allow", deny: "deny", approved: "allow", approved_for_session: "allow for this session",
  denied: "deny", abort: "deny and stop",
};

const MODE_WORDS = {
  acceptEdits: "accept edits", bypassPermissions: "bypass permissions", plan: "plan",
  default: "ask every time",
};

const sessions = new Map(); // session_id -> summary from the server
let current = null; // the open session: see openSession
let listDirty = false;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

// camelCase / snake_case / kebab-case -> lower-case words
function words(name) {
  return String(name).replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").toLowerCase();
}

// A line of Markdown without its markers, for the list's one-line preview.
function plain(text) {
  return text.replace(/(^|\s)#{1,6}\s+/g, "$1").replace(/\*\*|__|~~|`+/g, "");
}

function ago(ms) {
  if (!ms) return "";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 5) return "just now";
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return new Date(ms).toLocaleString();
}

function stateBadge(node, state) {
  node.dataset.state = state;
  node.textContent = STATE_LABEL[state] || words(state);
}

// ---- the connection state ------------------------------------------------------

let streamUp = false;
let heard = false; // a first message came from the server: until then, "connecting"
let brokerError = "connecting"; // null: the server reads agents.chat; else why it cannot

function showConn() {
  const conn = document.getElementById("conn");
  if (!heard) {
    conn.dataset.conn = "connecting";
    conn.textContent = "connecting…";
    conn.title = "waiting for canonflow ui's first answer";
  } else if (!streamUp) {
    conn.dataset.conn = "down";
    conn.textContent = "disconnected";
    conn.title = "the page lost its connection to canonflow ui; retrying";
  } else if (brokerError) {
    conn.dataset.conn = brokerError === "connecting" ? "connecting" : "broker";
    conn.textContent = brokerError === "connecting" ? "connecting…" : "disconnected";
    conn.title = brokerError === "connecting" ? "connecting to the broker"
      : "the broker is unreachable: " + brokerError;
  } else {
    conn.dataset.conn = "live";
    conn.textContent = "live";
    conn.title = "following agents.chat";
  }
}

async function pollStatus() {
  try {
    const status = await (await fetch("/api/status", { cache: "no-store" })).json();
    const probe = status.probe || {};
    if (probe.reachable === false) brokerError = probe.error || "unreachable";
    else if (!status.consumer.connected) brokerError = status.consumer.error || "connecting";
    else brokerError = null;
  } catch (e) {
    streamUp = false; // the server itself is away
  }
  showConn();
}

// ---- the session list ---------------------------------------------------------

function connectList() {
  const source = new EventSource("/events");
  source.onopen = () => { streamUp = true; pollStatus(); };
  source.onerror = () => { streamUp = false; showConn(); };
  source.addEventListener("sessions", (e) => {
    heard = true;
    streamUp = true;
    listLoaded = true;
    showConn();
    sessions.clear();
    for (const s of JSON.parse(e.data)) sessions.set(s.session_id, s);
    scheduleList();
  });
  source.addEventListener("session", (e) => {
    const s = JSON.parse(e.data);
    sessions.set(s.session_id, s);
    scheduleList();
  });
  source.addEventListener("removed", (e) => {
    sessions.delete(JSON.parse(e.data).session_id);
    scheduleList();
  });
}

function scheduleList() {
  if (listDirty) return;
  listDirty = true;
  requestAnimationFrame(() => { listDirty = false; renderList(); });
}

let listLoaded = false; // the first list came: "no sessions" means none, not "not yet"

// The filters: runtime, model and state compare a summary's fields; the text search
// is the server's (it reads the records too): `searchIds` is its answer for `searchFor`.
const filters = { runtime: "", model: "", state: "" };
let searchFor = "";
let searchIds = null;

function matches(s) {
  if (filters.runtime && s.provider !== filters.runtime) return false;
  if (filters.model && (s.model || "unknown") !== filters.model) return false;
  if (filters.state === "waiting") {
    if (!s.waiting_on_person) return false;
  } else if (filters.state === "stalled") {
    if (!s.stalled) return false;
  } else if (filters.state && s.state !== filters.state && s.fleet_state !== filters.state) {
    return false;
  }
  if (searchFor && !(searchIds && searchIds.has(s.session_id))) return false;
  return true;
}

async function runSearch() {
  const q = document.getElementById("search").value.trim();
  if (!q) {
    searchFor = "";
    searchIds = null;
    scheduleList();
    return;
  }
  try {
    const found = await (await fetch("/api/sessions?q=" + encodeURIComponent(q),
      { cache: "no-store" })).json();
    if (document.getElementById("search").value.trim() !== q) return; // typed on since
    searchFor = q;
    searchIds = new Set(found.map((s) => s.session_id));
  } catch (e) {
    return; // the connection badge says why
  }
  scheduleList();
}

function fillOptions(id, values) {
  const select = document.getElementById(id);
  const have = new Set([...select.options].map((o) => o.value));
  for (const v of [...values].sort()) {
    if (!have.has(v)) select.append(new Option(v, v));
  }
}

function renderList() {
  const list = document.getElementById("sessions");
  const all = [...sessions.values()];
  fillOptions("filter-runtime", new Set(all.map((s) => s.provider)));
  fillOptions("filter-model", new Set(all.map((s) => s.model || "unknown")));
  const sorted = all.filter(matches).sort((a, b) => b.last_activity - a.last_activity);
  list.replaceChildren(...sorted.map(sessionItem));
  const filtered = sorted.length !== all.length;
  document.getElementById("session-count").textContent =
    filtered ? `${sorted.length} of ${all.length}` : String(all.length);
  document.getElementById("loading").hidden = listLoaded;
  document.getElementById("no-sessions").hidden = !listLoaded || all.length > 0;
  document.getElementById("no-match").hidden = !listLoaded || all.length === 0 || sorted.length > 0;
  for (const c of document.querySelectorAll(".counter[data-filter]")) {
    c.setAttribute("aria-pressed", String(!!filters.state && c.dataset.filter === filters.state));
  }
  renderHeader();
}

// ---- figures: tokens, dollars, durations ------------------------------------------

function tokensText(n) {
  if (n === null || n === undefined) return "";
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + "M tokens";
  if (n >= 1e4) return Math.round(n / 1e3) + "k tokens";
  return n.toLocaleString("en-US") + " tokens";
}

function shortCount(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
  return String(n);
}

function usd(x) {
  if (x === null || x === undefined) return "";
  return "$" + (x >= 100 ? x.toFixed(0) : x >= 1 ? x.toFixed(2) : x.toFixed(4));
}

function duration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return ms + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + "m " + Math.round(s % 60) + "s";
  return Math.floor(s / 3600) + "h " + Math.round((s % 3600) / 60) + "m";
}

function usageText(s) {
  const bits = [];
  if (s.model) bits.push(s.model);
  // no usage reported yet (no turn ended, or a runtime that says none): nothing shown
  if (s.tokens && s.tokens.total) bits.push(tokensText(s.tokens.total));
  if (s.cost_usd) {
    bits.push(usd(s.cost_usd) + (s.unpriced_turns ? ` (+${s.unpriced_turns} unpriced)` : ""));
  }
  return bits.join(" · ");
}

// ---- the fleet -------------------------------------------------------------------

async function pollFleet() {
  let fleet;
  try {
    fleet = await (await fetch("/api/fleet", { cache: "no-store" })).json();
  } catch (e) {
    return;
  }
  const set = (id, n) => {
    const node = document.getElementById(id);
    node.querySelector("b").textContent = String(n);
    node.dataset.count = String(n);
    node.dataset.nonzero = String(n > 0);
  };
  set("fleet-sessions", fleet.sessions);
  set("fleet-working", fleet.by_state.working || 0);
  set("fleet-waiting", fleet.waiting_on_person.length);
  set("fleet-stalled", fleet.stalled.length);
  set("fleet-failed", fleet.failed.length);
  const today = document.getElementById("fleet-today");
  const t = fleet.today;
  today.querySelector("b").textContent = `${usd(t.cost_usd)} · ${tokensText(t.total)}`;
  today.dataset.costUsd = String(t.cost_usd);
  today.dataset.tokens = String(t.total);
  today.title = `${t.turns} turn(s) completed on ${t.date} (UTC)`
    + (t.unpriced_turns ? `; ${t.unpriced_turns} without a price` : "");
  const rows = fleet.rows.map((r) => {
    const tr = el("tr");
    tr.dataset.runtime = r.runtime;
    tr.dataset.model = r.model;
    tr.title = Object.entries(r.states).map(([k, v]) => `${v} ${STATE_LABEL[k] || k}`).join(", ");
    tr.append(el("td", "", r.runtime), el("td", "", r.model), el("td", "", String(r.sessions)),
      el("td", "", r.tokens ? shortCount(r.tokens) : "–"), el("td", "", r.cost_usd ? usd(r.cost_usd) : "–"));
    return tr;
  });
  document.getElementById("fleet-table").replaceChildren(...rows);
  if (searchFor) runSearch(); // the records may have changed
}

function sessionItem(s) {
  const li = el("li", "session");
  li.dataset.sessionId = s.session_id;
  li.dataset.state = s.state;
  if (current && current.id === s.session_id) li.classList.add("selected");
  const button = el("button", "session-button");
  button.type = "button";
  button.addEventListener("click", () => openSession(s.session_id));
  const top = el("div", "session-top");
  top.append(el("span", "provider", s.provider), el("span", "session-id", s.session_id));
  const bottom = el("div", "session-bottom");
  const badge = el("span", "state");
  stateBadge(badge, s.fleet_state === "stalled" ? "stalled" : s.state);
  const when = el("span", "ago", ago(s.last_activity));
  when.dataset.ts = String(s.last_activity);
  bottom.append(badge, when);
  const meta = usageText(s);
  if (meta) bottom.append(el("span", "session-meta", meta));
  button.append(top, bottom);
  if (s.preview) button.append(el("div", "preview", plain(s.preview)));
  li.append(button);
  return li;
}

function renderHeader() {
  if (!current) return;
  const s = sessions.get(current.id);
  document.getElementById("session-header").hidden = false;
  document.getElementById("session-title").textContent = current.id;
  document.getElementById("session-provider").textContent = s ? s.provider : "";
  const badge = document.getElementById("session-state");
  if (s) stateBadge(badge, s.state);
  const when = document.getElementById("session-activity");
  when.dataset.ts = s ? String(s.last_activity) : "";
  when.textContent = s ? ago(s.last_activity) : "";
  document.getElementById("session-usage").textContent = s ? usageText(s) : "";
}

// An open session's timings: each tool card and each turn's end say how long they took,
// and what the turn cost.
async function pollTimings() {
  if (!current || !sessions.has(current.id)) return; // none yet: the server has no timings
  const mine = current;
  let t;
  try {
    const resp = await fetch(`/api/sessions/${encodeURIComponent(mine.id)}/timings`,
      { cache: "no-store" });
    if (!resp.ok) return;
    t = await resp.json();
  } catch (e) {
    return;
  }
  if (current !== mine) return;
  mine.timings = t;
  if (t.session) sessions.set(t.session.session_id, t.session);
  applyTimings();
  renderHeader();
}

function applyTimings() {
  const t = current && current.timings;
  if (!t) return;
  for (const [id, tool] of Object.entries(t.tools)) {
    const card = current.items.get("tool:" + id);
    if (!card || tool.duration_ms === null || tool.duration_ms === undefined) continue;
    let span = card.querySelector(".tool-time");
    if (!span) {
      span = el("span", "tool-time");
      card.querySelector(".tool-head").append(span);
    }
    span.textContent = duration(tool.duration_ms);
    span.dataset.ms = String(tool.duration_ms);
  }
  for (const turn of t.turns) {
    const card = current.items.get("done:" + turn.turn_id);
    if (!card) continue;
    let line = card.querySelector(".turn-usage");
    if (!line) {
      line = el("span", "turn-usage");
      card.querySelector(".final-title").after(line);
    }
    const bits = [];
    if (turn.duration_ms !== null && turn.duration_ms !== undefined) bits.push(duration(turn.duration_ms));
    if (turn.model) bits.push(turn.model);
    if (turn.tokens) bits.push(tokensText(turn.tokens.total));
    if (turn.cost_usd !== null && turn.cost_usd !== undefined) bits.push(usd(turn.cost_usd));
    else if (turn.cost_source === "unpriced") bits.push("no price");
    line.textContent = bits.join(" · ");
    line.dataset.ms = String(turn.duration_ms);
    line.dataset.costUsd = String(turn.cost_usd);
  }
}

setInterval(() => {
  for (const node of document.querySelectorAll(".ago[data-ts]")) {
    node.textContent = ago(Number(node.dataset.ts));
  }
}, 1000);

// ---- one session as a chat ----------------------------------------------------

function openSession(id) {
  if (current && current.source) current.source.close();
  const chat = document.getElementById("chat");
  chat.replaceChildren();
  chat.dataset.session = id;
  delete chat.dataset.ready;
  document.body.classList.add("reading"); // on a phone: the chat instead of the list
  current = {
    id,
    source: null,
    items: new Map(), // record key -> its element
    texts: new Map(), // text key -> {raw, block, pending}
    lastText: null, // the newest assistant message: {turn, raw, block}
    errors: new Map(), // "turn|class|message" -> its card
    denied: new Set(), // tool_use_ids an approval refused
    nextSeq: 1,
    timings: null, // its last /timings answer
  };
  if (location.hash !== "#session=" + encodeURIComponent(id)) {
    history.replaceState(null, "", "#session=" + encodeURIComponent(id));
  }
  const source = new EventSource("/events?session=" + encodeURIComponent(id));
  current.source = source;
  const mine = current;
  source.addEventListener("record", (e) => {
    if (current === mine) addRecord(JSON.parse(e.data));
  });
  source.addEventListener("gap", (e) => {
    if (current !== mine) return;
    const gap = JSON.parse(e.data);
    const n = gap.to - gap.from + 1;
    append(el("div", "notice", `${n} earlier record(s) are no longer kept in memory.`));
  });
  source.addEventListener("ready", () => {
    if (current === mine) {
      chat.dataset.ready = "true";
      pollTimings();
    }
  });
  renderList();
}

function closeSession() {
  if (current && current.source) current.source.close();
  current = null;
  document.body.classList.remove("reading");
  document.getElementById("session-header").hidden = true;
  const chat = document.getElementById("chat");
  chat.replaceChildren(el("p", "empty", "Select a session to read it as a chat."));
  delete chat.dataset.session;
  history.replaceState(null, "", location.pathname);
  renderList();
}

function nearBottom() {
  const doc = document.scrollingElement || document.documentElement;
  const chat = document.getElementById("chat");
  return chat.scrollHeight - chat.scrollTop - chat.clientHeight < 80
    || doc.scrollHeight - doc.scrollTop - doc.clientHeight < 80;
}

// Add `node` to the chat (before `before`, when given), following the bottom if the
// reader was there.
function append(node, parentToolUseId, before) {
  const chat = document.getElementById("chat");
  const follow = nearBottom();
  if (parentToolUseId) {
    node.classList.add("nested");
    node.title = "inside tool call " + parentToolUseId;
  }
  if (before && before.parentNode === chat) chat.insertBefore(node, before);
  else chat.append(node);
  if (follow) chat.scrollTop = chat.scrollHeight;
  return node;
}

function addRecord(r) {
  if (typeof r.seq === "number") {
    if (r.seq < current.nextSeq) return; // already shown (a replay after reconnecting)
    current.nextSeq = r.seq + 1;
  }
  const handler = RENDER[r.type];
  if (handler) handler(r); // unknown record types are ignored: newer server, older page
}

// ---- text: Markdown, re-rendered at most once a frame while it streams in ----------

function streamText(r, kind) {
  const key = `${kind}:${r.item_id || r.turn_id || "-"}`;
  let t = current.texts.get(key);
  if (!t) {
    let block;
    if (kind === "text") {
      block = el("div", "msg assistant");
      block.append(el("div", "who", "assistant"), el("div", "body md"));
    } else {
      block = el("details", "msg reasoning");
      block.open = true;
      block.append(el("summary", "who", "thinking"), el("div", "body md"));
    }
    append(block, r.parent_tool_use_id);
    t = { raw: "", block, pending: false };
    current.texts.set(key, t);
  }
  let text = t.raw + (r.content || "");
  // accumulated is the whole text so far: it repairs a message whose start was dropped
  if (r.accumulated && r.accumulated !== text) text = r.accumulated;
  t.raw = text;
  if (kind === "text") current.lastText = { turn: r.turn_id, raw: text, block: t.block };
  if (!t.pending) {
    t.pending = true;
    requestAnimationFrame(() => {
      t.pending = false;
      t.block.querySelector(".body").replaceChildren(renderMarkdown(t.raw));
    });
  }
}

// ---- tools ----------------------------------------------------------------------

function commandOf(input) {
  if (!input || typeof input !== "object") return null;
  const cmd = input.command ?? input.cmd;
  if (typeof cmd === "string" && cmd) return cmd;
  if (Array.isArray(cmd) && cmd.length) return cmd.join(" ");
  return null;
}

function subjectOf(input) {
  if (!input || typeof input !== "object") return null;
  for (const k of ["file_path", "path", "pattern", "url", "query", "description", "prompt"]) {
    if (typeof input[k] === "string") return input[k];
  }
  return null;
}

function toolCard(toolUseId, name, parentToolUseId) {
  let card = current.items.get("tool:" + toolUseId);
  if (card) return card;
  card = el("div", "tool");
  card.dataset.toolUseId = toolUseId;
  const head = el("div", "tool-head");
  head.append(el("span", "tool-name", toolName(name)), el("span", "tool-status", "running…"));
  card.append(head);
  const output = el("details", "tool-output");
  output.append(el("summary", "", "output (pending)"), el("pre", "output-text"));
  card.append(output);
  append(card, parentToolUseId);
  current.items.set("tool:" + toolUseId, card);
  if (current.denied.has(toolUseId)) markDenied(card);
  return card;
}

function toolName(name) {
  return name ? (ITEM_NAMES[name] || name) : "tool";
}

// A unified diff as lines coloured by kind, and its +added/-removed counts.
function diffView(diff) {
  const pre = el("pre", "diff");
  let added = 0;
  let removed = 0;
  for (const line of diff.replace(/\n$/, "").split("\n")) {
    let kind = "ctx";
    if (line.startsWith("+++") || line.startsWith("---")) kind = "file";
    else if (line.startsWith("@@")) kind = "hunk";
    else if (line.startsWith("+")) { kind = "add"; added++; }
    else if (line.startsWith("-")) { kind = "del"; removed++; }
    pre.append(el("span", "diff-" + kind, line + "\n"));
  }
  return { pre, added, removed };
}

// A file change: the paths in the card's header, the diff instead of the raw input.
function showChange(card, paths, diff) {
  const head = card.querySelector(".tool-head");
  if (Array.isArray(paths) && paths.length) {
    let where = head.querySelector(".tool-path");
    if (!where) {
      where = el("span", "tool-path");
      head.insertBefore(where, head.querySelector(".tool-status"));
    }
    where.textContent = paths[0] + (paths.length > 1 ? ` (+${paths.length - 1} more)` : "");
    where.title = paths.join("\n");
  }
  if (typeof diff !== "string" || !diff) return;
  const view = diffView(diff);
  let stat = head.querySelector(".diff-stat");
  if (!stat) {
    stat = el("span", "diff-stat");
    head.insertBefore(stat, head.querySelector(".tool-status"));
  }
  stat.replaceChildren(el("span", "diff-added", `+${view.added}`),
    el("span", "diff-removed", ` −${view.removed}`));
  const old = card.querySelector("pre.diff");
  if (old) old.replaceWith(view.pre);
  else card.insertBefore(view.pre, card.querySelector(".tool-output"));
  card.classList.add("file-change");
  const input = card.querySelector(".tool-input");
  if (input) input.remove(); // the diff says it better than the runtime's JSON
}

function markDenied(card) {
  card.classList.add("denied");
  card.querySelector(".tool-status").textContent = card.classList.contains("file-change")
    ? "not applied: denied" : "not run: denied";
}

// ---- approvals --------------------------------------------------------------------

function optionLabel(o) {
  if (typeof o === "string") return OPTION_WORDS[o] || words(o);
  if (!o || typeof o !== "object") return String(o);
  if (typeof o.name === "string") return o.name; // ACP: the agent's own label
  if (o.type === "setMode") {
    const mode = MODE_WORDS[o.mode] || words(o.mode || "another");
    return `switch to “${mode}” mode` + (o.destination === "session" ? " for this session" : "");
  }
  if (o.type === "addRules" && Array.isArray(o.rules)) {
    const what = o.rules.map((x) => x.toolName + (x.ruleContent ? `(${x.ruleContent})` : ""));
    return `always ${o.behavior === "deny" ? "deny" : "allow"} ${what.join(", ")}`;
  }
  if (typeof o.type === "string") return words(o.type);
  const key = Object.keys(o)[0];
  if (key === "acceptWithExecpolicyAmendment") return "allow, and commands like it from now on";
  return key ? (OPTION_WORDS[key] || words(key)) : "?";
}

function approvalWhat(r) {
  const what = REQUEST_WHAT[r.request_type] || "do something that needs your permission";
  return `The agent asks to ${what}` + (r.tool_name ? ` (${toolName(r.tool_name)})` : "");
}

const RENDER = {
  user: (r) => {
    const block = el("div", "msg user");
    block.append(el("div", "who", "user"), el("div", "body", r.content || ""));
    append(block);
  },
  text: (r) => streamText(r, "text"),
  reasoning: (r) => streamText(r, "reasoning"),

  tool_use: (r) => {
    const card = toolCard(r.tool_use_id, r.name, r.parent_tool_use_id);
    card.querySelector(".tool-name").textContent = toolName(r.name);
    const output = card.querySelector(".tool-output");
    // shown_command: the command without its shell wrapper (the server unwraps it)
    const command = typeof r.shown_command === "string" ? r.shown_command : commandOf(r.input);
    const changed = typeof r.diff === "string" && r.diff;
    const subject = command === null && !changed ? subjectOf(r.input) : null;
    if (command !== null) {
      card.insertBefore(el("pre", "tool-command", "$ " + command), output);
    } else if (subject !== null) {
      card.insertBefore(el("div", "tool-subject", subject), output);
    }
    if (r.input !== null && r.input !== undefined && command === null && !changed) {
      const input = el("details", "tool-input");
      input.append(el("summary", "", "input"), el("pre", "", JSON.stringify(r.input, null, 2)));
      card.insertBefore(input, output);
    }
    showChange(card, r.paths, r.diff);
    if (current.denied.has(r.tool_use_id)) markDenied(card);
  },

  tool_result: (r) => {
    const card = toolCard(r.tool_use_id, null, r.parent_tool_use_id);
    const content = r.content || "";
    const lines = content ? content.replace(/\n$/, "").split("\n").length : 0;
    const denied = card.classList.contains("denied");
    card.classList.toggle("failed", !!r.is_error && !denied);
    card.classList.add("finished");
    if (!denied) showChange(card, r.paths, r.diff); // what was done, against the file
    const status = card.querySelector(".tool-status");
    if (!denied) status.textContent = r.is_error ? "error" : "ok";
    const output = card.querySelector(".tool-output");
    output.querySelector("summary").textContent = r.is_error
      ? `error output · ${lines} line(s)`
      : (lines ? `output · ${lines} line(s)` : "output · empty");
    output.querySelector(".output-text").textContent = content || "(no output)";
  },

  approval: (r) => {
    const key = "approval:" + r.request_id;
    let card = current.items.get(key);
    if (r.state === "opened" || !card) {
      card = card || el("div", "approval");
      card.dataset.requestId = r.request_id;
      card.replaceChildren(el("div", "approval-title",
        r.state === "opened" ? "Approval needed" : "Approval"));
      card.append(el("div", "approval-what", approvalWhat(r)));
      const detail = r.shown_command || r.detail;
      if (detail) card.append(el("pre", "approval-detail", detail));
      if (Array.isArray(r.options) && r.options.length) {
        card.append(el("div", "approval-options",
          "Choices: " + r.options.map(optionLabel).join(" · ")));
      }
      // the approval reads before the tool call it gates
      const tool = r.tool_use_id ? current.items.get("tool:" + r.tool_use_id) : null;
      if (!card.isConnected) append(card, null, tool);
      current.items.set(key, card);
      if (r.tool_use_id) {
        card.dataset.toolUseId = r.tool_use_id;
        if (tool && r.state === "opened" && !tool.classList.contains("finished")) {
          tool.classList.add("awaiting");
          tool.querySelector(".tool-status").textContent = "waiting for approval";
        }
      }
    }
    if (r.state === "opened") {
      card.classList.add("pending");
      card.classList.remove("resolved");
      return;
    }
    card.classList.remove("pending");
    card.classList.add("resolved");
    const outcome = OUTCOME[r.outcome];
    const title = card.querySelector(".approval-title");
    title.textContent = outcome ? outcome.label : "Answered";
    if (r.decision) title.title = `the runtime's answer: ${r.decision}`;
    card.classList.add(outcome ? (outcome.allowed ? "allowed" : "denied") : "unknown");
    const toolId = card.dataset.toolUseId;
    const tool = toolId ? current.items.get("tool:" + toolId) : null;
    if (tool && tool.classList.contains("awaiting")) {
      tool.classList.remove("awaiting");
      if (!tool.classList.contains("finished")) {
        tool.querySelector(".tool-status").textContent = "running…";
      }
    }
    if (outcome && !outcome.allowed && toolId) {
      current.denied.add(toolId);
      if (tool) markDenied(tool);
    }
  },

  question: (r) => {
    const key = "question:" + r.request_id;
    let card = current.items.get(key);
    if (!card) {
      card = el("div", "question");
      card.dataset.requestId = r.request_id;
      card.append(el("div", "approval-title", "Question for you"));
      append(card);
      current.items.set(key, card);
    }
    if (r.state === "asked") {
      card.classList.add("pending");
      card.append(el("pre", "question-body", JSON.stringify(r.questions, null, 2)));
    } else {
      card.classList.remove("pending");
      card.classList.add("resolved");
      if (r.outcome && r.outcome !== "answered") card.classList.add("denied");
      card.querySelector(".approval-title").textContent = r.outcome === "declined"
        ? "Question declined" : (r.outcome === "cancelled" ? "Question cancelled" : "Answered");
      if (r.answers !== null && r.answers !== undefined) {
        card.append(el("pre", "question-answer", JSON.stringify(r.answers, null, 2)));
      }
    }
  },

  error: (r) => {
    // the same error again (a runtime that reports it twice) is shown once
    const key = [r.turn_id, r.error_class, String(r.message || "").trim()].join("|");
    const seen = current.errors.get(key);
    if (seen) {
      seen.dataset.count = String(Number(seen.dataset.count) + 1);
      return;
    }
    const card = el("div", r.will_retry ? "error retrying" : "error");
    card.dataset.count = "1";
    const kind = r.error_class ? words(r.error_class) : "error";
    const title = (r.will_retry ? "Retrying after a " : "") + kind;
    card.append(el("div", "error-title", title.charAt(0).toUpperCase() + title.slice(1)),
      el("pre", "error-message", r.message));
    append(card);
    current.errors.set(key, card);
  },

  done: (r) => {
    const card = el("div", r.is_error ? "final failed" : "final");
    card.dataset.subtype = r.subtype;
    const text = (r.final_text || r.result || "").trim();
    const last = current.lastText;
    // the final answer is the assistant's last message: marked there, not repeated
    const shown = text && last && last.turn === r.turn_id && last.raw.trim() === text;
    const repeatsError = text && [...current.errors.keys()].some(
      (k) => k.startsWith(r.turn_id + "|") && k.endsWith("|" + text));
    let title = r.is_error ? "Turn failed" : "Done";
    if (r.subtype === "interrupted" || r.subtype === "cancelled") title = "Turn " + r.subtype;
    card.append(el("div", "final-title", title));
    if (r.turn_id) {
      card.dataset.turnId = r.turn_id;
      current.items.set("done:" + r.turn_id, card);
    }
    if (shown) {
      last.block.classList.add("final-answer");
      last.block.querySelector(".who").textContent = "final answer";
    } else if (text && !repeatsError) {
      const body = el("div", "final-text md");
      body.append(renderMarkdown(text));
      card.append(body);
    }
    append(card);
    current.lastText = null;
    pollTimings(); // the turn's figures
  },
};

// ---- start --------------------------------------------------------------------

document.getElementById("back").addEventListener("click", closeSession);
{
  let timer = null;
  document.getElementById("search").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(runSearch, 200);
  });
  for (const key of ["runtime", "model", "state"]) {
    const select = document.getElementById("filter-" + key);
    select.addEventListener("change", () => { filters[key] = select.value; scheduleList(); });
  }
  for (const c of document.querySelectorAll(".counter[data-filter]")) {
    c.addEventListener("click", () => {
      const state = filters.state === c.dataset.filter ? "" : c.dataset.filter;
      filters.state = state;
      document.getElementById("filter-state").value = state;
      scheduleList();
    });
  }
}
connectList();
showConn();
pollStatus();
pollFleet();
setInterval(pollStatus, 2000);
setInterval(pollFleet, 2000);
setInterval(pollTimings, 2000);
{
  const m = /^#session=(.+)$/.exec(location.hash);
  if (m) openSession(decodeURIComponent(m[1]));
}
