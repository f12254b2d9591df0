"""The long sessions of `canonflow bench --long` (pipeline.tools.bench_long), made from
real captures.

A long session is a real captured conversation (tests/fixtures/captured) whose final
assistant answer and whose shell command output were made long (64 KiB, 1 MiB, 8 MiB),
streamed one native message per record the way the runtime streams them:

* the answer gets more text deltas of 1 KiB (codex `item/agentMessage/delta`, claude
  `stream_event` text_delta, opencode `message.part.delta`, acp `agent_message_chunk`)
  until it reaches the size; the runtime's whole texts (codex `item/completed` and
  `turn/completed`, claude's `assistant` message and `result`, opencode's closing
  `message.part.updated`) are patched to match, so the translation stays consistent;
* the command output: where the runtime streams it (codex
  `item/commandExecution/outputDelta`) as 1 KiB deltas, then `item/completed` with
  `aggregatedOutput`; elsewhere whole in the completing message (claude's tool_result,
  opencode's completed tool part, acp's `tool_call_update` rawOutput).

No native record may exceed 1 MiB: the worker dead-letters a larger one untranslated
(CANONFLOW_MAX_RECORD_BYTES, by design), and the raw topics refuse them. So a message
that carries a text or an output whole carries at most WHOLE_MAX (512 KiB) of it, less
when the runtime repeats it within the message (claude: tool_result and stdout; acp:
stdout, aggregated_output, formatted_output), to fit RECORD_BUDGET:

* an answer longer than WHOLE_MAX is streamed as consecutive text items of at most
  WHOLE_MAX each (codex agentMessage items of one turn, claude text blocks of one
  message, opencode text parts of one message); acp never sends text whole, so its
  answer is one item of the full size;
* a streamed output longer than WHOLE_MAX completes with `aggregatedOutput: null` (the
  protocol allows it; the translator then completes the item from its deltas);
* a whole output is cut to what fits (the report says how long it was).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from adapters import Line
from pipeline.tools.bench_kafka import BenchError
from pipeline.tools.replay import parse_line

#: The conversation each provider's long session is made from: a text answer after a
#: shell command, as the runtime streamed it (one of each provider's captures).
CAPTURES: dict[str, str] = {
    "codex": "codex/codex-app-server__tool_shell.capture.jsonl",
    "claude": "claude/claude-code-stream-json-partial__tool_shell.capture.jsonl",
    "opencode": "opencode/opencode-serve__tool_shell.capture.jsonl",
    "acp": "acp/acp-codex__tool_shell_allow.capture.jsonl",
}
#: Bytes per added text or output delta.
CHUNK = 1024
#: The most of a text or an output one native message carries whole.
WHOLE_MAX = 512 * 1024
#: The most one native record may hold here: below the worker's max_record_bytes
#: (1 MiB) and the producer's max request, with room for the record's overhead.
RECORD_BUDGET = 1024 * 1024 - 4096
#: OpenCode keeps at most this many characters of a running command's live output in
#: the tool part's `metadata.output` (then "..."), the completed part included.
OPENCODE_METADATA_MAX = 30_000
_T0 = 1_764_000_000_000


def size_label(n: int) -> str:
    return f"{n // 2**20}m" if n % 2**20 == 0 else f"{n // 1024}k" if n % 1024 == 0 else f"{n}b"


class LongSession(msgspec.Struct):
    provider: str
    session_id: str
    size: int
    lines: list[Line]
    #: the final answer as intended (all its items' text, in order) and its items
    answer: str
    answer_items: int
    #: the command's output as the canonical item.completed must carry it
    output: str
    #: True: streamed in deltas (which then join to `output`); False: whole
    output_streamed: bool

    @property
    def native_bytes(self) -> int:
        return sum(len(ln.data) for ln in self.lines)


def _msgs(path: Path) -> list[tuple[str, Any]]:
    """(origin, message) per line of a capture: the message's original bytes."""
    out: list[tuple[str, Any]] = []
    for raw in path.read_bytes().splitlines():
        if raw.strip():
            line = parse_line(raw, "capture")
            out.append((line.origin, line.data))
    return out


