"""claude: tool items, from their tool_use block to their tool_result.

A tool item starts at its tool_use block (input known or still streaming), is updated
when its whole input is known (and a question or a plan it states is emitted), and
completes with its whole output at its result. State.tools holds each open one by
tool_use id: its input, its parent (the Task whose subagent called it) and whether
permission was refused."""

from __future__ import annotations

import re
from typing import Any

from adapters.claude.session import _at, _dict, _emit, _str
from adapters.claude.state import State, Tool
from adapters.core.contract import MalformedRecord
from adapters.core.diff import diff_fields, records_diff, text_diff
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import complete_item, rest, start_item
from adapters.core.tools import (
    item_type_for_tool,
    mcp_tool_name,
    normalize_tool_name,
    tool_fields,
)
from topics.canonical import (
    InputOutcome,
    ItemPayload,
    ItemUpdated,
    PlanStep,
    TurnPlanUpdated,
    TurnPlanUpdatedPayload,
    UserInputRequested,
    UserInputRequestedPayload,
    UserInputResolved,
    UserInputResolvedPayload,
)


def _block_tool_name(block: dict[str, Any]) -> str:
    name = str(block.get("name") or "unknown")
    server = _str(block.get("server_name"))
    if block.get("type") == "mcp_tool_use" and server and not name.startswith("mcp__"):
        return mcp_tool_name(server, name)
    return name


def _new_tool(state: State, native_name: str, raw_input: Any, parent: str | None,
              final: bool = False) -> Tool:
    name = normalize_tool_name(native_name)
    item_type = item_type_for_tool(name)
    return Tool(itemType=item_type, toolName=name,
                input=_tool_input(item_type, raw_input, state.cwd), parent=parent, final=final)


def _tool_input(item_type: str, raw_input: Any, cwd: str | None) -> Any:
    if not isinstance(raw_input, dict) or not raw_input:
        return raw_input  # not known yet (a streamed tool_use starts with {})
    value = dict(raw_input)
    if item_type == "command_execution":
        # a command execution always carries `command` (Amp names it `cmd`) and `cwd`
        if "command" not in value and isinstance(value.get("cmd"), str):
            value["command"] = value["cmd"]
        if cwd and "cwd" not in value:
            value["cwd"] = cwd
    return value


def _tool_payload(tool: Tool, status: str, cap: int, diff: dict[str, Any] | None = None,
                  **fields: Any) -> ItemPayload:
    """`cap`: the per-item cap (a diff's); `diff`: the diff fields from the tool's result,
    which replace those its input gives."""
    title = UNSET
    if isinstance(tool.input, dict):
        for k in ("description", "file_path", "path", "notebook_path", "url", "query", "pattern"):
            if isinstance(tool.input.get(k), str) and tool.input[k]:
                title = tool.input[k]
                break
    norm = tool_fields(tool.toolName, tool.input, cap, diff=diff is None)
    if diff is not None:
        norm.update(diff)
    return ItemPayload(itemType=tool.itemType, status=status, toolName=tool.toolName,  # type: ignore[arg-type]
                       input=tool.input, title=title, **norm, **fields)


def _set_tool(state: State, tid: str, **changes: Any) -> State:
    tools = dict(state.tools)
    tools[tid] = _replace(tools[tid], **changes)
    return _replace(state, tools=tools)


def _start_tool(state: State, out: Emitter, tid: str, native_name: str, raw_input: Any,
                parent: str | None, final: bool) -> State:
    tool = _new_tool(state, native_name, raw_input, parent, final)
    start_item(out, _at(state, out, tid, tid, parent=parent),
               _tool_payload(tool, "inProgress", out.cap))
    state = _replace(state, tools={**state.tools, tid: tool})
    return _tool_input_known(state, out, tid) if final else state


def _finalize_tool(state: State, out: Emitter, tid: str, raw_input: Any) -> State:
    tool = state.tools[tid]
    if tool.final:
        return state
    tool = _replace(tool, input=_tool_input(tool.itemType, raw_input, state.cwd), final=True)
    state = _replace(state, tools={**state.tools, tid: tool})
    _emit(state, out, ItemUpdated, _tool_payload(tool, "inProgress", out.cap), item=tid,
          item_ref=tid, parent=tool.parent)
    return _tool_input_known(state, out, tid)


def _tool_input_known(state: State, out: Emitter, tid: str) -> State:
    """What a tool's whole input means beyond the tool call: a question, a plan."""
    tool = state.tools[tid]
    data = tool.input if isinstance(tool.input, dict) else {}
    if tool.toolName == "AskUserQuestion" and tool.question == 0:
        _emit(state, out, UserInputRequested,
              UserInputRequestedPayload(questions=data.get("questions", data)),
              request=tid, item=tid, item_ref=tid, parent=tool.parent)
        return _set_tool(state, tid, question=1)
    if tool.toolName == "TodoWrite" and isinstance(data.get("todos"), list):
        steps = [PlanStep(step=str(t.get("content") or t.get("activeForm") or ""),
                          status=_PLAN_STATUS.get(str(t.get("status")), "pending"))  # type: ignore[arg-type]
                 for t in data["todos"] if isinstance(t, dict)]
        _emit(state, out, TurnPlanUpdated, TurnPlanUpdatedPayload(plan=steps), parent=tool.parent)
    if tool.toolName == "ExitPlanMode" and isinstance(data.get("plan"), str):
        # the plan as an item of its own: its text, whole, as its one delta
        at = _at(state, out, f"{tid}:plan", tid, parent=tool.parent)
        start_item(out, at, ItemPayload(itemType="plan", status="inProgress"), True)
        rest(out, at, "plan_text", data["plan"])
        complete_item(out, at, ItemPayload(itemType="plan", status="completed",
                                           text=data["plan"]), True)
    return state


