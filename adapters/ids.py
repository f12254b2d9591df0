"""Native message ids: what tells a message sent twice from two messages alike.

A sidecar that retries a produce without idempotence, or forwards a line twice, makes
the same native message arrive again in another record; translated again it would
repeat its text ("ThiThis is ..."). Where a runtime gives every message an id, the
driver (adapters.base.translate_record) remembers the last DEDUPE_KEPT messages of the
session (64-bit digests of id and bytes) and drops a message with the same id and the
same bytes as one of them.

Which messages have one (the rest cannot be told from a legitimate repeat: two
identical text deltas "." in a row are two dots, so they are never dropped):
* claude, amp: every agent line's `uuid` (stream_event deltas included); a
  control_request's `request_id`; a control_response's `response.request_id`.
* opencode: the bus event's `id` (`evt_...`, OpenCode 1.2 and later; the 1.1 bus has
  none).
* codex, acp (JSON-RPC 2.0): a request's or response's `id`, per direction (client and
  agent number their requests apart); notifications (deltas, updates) have none.
* codex-exec, gemini: none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

#: How many recent message ids a session remembers (a retried produce repeats a record
#: right after it, or a few records later).
DEDUPE_KEPT: Final = 16


def _claude(obj: dict[str, Any], origin: str) -> str | None:
    uuid = obj.get("uuid")
    if isinstance(uuid, str):
        return uuid
    kind = obj.get("type")
    if kind == "control_request":
        rid = obj.get("request_id")
        return f"{origin}:req:{rid}" if isinstance(rid, str) else None
    if kind == "control_response":
        resp = obj.get("response")
        rid = resp.get("request_id") if isinstance(resp, dict) else None
        return f"{origin}:res:{rid}" if isinstance(rid, str) else None
    return None


def _opencode(obj: dict[str, Any], origin: str) -> str | None:
    eid = obj.get("id")
    return eid if isinstance(eid, str) else None


def _jsonrpc(obj: dict[str, Any], origin: str) -> str | None:
    rid = obj.get("id")
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        return None
    kind = "req" if "method" in obj else "res"
    return f"{origin}:{kind}:{rid}"


#: provider -> the id of a native message (None: it has none)
MESSAGE_IDS: Final[dict[str, Callable[[dict[str, Any], str], str | None]]] = {
    "claude": _claude,
    "amp": _claude,
    "opencode": _opencode,
    "codex": _jsonrpc,
    "acp": _jsonrpc,
}
