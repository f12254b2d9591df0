"""acp: a tool call's announcements merged, and its long content.

`tool_call_update` fields are all optional, and an absent or null field keeps the
earlier value (`content` and `locations` replace the whole list).

* A tool's output is its text content, else the output of the client terminal
  embedded in it, else `rawOutput` (a string, text blocks, or a codex exec record
  whose `aggregated_output` is the output) or claude's `_meta.claudeCode.toolResponse`
  (the PostToolUse hook's result: text, or a Bash record's stdout and stderr), else a
  summary of its diffs; the exit code is rawOutput's or `_meta.terminal_exit`'s.
* What a call is, never its output: text content that only describes it goes to the
  items' `detail`. That is the text of a `tool_call` that does not finish the call
  (claude-code-acp sends the command's description so), and the text of a
  `tool_call_update` that does not finish it when the text is one of the input's own
  strings (claude-agent-acp sends the full input with the command's `description`, a
  sub-agent's or a fetch's `prompt`, as content before the call runs, and a command
  with no output then gets no new content: its output is the empty rawOutput).

Streams (the conversation core's, adapters.core.emitter.Emitter; the state keeps none
of the text): a tool item's long content is spooled because the payloads read it back
(the completion's output above all) while the runtime sends it once, or as snapshots
that replace each other (never deltas): each announcement's value re-bases its stream
(reset; appended to when it only extends it), an absent value closes it. `text` (text
content: the output), `terminal` (the client terminal's output), `raw_text` (the output
read from rawOutput or toolResponse), `raw_output` (rawOutput when it is a record, as
JSON: the completion's data.rawOutput), `description` (every payload's detail),
`diff_old` and `diff_new` (the first diff's texts: the input of an Edit or Write
without rawInput), `diff` (every diff block as one unified diff: the payloads'
normalised `diff`, computed once per content list received).
"""

from __future__ import annotations

from typing import Any

import msgspec

from adapters.acp.envelope import as_str, native_agent
from adapters.acp.state import Diff, Tool
from adapters.core.diff import text_diff
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.spool import Whole

PATH_KEYS = ("file_path", "path", "absolute_path", "filePath", "notebook_path")


class Content:
    """A tool call's long content (module docstring, "Streams") as its payloads read it:
    the item's spooled streams, or `given` ones (an announcement not stored)."""

    __slots__ = ("out", "item", "given")

    def __init__(self, out: Emitter, key: str, given: dict[str, str | None] | None = None):
        self.out = out
        self.item = out.id("itm", key)
        self.given = given

    def get(self, stream: str) -> Whole | None:
        if self.given is None:
            return self.out.whole(self.item, stream)
        text = self.given.get(stream)
        return None if text is None else Whole(text, len(text), False)

    def has(self, stream: str) -> bool:
        if self.given is None:
            return self.out.streamed(self.item, stream) >= 0
        return self.given.get(stream) is not None


def save(out: Emitter, key: str, streams: dict[str, str | None]) -> None:
    """Keep an announcement's content in the tool item's streams. Each value replaces the
    last (ACP re-sends a tool's content whole, never as deltas): appended when it only
    extends what the stream holds (a growing terminal output), re-based otherwise; None
    (absent) closes the stream."""
    item = out.id("itm", key)
    for stream, text in streams.items():
        if text is None:
            out.drop(item, stream)
        elif out.extends(item, stream, text):
            out.append(item, stream, text[max(out.streamed(item, stream), 0):])
        else:
            out.reset(item, stream, text)


_encode_json = msgspec.json.Encoder().encode