_PLAN_STATUS = {"pending": "pending", "todo": "pending", "in_progress": "inProgress",
                "in-progress": "inProgress", "completed": "completed", "done": "completed"}


_EXIT_CODE = re.compile(r"^Exit code (\d+)")


def _output_text(content: Any) -> str:
    """A tool result's whole text: text blocks joined by newlines; a server search
    result lists its hits (title and URL), since it has no text of its own."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                parts.append(b["text"])
            elif isinstance(b, dict) and isinstance(b.get("url"), str):
                parts.append(f"{b.get('title') or b['url']} <{b['url']}>")
        return "\n".join(parts)
    if isinstance(content, dict):  # server tool results (web_fetch_tool_result, errors...)
        if "content" in content:
            return _output_text(content["content"])
        return str(content.get("error_code") or content.get("data") or "")
    return ""


def complete_tool(state: State, out: Emitter, tid: str, output: str, is_error: bool,
                  parent: str | None, data: Any = UNSET) -> State:
    """Complete a tool item with its whole output (started first if never seen)."""
    tool = state.tools.get(tid)
    if tool is None:  # a result for a call this stream never showed (resumed session)
        tool = _new_tool(state, "unknown", None, parent)
        start_item(out, _at(state, out, tid, tid, parent=parent),
                   _tool_payload(tool, "inProgress", out.cap), True)
    status = "declined" if tool.denied else "failed" if is_error else "completed"
    fields: dict[str, Any] = {"output": output, "isError": is_error or tool.denied}
    background = isinstance(tool.input, dict) and tool.input.get("run_in_background") is True
    if tool.itemType == "command_execution" and not tool.denied and not background:
        # Claude's Bash reports a non-zero exit as an error result "Exit code N\n..."
        code = _EXIT_CODE.match(output) if is_error else None
        fields["exitCode"] = int(code.group(1)) if code else None if is_error else 0
    if tool.question == 1:
        answers = _dict(data).get("toolUseResult")
        answers = _dict(answers).get("answers", output)
        # an error result (a refused permission among them) is a question left unanswered
        answered: InputOutcome = "declined" if is_error or tool.denied else "answered"
        _emit(state, out, UserInputResolved,
              UserInputResolvedPayload(answers=answers, outcome=answered),
              request=tid, item=tid, item_ref=tid, parent=tool.parent)
    diff = _result_diff(tool, data, out.cap) if tool.itemType == "file_change" else None
    complete_item(out, _at(state, out, tid, tid, parent=tool.parent),
                  _tool_payload(tool, status, out.cap, diff, data=data, **fields))
    tools = dict(state.tools)
    tools.pop(tid, None)
    return _replace(state, tools=tools)


def _result_diff(tool: Tool, data: Any, cap: int) -> dict[str, Any] | None:
    """The diff fields of a file change from Claude's `tool_use_result`: its
    structuredPatch (hunks of the file, with the file's line numbers), or the content
    of a file it says it created; no diff for a file it rewrote unchanged; None when
    the result tells none of these (the input's excerpts or content then give it)."""
    result = _dict(data).get("toolUseResult")
    path = _str(result.get("filePath")) if isinstance(result, dict) else None
    if not isinstance(result, dict) or path is None:
        return None
    patch = result.get("structuredPatch")
    if isinstance(patch, list) and patch:
        text = records_diff(path, patch)
        return diff_fields([(text, "file")], cap) if text else None
    if result.get("type") == "create" and isinstance(result.get("content"), str):
        return diff_fields([(text_diff(path, None, result["content"]), "file")], cap)
    if result.get("type") == "update" and patch == []:
        return {}
    return None


def _tool_result(state: State, out: Emitter, block: dict[str, Any], parent: str | None,
                 obj: dict[str, Any], single: bool = False) -> State:
    tid = _str(block.get("tool_use_id"))
    if tid is None:
        raise MalformedRecord(f"{block.get('type')} block without a tool_use_id")
    content = block.get("content")
    data: dict[str, Any] = {}
    if isinstance(content, list | dict):
        data["content"] = content
    result = obj.get("tool_use_result")
    if single and result is not None:
        if isinstance(result, dict) and "originalFile" in result:
            # the whole file before the edit: too big for an event (raw keeps it)
            result = {k: v for k, v in result.items() if k != "originalFile"}
        data["toolUseResult"] = result
    is_error = block.get("is_error") is True or (
        isinstance(content, dict) and str(content.get("type", "")).endswith("_error"))
    return complete_tool(state, out, tid, _output_text(content), is_error, parent,
                         data or UNSET)
