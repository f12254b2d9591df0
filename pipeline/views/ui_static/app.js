// canonflow live chat view: plain JS, no build step, no dependencies.
//
// Two Server-Sent Event streams: /events (the session list: a full snapshot, then
// one summary per change) and /events?session=ID (the session's chat records, oldest
// first, then live). A dropped stream reconnects by itself; the browser sends
// Last-Event-ID (the last seq it got) and the server sends only what was missed.
// Every piece of record text goes into the page through textContent, never as HTML.
"use strict";

const STATE_LABEL = {
  working: "working",
  waiting_approval: "waiting for approval",
  waiting_answer: "waiting for answer",
  done: "done",
  failed: "failed",
};

const sessions = new Map(); // session_id -> summary from the server
let current = null; // {id, source, items: Map(key -> element), nextSeq}
let listDirty = false;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
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
  node.textContent = STATE_LABEL[state] || state;
}

// ---- the session list ---------------------------------------------------------

let streamUp = false;
let brokerError = null; // null: the server reads agents.chat; else why it cannot

function showConn() {
  const conn = document.getElementById("conn");
  if (!streamUp) {
    conn.dataset.conn = "down";
    conn.textContent = "reconnecting…";
    conn.title = "the page lost its connection to canonflow ui";
  } else if (brokerError) {
    conn.dataset.conn = "broker";
    conn.textContent = brokerError === "connecting" ? "connecting to the broker…" : "broker unreachable";
    conn.title = brokerError;
  } else {
    conn.dataset.conn = "live";
    conn.textContent = "live";
    conn.title = "following agents.chat";
  }
}

async function pollStatus() {
  try {
    const status = await (await fetch("/api/status")).json();
    brokerError = status.consumer.connected ? null : (status.consumer.error || "connecting");
  } catch (e) {
    brokerError = null; // the stream's own state says the server is away
  }
  showConn();
}