def _dict(msg: Any) -> dict[str, Any]:
    return msg if isinstance(msg, dict) else json.loads(msg)


def _encode(msg: Any) -> bytes:
    if isinstance(msg, bytes):
        return msg
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode()


def _copy(msg: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(msg))


def _chunks(text: str, size: int = CHUNK) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _segments(answer: str) -> list[str]:
    """The items of an answer the runtime also sends whole: pieces of at most WHOLE_MAX."""
    return [answer[i:i + WHOLE_MAX] for i in range(0, len(answer), WHOLE_MAX)] or [""]


def _filler(kind: str, start: str, size: int) -> str:
    """`start` continued with plain lines to exactly `size` characters (ASCII)."""
    parts = [start]
    n, total = 0, len(start)
    while total < size:
        if kind == "answer":
            line = (f"{n:07d} The answer goes on with one more plain sentence about the "
                    f"change, its reasons and what to check next.\n")
        else:
            line = f"{n:08d} build: compiling module_{n % 997:03d}.c -> module_{n % 997:03d}.o ok\n"
        parts.append(line)
        total += len(line)
        n += 1
    return "".join(parts)[:size]


def _fit(build: Callable[[str], bytes], whole: str) -> str:
    """The longest start of `whole` (at most WHOLE_MAX) whose record `build` makes fits
    RECORD_BUDGET (the runtime may repeat it within the message)."""
    text = whole[:WHOLE_MAX]
    while True:
        size = len(build(text))
        if size <= RECORD_BUDGET:
            return text
        copies = max(1, round((size - len(build(""))) / max(1, len(text))))
        text = text[:len(text) - (size - RECORD_BUDGET + copies - 1) // copies - 1]


def _uid(session: str, n: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"canonflow-bench-long/{session}/{n}"))


def _codex(msgs: list[tuple[str, Any]], sid: str, size: int
           ) -> tuple[list[tuple[str, Any]], str, int, str, bool]:
    parsed = [(o, _dict(m)) for o, m in msgs]
    final = next(m for _, m in reversed(parsed) if m.get("method") == "turn/completed")
    answer_id = final["params"]["turn"]["items"][-1]["id"]
    command_id = next(m["params"]["item"]["id"] for _, m in parsed
                      if m.get("method") == "item/started"
                      and m["params"]["item"]["type"] == "commandExecution")
    streamed = "".join(m["params"]["delta"] for _, m in parsed
                       if m.get("method") == "item/agentMessage/delta"
                       and m["params"]["itemId"] == answer_id)
    answer = _filler("answer", streamed, size)
    segments = _segments(answer)
    completed = next(m for _, m in parsed if m.get("method") == "item/completed"
                     and m["params"]["item"]["id"] == command_id)
    output = _filler("output", completed["params"]["item"].get("aggregatedOutput") or "", size)
    ids = [answer_id] + [f"{answer_id}_{k}" for k in range(1, len(segments))]
    out: list[tuple[str, Any]] = []
    for (origin, raw), (_, m) in zip(msgs, parsed, strict=True):
        method = m.get("method")
        p: dict[str, Any] = m.get("params") or {}
        item: dict[str, Any] = p["item"] if isinstance(p.get("item"), dict) else {}
        if method == "item/started" and item.get("id") == command_id:
            out.append((origin, raw))
            for chunk in _chunks(output):
                out.append(("agent", {"method": "item/commandExecution/outputDelta", "params": {
                    "threadId": p["threadId"], "turnId": p["turnId"], "itemId": command_id,
                    "delta": chunk}, "emittedAtMs": m.get("emittedAtMs")}))
        elif method == "item/completed" and item.get("id") == command_id:
            msg = _copy(m)
            msg["params"]["item"]["aggregatedOutput"] = output if len(output) <= WHOLE_MAX else None
            out.append((origin, msg))
        elif method == "item/started" and item.get("id") == answer_id:
            started = m
            out.append((origin, raw))
        elif method == "item/agentMessage/delta" and p.get("itemId") == answer_id:
            delta = m
            out.append((origin, raw))
        elif method == "item/completed" and item.get("id") == answer_id:
            for k, (segment, item_id) in enumerate(zip(segments, ids, strict=True)):
                if k:
                    msg = _copy(started)
                    msg["params"]["item"]["id"] = item_id
                    out.append(("agent", msg))
                for chunk in _chunks(segment[len(streamed):] if k == 0 else segment):
                    msg = _copy(delta)
                    msg["params"].update(itemId=item_id, delta=chunk)
                    out.append(("agent", msg))
                msg = _copy(m)
                msg["params"]["item"].update(id=item_id, text=segment)
                out.append((origin, msg))
        elif method == "turn/completed":
            msg = _copy(m)
            msg["params"]["turn"]["items"][-1].update(id=ids[-1], text=segments[-1])
            out.append((origin, msg))
        else:
            out.append((origin, raw))
    return out, answer, len(segments), output, True