def _raw_output_text(raw: Any) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        texts = [b.get("text") for b in raw if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "".join(texts) if texts else None  # type: ignore[arg-type]
    if isinstance(raw, dict):
        # codex-acp: the exec record; aggregated_output is stdout and stderr, whole
        for k in ("aggregated_output", "formatted_output", "output", "stdout", "content", "text",
                  "result"):
            if isinstance(raw.get(k), str):
                return raw[k]  # type: ignore[no-any-return]
    return None


def _raw_exit_code(raw: Any) -> int | None:
    if isinstance(raw, dict):
        for k in ("exit_code", "exitCode"):
            if isinstance(raw.get(k), int) and not isinstance(raw.get(k), bool):
                return raw[k]  # type: ignore[no-any-return]
    return None


def _diff_text(blocks: list[tuple[str, Any, Any]]) -> str | None:
    """One unified diff of a content list's diff blocks (path, oldText, newText)."""
    text = "".join(text_diff(path, old if isinstance(old, str) else None,
                             new if isinstance(new, str) else "", excerpt=isinstance(old, str))
                   for path, old, new in blocks)
    return text or None


def merge(tool: Tool, fields: dict[str, Any], text_as: str | None = "text"
           ) -> tuple[Tool, dict[str, str | None]]:
    """Apply a ToolCall / ToolCallUpdate: absent or null fields keep their value. Returns
    the tool and the new values of its content streams (for save; None closes one).

    `text_as` says what text content is: the output ("text": an announcement that
    finishes the call), a description of the call ("description": a `tool_call` that
    does not finish it, like claude-code-acp's command description), either ("update":
    a `tool_call_update` that does not finish the call says what it is running, as
    claude-agent-acp's description of a command, when its text is one of the input's
    own strings, and its output so far otherwise), or nothing to keep (None: a
    permission request's text describes the request, e.g. codex-acp's "Proposed
    Amendment: ...").
    """
    changes: dict[str, Any] = {}
    streams: dict[str, str | None] = {}
    meta = fields.get("_meta")
    claude = meta.get("claudeCode") if isinstance(meta, dict) else None
    name = as_str(fields.get("name")) or (as_str(claude.get("toolName")) if isinstance(claude, dict) else None)
    if name:
        changes["name"] = name
    agent = native_agent(fields)  # a subagent's call (later updates may not say it)
    if agent is not None:
        changes["agent"] = agent
    for k in ("kind", "title", "status"):
        if isinstance(fields.get(k), str):
            changes[k] = fields[k]
    raw = fields.get("rawInput")
    if raw is not None and (raw != {} or tool.rawInput is None):  # `{}` is claude's placeholder
        changes["rawInput"] = raw
    raw_output = fields.get("rawOutput")
    if raw_output is not None:
        changes["rawExit"] = _raw_exit_code(raw_output)
        streams["raw_text"] = _raw_output_text(raw_output)
        streams["raw_output"] = (_encode_json(raw_output).decode()
                                 if isinstance(raw_output, dict) else None)
    elif isinstance(claude, dict):  # claude's PostToolUse hook: the tool's own result
        response = _response_text(claude.get("toolResponse"))
        if response is not None:
            streams["raw_text"] = response
    exit_code = _terminal_exit_code(meta)
    if exit_code is not None:
        changes["exitCode"] = exit_code
    paths = list(tool.paths)
    if isinstance(fields.get("locations"), list):
        paths = [loc["path"] for loc in fields["locations"]
                 if isinstance(loc, dict) and isinstance(loc.get("path"), str)]
    content = fields.get("content")
    if isinstance(content, list):
        texts: list[str] = []
        diffs: list[Diff] = []
        blocks: list[tuple[str, Any, Any]] = []  # every diff's path and texts
        first: tuple[Any, Any] = (None, None)  # the first diff's texts
        for c in content:
            if not isinstance(c, dict):
                continue
            if c.get("type") == "content":
                block = c.get("content")
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    texts.append(block["text"])
            elif c.get("type") == "diff" and isinstance(c.get("path"), str):
                old, new = c.get("oldText"), c.get("newText")
                if not diffs:
                    first = (old, new)
                diffs.append(Diff(path=c["path"],
                                  old=len(old.splitlines()) if isinstance(old, str) else None,
                                  new=len(new.splitlines()) if isinstance(new, str) else 0))
                blocks.append((c["path"], old, new))
                paths.append(c["path"])
        text = "\n".join(texts) if texts else None
        if text_as == "update":
            given_input = changes.get("rawInput", tool.rawInput)
            text_as = "description" if text is not None and _echoes(text, given_input) else "text"
            if text_as == "description":
                streams["text"] = None  # the content list was replaced: no output in it
        if text_as is not None:
            streams[text_as] = text
        changes["diffs"] = diffs
        # (a text that is not a string, against the schema, counts as absent)
        streams["diff_old"], streams["diff_new"] = as_str(first[0]), as_str(first[1])
        # computed once per content list the agent sends, read back by every payload
        streams["diff"] = _diff_text(blocks)
    given = changes.get("rawInput", tool.rawInput)
    if isinstance(given, dict):
        paths.extend(given[k] for k in PATH_KEYS if isinstance(given.get(k), str))
    changes["paths"] = list(dict.fromkeys(paths))
    return _replace(tool, **changes), streams


def _echoes(text: str, raw_input: Any) -> bool:
    """Is `text` one of the call's input strings (a description or prompt shown as the
    call's content, never its output)?"""
    return isinstance(raw_input, dict) and any(v == text for v in raw_input.values())


def _response_text(response: Any) -> str | None:
    """The output in claude's `_meta.claudeCode.toolResponse`: text, text blocks, or a
    Bash result's stdout and stderr (nothing of the other tools' records, which hold
    whole files)."""
    if isinstance(response, (str, list)):
        return _raw_output_text(response)
    if isinstance(response, dict) and isinstance(response.get("stdout"), str):
        err = as_str(response.get("stderr")) or ""
        return "\n".join(s for s in (response["stdout"], err) if s)
    return None


def _terminal_exit_code(meta: Any) -> int | None:
    """The exit code in the `_meta.terminal_exit` extension (claude-agent-acp and
    codex-acp, to clients that display terminal output themselves)."""
    end = meta.get("terminal_exit") if isinstance(meta, dict) else None
    code = end.get("exit_code") if isinstance(end, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def terminal_ids(fields: dict[str, Any]) -> list[str]:
    content = fields.get("content")
    if not isinstance(content, list):
        return []
    return [c["terminalId"] for c in content if isinstance(c, dict) and c.get("type") == "terminal"
            and isinstance(c.get("terminalId"), str)]