function connectList() {
  const source = new EventSource("/events");
  source.onopen = () => { streamUp = true; showConn(); };
  source.onerror = () => { streamUp = false; showConn(); };
  source.addEventListener("sessions", (e) => {
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

function renderList() {
  const list = document.getElementById("sessions");
  const sorted = [...sessions.values()].sort((a, b) => b.last_activity - a.last_activity);
  list.replaceChildren(...sorted.map(sessionItem));
  document.getElementById("session-count").textContent = String(sorted.length);
  document.getElementById("no-sessions").hidden = sorted.length > 0;
  renderHeader();
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
  stateBadge(badge, s.state);
  const when = el("span", "ago", ago(s.last_activity));
  when.dataset.ts = String(s.last_activity);
  bottom.append(badge, when);
  button.append(top, bottom);
  if (s.preview) button.append(el("div", "preview", s.preview));
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
  current = { id, source: null, items: new Map(), nextSeq: 1 };
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
    if (current === mine) chat.dataset.ready = "true";
  });
  renderList();
}

function nearBottom() {
  const doc = document.scrollingElement || document.documentElement;
  const chat = document.getElementById("chat");
  return chat.scrollHeight - chat.scrollTop - chat.clientHeight < 80
    || doc.scrollHeight - doc.scrollTop - doc.clientHeight < 80;
}

function append(node, parentToolUseId) {
  const chat = document.getElementById("chat");
  const follow = nearBottom();
  if (parentToolUseId) {
    node.classList.add("nested");
    node.title = "inside tool call " + parentToolUseId;
  }
  chat.append(node);
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

function streamText(r, kind) {
  const key = `${kind}:${r.item_id || r.turn_id || "-"}`;
  let block = current.items.get(key);
  if (!block) {
    if (kind === "text") {
      block = el("div", "msg assistant");
      block.append(el("div", "who", "assistant"), el("div", "body"));
    } else {
      block = el("details", "msg reasoning");
      block.open = true;
      block.append(el("summary", "who", "thinking"), el("div", "body"));
    }
    append(block, r.parent_tool_use_id);
    current.items.set(key, block);
  }
  const body = block.querySelector(".body");
  let text = body.textContent + (r.content || "");
  // accumulated is the whole text so far: it repairs a message whose start was dropped
  if (r.accumulated && r.accumulated !== text) text = r.accumulated;
  body.textContent = text;
}

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
  head.append(el("span", "tool-name", name || "tool"), el("span", "tool-status", "running…"));
  card.append(head);
  const output = el("details", "tool-output");
  output.append(el("summary", "", "output (pending)"), el("pre", "output-text"));
  card.append(output);
  append(card, parentToolUseId);
  current.items.set("tool:" + toolUseId, card);
  return card;
}

// Runtimes describe approval options differently: plain strings (codex, opencode),
// {name, kind} (ACP), {type, mode|behavior} (Claude suggestions), {variant: {...}}.
function optionLabel(o) {
  if (typeof o === "string") return o;
  if (!o || typeof o !== "object") return String(o);
  if (typeof o.name === "string") return o.name;
  if (typeof o.type === "string") {
    const extra = o.mode || o.behavior;
    return extra ? `${o.type} (${extra})` : o.type;
  }
  return Object.keys(o)[0] || "?";
}

// A resolved approval's shared outcome (accept, accept_for_session, decline, cancel):
// allowed or not, whatever the runtime's own word (`decision`) was.
const ALLOWED = { accept: true, accept_for_session: true, decline: false, cancel: false };

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
    card.querySelector(".tool-name").textContent = r.name;
    const output = card.querySelector(".tool-output");
    const command = commandOf(r.input);
    const subject = command === null ? subjectOf(r.input) : null;
    if (command !== null) {
      card.insertBefore(el("pre", "tool-command", "$ " + command), output);
    } else if (subject !== null) {
      card.insertBefore(el("div", "tool-subject", subject), output);
    }
    if (r.input !== null && r.input !== undefined && command === null) {
      const input = el("details", "tool-input");
      input.append(el("summary", "", "input"), el("pre", "", JSON.stringify(r.input, null, 2)));
      card.insertBefore(input, output);
    }
  },

  tool_result: (r) => {
    const card = toolCard(r.tool_use_id, null, r.parent_tool_use_id);
    const content = r.content || "";
    const lines = content ? content.replace(/\n$/, "").split("\n").length : 0;
    card.classList.toggle("failed", !!r.is_error);
    card.classList.add("finished");
    const status = card.querySelector(".tool-status");
    status.textContent = r.is_error ? "error" : "ok";
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
      const what = [r.request_type, r.tool_name].filter(Boolean).join(" · ");
      if (what) card.append(el("div", "approval-what", what));
      if (r.detail) card.append(el("pre", "approval-detail", r.detail));
      if (Array.isArray(r.options) && r.options.length) {
        const opts = r.options.map(optionLabel);
        card.append(el("div", "approval-options", "options: " + opts.join(", ")));
      }
      if (!card.isConnected) append(card);
      current.items.set(key, card);
      if (r.tool_use_id) {
        card.dataset.toolUseId = r.tool_use_id;
        const tool = current.items.get("tool:" + r.tool_use_id);
        if (tool) tool.classList.add("awaiting");
      }
    }
    if (r.state === "opened") {
      card.classList.add("pending");
      card.classList.remove("resolved");
    } else {
      card.classList.remove("pending");
      card.classList.add("resolved");
      const allowed = ALLOWED[r.outcome];
      card.querySelector(".approval-title").textContent = allowed === undefined
        ? "Approval resolved" : (allowed ? "Approval allowed" : "Approval denied");
      if (allowed === false) card.classList.add("denied");
      const said = r.outcome || r.decision || "?";
      const native = r.decision && r.decision !== said ? ` (${r.decision})` : "";
      card.append(el("div", "approval-decision", "decision: " + said + native));
      const tool = current.items.get("tool:" + card.dataset.toolUseId);
      if (tool) tool.classList.remove("awaiting");
    }
  },

  question: (r) => {
    const key = "question:" + r.request_id;
    let card = current.items.get(key);
    if (!card) {
      card = el("div", "question");
      card.dataset.requestId = r.request_id;
      card.append(el("div", "approval-title", "Question for the user"));
      append(card);
      current.items.set(key, card);
    }
    if (r.state === "asked") {
      card.classList.add("pending");
      card.append(el("pre", "question-body", JSON.stringify(r.questions, null, 2)));
    } else {
      card.classList.remove("pending");
      card.classList.add("resolved");
      card.append(el("pre", "question-answer", "answer: " + JSON.stringify(r.answers, null, 2)));
    }
  },

  error: (r) => {
    const card = el("div", "error");
    const title = "Error" + (r.error_class ? ` (${r.error_class})` : "")
      + (r.will_retry ? " · retrying" : "");
    card.append(el("div", "error-title", title), el("pre", "error-message", r.message));
    append(card);
  },

  done: (r) => {
    const card = el("div", r.is_error ? "final failed" : "final");
    card.dataset.subtype = r.subtype;
    card.append(el("div", "final-title",
      (r.is_error ? "Turn failed" : "Final answer") + (r.subtype ? ` · ${r.subtype}` : "")));
    const text = r.final_text || r.result;
    if (text) card.append(el("div", "final-text", text));
    append(card);
  },
};

// ---- start --------------------------------------------------------------------

connectList();
pollStatus();
setInterval(pollStatus, 5000);
{
  const m = /^#session=(.+)$/.exec(location.hash);
  if (m) openSession(decodeURIComponent(m[1]));
}