def _claude(msgs: list[tuple[str, Any]], sid: str, size: int
            ) -> tuple[list[tuple[str, Any]], str, int, str, bool]:
    parsed = [(o, _dict(m)) for o, m in msgs]
    answer_msg = next(m["message"]["id"] for _, m in reversed(parsed)
                      if m.get("type") == "assistant"
                      and m["message"]["content"][0].get("type") == "text")

    def of_answer(m: dict[str, Any], kind: str) -> bool:
        return (m.get("type") == "stream_event" and m.get("api_message_id") == answer_msg
                and m["event"]["type"] == kind)

    streamed = "".join(m["event"]["delta"]["text"] for _, m in parsed
                       if of_answer(m, "content_block_delta"))
    answer = _filler("answer", streamed, size)
    segments = _segments(answer)
    tool_result = next(m for _, m in parsed if m.get("type") == "user"
                       and isinstance(m.get("tool_use_result"), dict))
    original = tool_result["tool_use_result"]["stdout"]
    full = _filler("output", original, size)

    def user_line(text: str) -> dict[str, Any]:
        msg = _copy(tool_result)
        msg["message"]["content"][0]["content"] = text
        msg["tool_use_result"]["stdout"] = text
        return msg

    output = _fit(lambda t: _encode(user_line(t)), full)
    uid = iter(range(1 << 30))
    out: list[tuple[str, Any]] = []
    templates: dict[str, dict[str, Any]] = {}
    for (origin, raw), (_, m) in zip(msgs, parsed, strict=True):
        if m is tool_result:
            out.append((origin, user_line(output)))
        elif of_answer(m, "content_block_start"):
            templates["start"] = m
            out.append((origin, raw))
        elif of_answer(m, "content_block_delta"):
            templates["delta"] = m
            out.append((origin, raw))
        elif m.get("type") == "assistant" and m["message"]["id"] == answer_msg:
            templates["assistant"] = m
            for chunk in _chunks(segments[0][len(streamed):]):
                msg = _copy(templates["delta"])
                msg["event"]["delta"]["text"] = chunk
                msg["uuid"] = _uid(sid, next(uid))
                out.append(("agent", msg))
            msg = _copy(m)
            msg["message"]["content"][0]["text"] = segments[0]
            out.append((origin, msg))
        elif of_answer(m, "content_block_stop"):
            out.append((origin, raw))
            out += _claude_blocks(templates, m, segments[1:], sid, uid)
        elif m.get("type") == "result":
            msg = _copy(m)
            msg["result"] = segments[-1]
            out.append((origin, msg))
        else:
            out.append((origin, raw))
    return out, answer, len(segments), output, False


