"""codex: what an item says (ItemPayload): its canonical type and status, its tool
fields (tools.py), its text when it completes, the native item as `data` less what travels
elsewhere; and the synthetic completion of an item its turn ended without completing."""

from __future__ import annotations

from typing import Any

from adapters.codex.common import get_int, get_str, item_at, or_unset
from adapters.codex.state import OpenItem
from adapters.codex.tools import item_tool_fields, tool_output
from adapters.core.emitter import Emitter
from adapters.core.lifecycle import close_item
from adapters.core.shape import native_list
from adapters.core.spool import Whole, whole_fields
from topics.canonical import ItemPayload

# ---- items ------------------------------------------------------------------------


ITEM_TYPES = {
    "userMessage": "user_message",
    "hookPrompt": "user_message",  # a prompt a hook injected on the user's side
    "agentMessage": "assistant_message",
    "reasoning": "reasoning",
    "plan": "plan",
    "commandExecution": "command_execution",
    "fileChange": "file_change",
    "mcpToolCall": "mcp_tool_call",
    "dynamicToolCall": "dynamic_tool_call",
    "functionCallOutput": "dynamic_tool_call",  # the result of a tool with no item of its own
    "collabAgentToolCall": "collab_agent_tool_call",
    "webSearch": "web_search",
    "imageView": "image_view",
    "imageGeneration": "dynamic_tool_call",
    "sleep": "dynamic_tool_call",  # the model's clock.sleep tool
    "enteredReviewMode": "review_entered",
    "exitedReviewMode": "review_exited",
    "contextCompaction": "context_compaction",
    # a sub-agent's lifecycle notice: no canonical item type fits it
    "subAgentActivity": "unknown",
}
TOOL_KINDS = frozenset({
    "commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall", "functionCallOutput",
    "collabAgentToolCall", "webSearch", "imageView", "imageGeneration", "sleep",
})
#: item fields whose content travels elsewhere (text, output), left out of `data`
_BULKY = {
    "agentMessage": ("text",), "plan": ("text",),
    "commandExecution": ("aggregatedOutput",), "exitedReviewMode": ("review",),
    "functionCallOutput": ("output",), "hookPrompt": ("fragments",),
}
_STATUSES = {"inProgress": "inProgress", "completed": "completed", "failed": "failed",
             "declined": "declined", "interrupted": "failed"}


def _status(kind: str, item: dict[str, Any], done: bool) -> str:
    status = _STATUSES.get(get_str(item, "status") or "")
    if status is None or (done and status == "inProgress"):
        status = "completed" if done else "inProgress"
    if done and kind == "commandExecution" and status == "completed" \
            and get_int(item, "exitCode") not in (0, None):
        return "failed"
    if done and kind in ("dynamicToolCall", "mcpToolCall") and status == "completed" and (
            item.get("success") is False or isinstance(item.get("error"), dict)):
        return "failed"
    return status


def item_payload(kind: str, item: dict[str, Any], done: bool, cap: int,
             output: dict[str, Any] | None = None) -> ItemPayload:
    """`output`: a completed tool item's output fields (tool_output); `cap`: the
    per-item cap (a diff's)."""
    fields = item_tool_fields(kind, item, cap) if kind in TOOL_KINDS else {}
    status = _status(kind, item, done)
    if kind in TOOL_KINDS and done:
        fields.update(output if output is not None else {"output": ""})
        fields["isError"] = status in ("failed", "declined")
        if kind == "commandExecution":
            fields["exitCode"] = get_int(item, "exitCode")
    if kind == "agentMessage":
        fields["role"] = "assistant"
        fields["phase"] = or_unset(get_str(item, "phase"))
    elif kind in ("userMessage", "hookPrompt"):
        fields["role"] = "user"
        fields["author"] = "user"
        if kind == "hookPrompt":
            fields["detail"] = "hook prompt"
            fields["author"] = "hook"
    elif kind == "enteredReviewMode":
        fields["title"] = or_unset(get_str(item, "review"))
    elif kind == "subAgentActivity":
        fields["title"] = f"sub-agent {item.get('kind')}: {item.get('agentPath')}"
    if done:
        text = _item_text(kind, item)
        if text is not None:
            fields["text"] = text
    data = item
    drop = _BULKY.get(kind)
    if kind == "reasoning":  # `text` is the summary when there is one, else the raw content
        drop = ("summary",) if item.get("summary") else ("content",)
    if drop:
        data = {k: v for k, v in item.items() if k not in drop}
    elif kind == "userMessage" and isinstance(item.get("content"), list):
        # the text is in `text`; images and other inputs stay
        data = {**item, "content": [c for c in item["content"]
                                    if not (isinstance(c, dict) and c.get("type") == "text")]}
    return ItemPayload(itemType=ITEM_TYPES.get(kind, "unknown"),  # type: ignore[arg-type]
                       status=status, data=data, **fields)  # type: ignore[arg-type]


