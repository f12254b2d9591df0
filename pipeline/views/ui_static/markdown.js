// A small, safe Markdown renderer for the chat's assistant text: no dependencies.
//
// It builds DOM nodes with createElement and textContent only, never innerHTML, so
// whatever a record holds (HTML tags included) is shown as text and cannot run in the
// page. What it knows is what assistants write: paragraphs (a single newline is a line
// break), headings, fenced code blocks, block quotes, bullet and numbered lists,
// tables, rules; inline code, bold, italic, strikethrough, links (http, https and
// mailto only; others stay text) and bare URLs. Text that is not Markdown comes out as
// written. An unclosed fence (text still streaming in) is a code block to the end.
"use strict";

const MD_FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const MD_HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const MD_RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const MD_QUOTE = /^ {0,3}> ?(.*)$/;
const MD_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const MD_TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
const MD_INLINE = new RegExp([
  "(`+)([^`]|[^`][\\s\\S]*?[^`])\\1(?!`)",            // 1, 2: code span
  "\\[([^\\]\\n]+)\\]\\(([^)\\s]+)(?:\\s+\"[^\"\\n]*\")?\\)", // 3, 4: link
  "\\*\\*(?=\\S)([\\s\\S]*?\\S)\\*\\*",               // 5: bold
  "__(?=\\S)([\\s\\S]*?\\S)__(?!\\w)",                // 6: bold
  "~~(?=\\S)([\\s\\S]*?\\S)~~",                       // 7: strikethrough
  "\\*(?=[^\\s*])([^*\\n]*?[^\\s*])\\*(?!\\*)",       // 8: italic
  "(?<![\\w])_(?=[^\\s_])([^_\\n]*?[^\\s_])_(?!\\w)", // 9: italic
  "(https?://[^\\s<>()\\[\\]]*[^\\s<>()\\[\\].,;:!?'\"*_~])", // 10: bare URL
].join("|"), "g");

function mdSafeHref(href) {
  try {
    const url = new URL(href, "https://invalid.invalid/");
    if (url.origin === "https://invalid.invalid") return null; // relative: not ours to open
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch (e) {
    return null;
  }
}

function mdInline(text, parent) {
  let last = 0;
  const re = new RegExp(MD_INLINE); // its own lastIndex: this function recurses
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    last = re.lastIndex;
    let node;
    if (m[2] !== undefined) {
      node = document.createElement("code");
      node.textContent = m[2];
    } else if (m[3] !== undefined) {
      const href = mdSafeHref(m[4]);
      if (!href) { parent.append(document.createTextNode(m[0])); continue; }
      node = mdLink(href);
      mdInline(m[3], node);
    } else if (m[5] !== undefined || m[6] !== undefined) {
      node = document.createElement("strong");
      mdInline(m[5] ?? m[6], node);
    } else if (m[7] !== undefined) {
      node = document.createElement("del");
      mdInline(m[7], node);
    } else if (m[8] !== undefined || m[9] !== undefined) {
      node = document.createElement("em");
      mdInline(m[8] ?? m[9], node);
    } else {
      const href = mdSafeHref(m[10]);
      if (!href) { parent.append(document.createTextNode(m[0])); continue; }
      node = mdLink(href);
      node.textContent = m[10];
    }
    parent.append(node);
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

function mdLink(href) {
  const a = document.createElement("a");
  a.href = href;
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  return a;
}

// Inline text whose single newlines are line breaks.
function mdLines(lines, parent) {
  lines.forEach((line, i) => {
    if (i) parent.append(document.createElement("br"));
    mdInline(line, parent);
  });
}

function mdCells(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function mdBlocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) { i++; continue; }
    if ((m = MD_FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence); i++) body.push(lines[i]);
      i++; // the closing fence (or the end)
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      if (m[2]) pre.dataset.lang = m[2];
      code.textContent = body.join("\n");
      pre.append(code);
      parent.append(pre);
      continue;
    }
    if ((m = MD_HEADING.exec(line))) {
      const h = document.createElement("h" + Math.min(m[1].length + 2, 6));
      mdInline(m[2], h);
      parent.append(h);
      i++;
      continue;
    }
    if (MD_RULE.test(line)) {
      parent.append(document.createElement("hr"));
      i++;
      continue;
    }
    if (MD_QUOTE.test(line)) {
      const inner = [];
      for (; i < lines.length && (m = MD_QUOTE.exec(lines[i])); i++) inner.push(m[1]);
      const quote = document.createElement("blockquote");
      mdBlocks(inner, quote);
      parent.append(quote);
      continue;
    }
    if ((m = MD_ITEM.exec(line))) {
      i = mdList(lines, i, parent);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && MD_TABLE_RULE.test(lines[i + 1])
        && lines[i + 1].includes("-")) {
      const table = document.createElement("table");
      const head = table.createTHead().insertRow();
      for (const c of mdCells(line)) { const th = document.createElement("th"); mdInline(c, th); head.append(th); }
      const body = table.createTBody();
      for (i += 2; i < lines.length && lines[i].includes("|") && lines[i].trim(); i++) {
        const row = body.insertRow();
        for (const c of mdCells(lines[i])) mdInline(c, row.insertCell());
      }
      const wrap = document.createElement("div");
      wrap.className = "md-table";
      wrap.append(table);
      parent.append(wrap);
      continue;
    }
    const para = [];
    for (; i < lines.length && lines[i].trim() && !MD_FENCE.test(lines[i])
         && !MD_HEADING.test(lines[i]) && !MD_QUOTE.test(lines[i])
         && !(para.length && MD_ITEM.test(lines[i])); i++) {
      para.push(lines[i]);
    }
    const p = document.createElement("p");
    mdLines(para, p);
    parent.append(p);
  }
}

// A list from lines[i]: its items (continuation lines joined), deeper-indented items
// as a nested list. Returns the index after it.
function mdList(lines, i, parent) {
  const first = MD_ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const list = document.createElement(ordered ? "ol" : "ul");
  if (ordered && parseInt(first[2], 10) !== 1) list.start = parseInt(first[2], 10);
  let item = null;
  let text = [];
  const flush = () => { if (item) { mdLines(text, item.firstChild); } };
  while (i < lines.length) {
    const m = MD_ITEM.exec(lines[i]);
    if (m && m[1].length > indent && item) {
      flush();
      text = [];
      i = mdList(lines, i, item);
      continue;
    }
    if (m && m[1].length === indent && /\d/.test(m[2]) === ordered) {
      flush();
      item = document.createElement("li");
      item.append(document.createElement("span"));
      list.append(item);
      text = [m[3]];
      i++;
      continue;
    }
    if (!m && item && lines[i].trim() && /^\s+/.test(lines[i])) {
      text.push(lines[i].trim());
      i++;
      continue;
    }
    break;
  }
  flush();
  parent.append(list);
  return i;
}

// The rendered Markdown of `text`, as a DocumentFragment.
function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  mdBlocks(String(text).replace(/\r\n?/g, "\n").split("\n"), fragment);
  return fragment;
}