def _claude_blocks(templates: dict[str, dict[str, Any]], stop: dict[str, Any],
                   segments: list[str], sid: str, uid: Iterator[int]) -> list[tuple[str, Any]]:
    """The answer's further text blocks, in the same message, as Claude Code streams
    each block: start, deltas, the block's assistant line, stop."""
    out: list[tuple[str, Any]] = []
    for k, segment in enumerate(segments, 1):
        for kind, body in (("start", None), *(("delta", c) for c in _chunks(segment)),
                           ("assistant", segment), ("stop", None)):
            msg = _copy(templates[kind] if kind != "stop" else stop)
            if kind == "assistant":
                msg["message"]["content"][0]["text"] = body
            else:
                msg["event"]["index"] = k
                if kind == "delta":
                    msg["event"]["delta"]["text"] = body
            msg["uuid"] = _uid(sid, next(uid))
            out.append(("agent", msg))
    return out


def _opencode(msgs: list[tuple[str, Any]], sid: str, size: int
              ) -> tuple[list[tuple[str, Any]], str, int, str, bool]:
    parsed = [(o, _dict(m)) for o, m in msgs]

    def part(m: dict[str, Any]) -> dict[str, Any]:
        return (m.get("properties") or {}).get("part") or {}

    deltas = [m for _, m in parsed if m.get("type") == "message.part.delta"]
    answer_part = deltas[-1]["properties"]["partID"]
    streamed = "".join(m["properties"]["delta"] for m in deltas
                       if m["properties"]["partID"] == answer_part)
    answer = _filler("answer", streamed, size)
    segments = _segments(answer)
    done_tool = next(m for _, m in parsed if m.get("type") == "message.part.updated"
                     and part(m).get("type") == "tool"
                     and part(m)["state"]["status"] == "completed")
    full = _filler("output", done_tool["properties"]["part"]["state"]["output"], size)

    def tool_line(text: str) -> dict[str, Any]:
        msg = _copy(done_tool)
        state = msg["properties"]["part"]["state"]
        state["output"] = text
        state["metadata"]["output"] = (text if len(text) <= OPENCODE_METADATA_MAX
                                       else text[:OPENCODE_METADATA_MAX] + "\n\n...")
        return msg

    output = _fit(lambda t: _encode(tool_line(t)), full)
    ids = iter(range(1 << 30))
    out: list[tuple[str, Any]] = []
    opened: dict[str, Any] | None = None
    delta: dict[str, Any] | None = None
    for (origin, raw), (_, m) in zip(msgs, parsed, strict=True):
        kind = m.get("type")
        if m is done_tool:
            out.append((origin, tool_line(output)))
        elif kind == "message.part.updated" and part(m).get("id") == answer_part:
            if "end" not in (part(m).get("time") or {}):
                opened = m
                out.append((origin, raw))
                continue
            assert opened is not None and delta is not None
            out += _opencode_parts(origin, (opened, delta, m), answer_part, segments,
                                   len(streamed), ids)
        elif kind == "message.part.delta" and m["properties"]["partID"] == answer_part:
            delta = m
            out.append((origin, raw))
        else:
            out.append((origin, raw))
    return out, answer, len(segments), output, False


def _opencode_parts(origin: str, templates: tuple[dict[str, Any], dict[str, Any],
                                                   dict[str, Any]],
                    answer_part: str, segments: list[str], streamed: int, ids: Iterator[int]
                    ) -> list[tuple[str, Any]]:
    """The answer as OpenCode streams it, one text part per segment: the part opened
    (beyond the first, which the capture opened), its deltas (the first's past what the
    capture streamed), the part closed with its whole text. `templates`: the capture's
    opening update, delta and closing update of the answer's part."""
    opened, delta, closed = templates
    out: list[tuple[str, Any]] = []
    for k, segment in enumerate(segments):
        pid = answer_part if k == 0 else f"{answer_part}{k:04d}"
        if k:
            msg = _copy(opened)
            msg["id"] = f"{opened['id']}{next(ids):06d}"
            msg["properties"]["part"]["id"] = pid
            out.append(("agent", msg))
        for chunk in _chunks(segment[streamed:] if k == 0 else segment):
            msg = _copy(delta)
            msg["id"] = f"{delta['id']}{next(ids):06d}"
            msg["properties"].update(partID=pid, delta=chunk)
            out.append(("agent", msg))
        msg = _copy(closed)
        if k:
            msg["id"] = f"{closed['id']}{next(ids):06d}"
        msg["properties"]["part"].update(id=pid, text=segment)
        out.append((origin, msg))
    return out