def _item_text(kind: str, item: dict[str, Any]) -> str | None:
    if kind in ("agentMessage", "plan"):
        return get_str(item, "text") or ""
    if kind == "userMessage":
        content = native_list(item.get("content"), "userMessage content")
        return "\n".join(c["text"] for c in content
                         if isinstance(c, dict) and c.get("type") == "text"
                         and isinstance(c.get("text"), str))
    if kind == "hookPrompt":
        fragments = native_list(item.get("fragments"), "hookPrompt fragments")
        return "\n".join(f["text"] for f in fragments
                         if isinstance(f, dict) and isinstance(f.get("text"), str))
    if kind == "reasoning":
        parts = native_list(item.get("summary") or item.get("content"), "reasoning summary")
        return "\n\n".join(s for s in parts if isinstance(s, str))
    if kind == "exitedReviewMode":
        return get_str(item, "review") or ""
    return None


def final_texts(kind: str, item: dict[str, Any]) -> list[tuple[str, str, str, int | None]]:
    """(stream key, final text, stream kind, index) of a completed text item."""
    if kind == "agentMessage":
        return [("assistant_text", get_str(item, "text") or "", "assistant_text", None)]
    if kind == "plan":
        return [("plan_text", get_str(item, "text") or "", "plan_text", None)]
    if kind == "reasoning":
        out: list[tuple[str, str, str, int | None]] = []
        for field, stream in (("summary", "reasoning_summary_text"), ("content", "reasoning_text")):
            parts = item.get(field)
            for i, s in enumerate(parts if isinstance(parts, list) else []):
                if isinstance(s, str):
                    out.append((f"{stream}:{i}", s, stream, i))
        return out
    return []


def indices(stream: str, index: int | None) -> tuple[int | None, int | None]:
    """(contentIndex, summaryIndex) of a delta of `stream` at `index`."""
    return (None, index) if stream == "reasoning_summary_text" else (index, None)


def close_open(out: Emitter, native_id: str, item: OpenItem, turn_status: str) -> None:
    """A synthetic item.completed for an item its turn ended without completing."""
    kind = item.kind
    at = item_at(out, item.thread, item.turn, native_id)
    fields: dict[str, Any] = {}
    if kind in TOOL_KINDS:
        # the input is not known here; item.started carried it
        fields = {"toolName": or_unset(item.tool), **tool_output(kind, {}, out, at.item_id)}
        fields["isError"] = turn_status != "completed"
    if kind == "reasoning":
        fields.update(_reasoning_streamed(out, at.item_id))
    if kind == "agentMessage":
        fields["role"] = "assistant"
        fields["phase"] = or_unset(item.phase)
    # streams left unread (an item of another kind's deltas) are closed with it
    close_item(out, at, ITEM_TYPES.get(kind, "unknown"),
               "completed" if turn_status == "completed" else "failed",
               f"the turn ended ({turn_status}) before the item completed",
               text_stream={"agentMessage": "assistant_text", "plan": "plan_text"}.get(kind), **fields)


def _reasoning_streamed(out: Emitter, cid: str) -> dict[str, Any]:
    """The `text` fields of a reasoning item its turn never completed: its streams
    (summary parts and raw content, in the order they opened), taken and joined."""
    prefix = cid + "/"
    names = [k[len(prefix):] for k in out.streams
             if k.startswith(prefix) and k.startswith("reasoning", len(prefix))]
    wholes = [w for w in (out.take(cid, name) for name in names) if w is not None]
    text = "\n\n".join(w.text for w in wholes)
    if not any(w.truncated for w in wholes):
        return {"text": text}
    length = sum(w.length for w in wholes) + 2 * (len(wholes) - 1)
    return whole_fields(Whole(text, length, True), "text")