def _acp(msgs: list[tuple[str, Any]], sid: str, size: int
         ) -> tuple[list[tuple[str, Any]], str, int, str, bool]:
    parsed = [(o, _dict(m)) for o, m in msgs]

    def update(m: dict[str, Any]) -> dict[str, Any]:
        return (m.get("params") or {}).get("update") or {} if m.get("method") == "session/update" \
            else {}

    chunks = [i for i, (_, m) in enumerate(parsed)
              if update(m).get("sessionUpdate") == "agent_message_chunk"]
    # the answer: the last run of consecutive message chunks (ACP has no item ids)
    last = chunks[-1]
    first = last
    while first - 1 in chunks:
        first -= 1
    streamed = "".join(update(parsed[i][1])["content"]["text"] for i in range(first, last + 1))
    answer = _filler("answer", streamed, size)
    done_tool = next(m for _, m in parsed if update(m).get("sessionUpdate") == "tool_call_update"
                     and update(m).get("status") == "completed")
    raw_output = update(done_tool)["rawOutput"]
    full = _filler("output", raw_output.get("aggregated_output") or "", size)

    def tool_line(text: str) -> dict[str, Any]:
        msg = _copy(done_tool)
        record = msg["params"]["update"]["rawOutput"]
        record.update(stdout=text, aggregated_output=text, formatted_output=text)
        return msg

    output = _fit(lambda t: _encode(tool_line(t)), full)
    out: list[tuple[str, Any]] = []
    for i, ((origin, raw), (_, m)) in enumerate(zip(msgs, parsed, strict=True)):
        if m is done_tool:
            out.append((origin, tool_line(output)))
            continue
        out.append((origin, raw))
        if i == last:
            for chunk in _chunks(answer[len(streamed):]):
                msg = _copy(m)
                msg["params"]["update"]["content"]["text"] = chunk
                out.append(("agent", msg))
    return out, answer, 1, output, False


_PATCHERS = {"codex": _codex, "claude": _claude, "opencode": _opencode, "acp": _acp}


def captured_lines(fixtures: Path, provider: str) -> list[Line]:
    """The provider's source conversation as it was captured (capture times added)."""
    return [Line(_encode(m), o, _T0 + 10 * i)  # type: ignore[arg-type]
            for i, (o, m) in enumerate(_msgs(fixtures / CAPTURES[provider]))]


def long_session(fixtures: Path, provider: str, size: int, session_id: str | None = None
                 ) -> LongSession:
    """The provider's captured conversation with its answer and command output made
    `size` characters long (see the module docstring)."""
    sid = session_id or f"long-{provider}-{size_label(size)}"
    msgs, answer, items, output, streamed = _PATCHERS[provider](
        _msgs(fixtures / CAPTURES[provider]), sid, size)
    lines = [Line(_encode(m), o, _T0 + 10 * i)  # type: ignore[arg-type]
             for i, (o, m) in enumerate(msgs)]
    too_big = [len(ln.data) for ln in lines if len(ln.data) > RECORD_BUDGET]
    if too_big:
        raise BenchError(f"{sid}: native records of {too_big} bytes exceed {RECORD_BUDGET}")
    return LongSession(provider, sid, size, lines, answer, items, output, streamed)


def capture_bytes(session: LongSession) -> bytes:
    """The session as a capture file (`canonflow replay --format capture`)."""
    return b"".join(b'{"origin":"%s","t":%d,"msg":%s}\n' % (ln.origin.encode(), ln.time_ms or 0,
                                                            ln.data) for ln in session.lines)
