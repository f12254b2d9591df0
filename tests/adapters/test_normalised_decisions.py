"""Normalised decisions (issue 19): an approval allowed and one denied, expressed natively
for every runtime that can express approvals, read the same: `request.resolved` carries
the runtime's own word in `decision` (unchanged) and the shared one in `outcome`;
`user-input.resolved` says answered, declined or cancelled. The chat's approval record
carries the same outcome.

Each conversation is in the runtime's real shape: Claude Code's control protocol
(`can_use_tool` answered by the client), the Codex app-server's approval requests (v2
and the legacy ReviewDecision), OpenCode's permission events, ACP's
`session/request_permission` answered with an option. Amp (no control protocol),
Gemini's stream-json and `codex exec --json` (both run without asking) carry no
approvals.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters import providers
from adapters.core import Session
from adapters.projections.chat import ChatState, initial, project_event
from tests.adapters.harness import GOLDENS, Stored, capture_lines
from topics.canonical import RequestResolved, UserInputResolved
from topics.chat import encode_chat

CMD = "touch a.txt"
#: (codex-transcript, opencode-transcript: a rollout and OpenCode's database keep no
#: approval request or decision; gemini-transcript: nor do Gemini CLI's files, only a
#: refusal's outcome on the tool's result. Claude Code's files keep a person's decision,
#: from which the request is inferred: claude_transcript below)
NO_APPROVALS = frozenset({"amp", "qwen", "kilo", "droid", "copilot", "pi", "gemini",
                          "codex-exec", "codex-transcript", "opencode-transcript",
                          "gemini-transcript"})


# ---- the runtimes' native conversations: one approval request per answer ------------


def claude(answers: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    sid = {"session_id": "sess-1"}
    out: list[tuple[str, Any]] = [
        ("client", {"type": "user", "session_id": "", "parent_tool_use_id": None,
                    "message": {"role": "user", "content": [{"type": "text", "text": "Go."}]}}),
        ("agent", {"type": "system", "subtype": "init", "model": "m", "tools": ["Bash"],
                   "cwd": "/w", **sid})]
    for n, answer in enumerate(answers):
        tid, rid = f"toolu_{n}", f"perm-{n}"
        out += [
            ("agent", {"type": "assistant", "parent_tool_use_id": None, **sid, "message": {
                "id": f"msg_{n}", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "tool_use", "id": tid, "name": "Bash",
                             "input": {"command": CMD}}]}}),
            ("agent", {"type": "control_request", "request_id": rid, "request": {
                "subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": CMD},
                "tool_use_id": tid}}),
            ("client", {"type": "control_response", "response": {
                "subtype": "success", "request_id": rid, "response": answer}}),
        ]
    out.append(("agent", {"type": "result", "subtype": "success", "is_error": False,
                          "result": "done", **sid}))
    return out


def codex(decisions: list[Any], legacy: bool = False) -> list[tuple[str, Any]]:
    ids = {"threadId": "thr_1", "turnId": "turn_1"}
    out: list[tuple[str, Any]] = [("agent", {"method": "turn/started", "params": {
        "threadId": "thr_1", "turn": {"id": "turn_1", "status": "inProgress", "items": []}}})]
    for n, decision in enumerate(decisions):
        call = f"call_{n}"
        item = {"type": "commandExecution", "id": call, "command": CMD, "cwd": "/w",
                "commandActions": [], "status": "inProgress"}
        if legacy:  # the v1 request a client of an older protocol answers
            request = {"method": "execCommandApproval", "id": n, "params": {
                "conversationId": "thr_1", "callId": call, "command": ["touch", "a.txt"],
                "cwd": "/w"}}
        else:
            request = {"method": "item/commandExecution/requestApproval", "id": n,
                       "params": {**ids, "itemId": call, "command": CMD}}
        out += [("agent", {"method": "item/started", "params": {**ids, "item": item}}),
                ("agent", request),
                ("client", {"id": n, "result": {"decision": decision}})]
    out.append(("agent", {"method": "turn/completed", "params": {
        "threadId": "thr_1", "turn": {"id": "turn_1", "status": "completed", "items": []}}}))
    return out


def opencode(replies: list[str]) -> list[tuple[str, Any]]:
    def ev(kind: str, **props: Any) -> tuple[str, Any]:
        return ("agent", {"type": kind, "properties": {"sessionID": "ses_1", **props}})

    out = [ev("session.status", status={"type": "busy"})]
    for n, reply in enumerate(replies):
        out += [ev("permission.asked", id=f"per_{n}", permission="bash", patterns=[CMD],
                   always=["touch *"], metadata={"command": CMD}),
                ev("permission.replied", requestID=f"per_{n}", reply=reply)]
    return [*out, ev("session.idle")]


ACP_OPTIONS = [{"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
               {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
               {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
               {"optionId": "reject-always", "name": "Never", "kind": "reject_always"}]


def acp(choices: list[str | None]) -> list[tuple[str, Any]]:
    """`choices`: the option each request is answered with; None: cancelled."""
    def rpc(origin: str, **body: Any) -> tuple[str, Any]:
        return (origin, {"jsonrpc": "2.0", **body})

    out = [rpc("client", id=1, method="session/new", params={"cwd": "/w", "mcpServers": []}),
           rpc("agent", id=1, result={"sessionId": "s1"}),
           rpc("client", id=2, method="session/prompt", params={
               "sessionId": "s1", "prompt": [{"type": "text", "text": "Go."}]})]
    for n, choice in enumerate(choices):
        outcome = {"outcome": "selected", "optionId": choice} if choice else {"outcome": "cancelled"}
        out += [rpc("agent", id=100 + n, method="session/request_permission", params={
                    "sessionId": "s1", "options": ACP_OPTIONS, "toolCall": {
                        "toolCallId": f"call_{n}", "title": CMD, "kind": "execute",
                        "rawInput": {"command": CMD}}}),
                rpc("client", id=100 + n, result={"outcome": outcome})]
    return [*out, rpc("agent", id=2, result={"stopReason": "end_turn"})]


def claude_transcript(decisions: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Claude Code's session file: a tool call per decision, each decision as the
    file keeps it, on the tool's result row (the request itself is not in the file)."""
    def row(n: int, kind: str, **fields: Any) -> tuple[str, Any]:
        return ("agent", {"type": kind, "uuid": f"u{n}", "sessionId": "s1", "cwd": "/w",
                          "timestamp": f"2026-12-01T10:00:{n:02d}.000Z", "version": "2.1.332",
                          **fields})

    out = [row(0, "user", message={"role": "user", "content": "Go."})]
    for n, decision in enumerate(decisions):
        out += [row(2 * n + 1, "assistant", message={
                    "id": f"msg_{n}", "role": "assistant", "model": "m",
                    "stop_reason": "tool_use", "content": [{
                        "type": "tool_use", "id": f"toolu_{n}", "name": "Bash",
                        "input": {"command": CMD}}]}),
                row(2 * n + 2, "user", permissionDecision=decision, message={
                    "role": "user", "content": [{"type": "tool_result",
                                                 "tool_use_id": f"toolu_{n}",
                                                 "content": "ok"}]})]
    return out


# ---- running them -------------------------------------------------------------------


def translate(provider: str, messages: list[tuple[str, Any]]
              ) -> tuple[list[Any], list[dict[str, Any]]]:
    """The canonical events (the state stored between records, as the worker keeps it)
    and the chat records they project to."""
    events = Stored(provider, capture_lines(messages)).events
    chat: Session[ChatState] = Session(state=initial())
    records: list[dict[str, Any]] = []
    for ev in events:
        chat, recs = project_event(chat, ev, offset=ev.seq)
        records += [json.loads(encode_chat(r)) for r in recs]
    return events, records


def resolved(events: list[Any]) -> list[tuple[Any, Any]]:
    """(decision, outcome) of every request.resolved, UNSET read as None."""
    return [(_v(e.payload.decision), _v(e.payload.outcome))
            for e in events if isinstance(e, RequestResolved)]


def _v(value: Any) -> Any:
    return value if isinstance(value, str) else None


#: Each runtime's native "allow this once" and "no", and the word it keeps in `decision`.
ALLOW_AND_DENY: dict[str, tuple[Any, tuple[str, str]]] = {
    "claude": (lambda: claude([{"behavior": "allow", "updatedInput": {"command": CMD}},
                               {"behavior": "deny", "message": "Not that file."}]),
               ("allow", "deny")),
    "codex": (lambda: codex(["accept", "decline"]), ("accept", "decline")),
    "opencode": (lambda: opencode(["once", "reject"]), ("once", "reject")),
    "acp": (lambda: acp(["allow-once", "reject-once"]), ("allow_once", "reject_once")),
    "claude-transcript": (lambda: claude_transcript([
        {"decision": "accept", "source": "user_temporary", "grantScope": "once"},
        {"decision": "reject", "source": "user_reject"}]), ("accept", "reject")),
}


def test_every_runtime_either_expresses_approvals_here_or_has_none():
    assert set(ALLOW_AND_DENY) | NO_APPROVALS == set(providers())
    assert not set(ALLOW_AND_DENY) & NO_APPROVALS


@pytest.mark.parametrize("provider", sorted(ALLOW_AND_DENY))
def test_an_approval_allowed_and_one_denied_read_the_same_in_every_runtime(provider: str):
    conversation, native = ALLOW_AND_DENY[provider]
    events, chat = translate(provider, conversation())
    assert resolved(events) == [(native[0], "accept"), (native[1], "decline")]
    approvals = [r for r in chat if r["type"] == "approval" and r["state"] == "resolved"]
    assert [(r["decision"], r["outcome"]) for r in approvals] == \
        [(native[0], "accept"), (native[1], "decline")]


@pytest.mark.parametrize("provider", sorted(NO_APPROVALS))
def test_runtimes_without_approvals_open_no_request_in_any_golden(provider: str):
    outputs = sorted((GOLDENS / provider).glob("*.out.jsonl"))
    assert outputs
    types = {json.loads(line)["type"] for path in outputs
             for line in path.read_text().splitlines() if line}
    assert not {t for t in types if t.startswith("request.")}


# ---- every native word -----------------------------------------------------------------

WORDS = [
    # Claude: permission updates that stop the next question make it for the session;
    # `interrupt` stops the turn with the refusal
    ("claude", claude([{"behavior": "allow", "updatedPermissions": [
        {"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow",
         "destination": "session"}]}]), ("allow", "accept_for_session")),
    ("claude", claude([{"behavior": "allow", "updatedPermissions": [
        {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]}]),
     ("allow", "accept_for_session")),
    ("claude", claude([{"behavior": "deny", "message": "Stop.", "interrupt": True}]),
     ("deny", "cancel")),
    # Codex v2, with its amendment objects, and the legacy ReviewDecision
    ("codex", codex(["acceptForSession"]), ("acceptForSession", "accept_for_session")),
    ("codex", codex(["cancel"]), ("cancel", "cancel")),
    ("codex", codex([{"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch"]}}]),
     ("accept", "accept_for_session")),
    ("codex", codex([{"applyNetworkPolicyAmendment": {"network_policy_amendment": {
        "host": "example.com", "action": "deny"}}}]), ("decline", "decline")),
    ("codex", codex(["approved"], legacy=True), ("accept", "accept")),
    ("codex", codex(["approved_for_session"], legacy=True),
     ("acceptForSession", "accept_for_session")),
    ("codex", codex(["denied"], legacy=True), ("decline", "decline")),
    ("codex", codex(["abort"], legacy=True), ("cancel", "cancel")),
    # OpenCode
    ("opencode", opencode(["always"]), ("always", "accept_for_session")),
    # ACP: the option's kind decides; a cancelled prompt turn cancels the request
    ("acp", acp(["allow-always"]), ("allow_always", "accept_for_session")),
    ("acp", acp(["reject-always"]), ("reject_always", "decline")),
    ("acp", acp([None]), ("cancelled", "cancel")),
]


@pytest.mark.parametrize(("provider", "messages", "want"), WORDS,
                         ids=[f"{p}-{w[0]}-{w[1]}" for p, _, w in WORDS])
def test_every_native_decision_word_has_its_shared_outcome(provider: str, messages: Any,
                                                           want: tuple[str, str]):
    events, _ = translate(provider, messages)
    assert resolved(events) == [want]


@pytest.mark.parametrize("provider", ["claude", "opencode"])
def test_a_request_still_open_when_its_turn_ends_is_cancelled(provider: str):
    messages = claude([{}]) if provider == "claude" else opencode(["once"])
    # drop the answer: the turn ends with the request open
    answer = next(i for i, (_, m) in enumerate(messages)
                  if m.get("type") in ("control_response", "permission.replied"))
    events, _ = translate(provider, messages[:answer] + messages[answer + 1:])
    assert [o for _, o in resolved(events)] == ["cancel"]


def test_an_error_answer_says_no_outcome():
    # Claude's client failed to answer: nothing was decided
    messages = claude([{}])
    messages[-2] = ("client", {"type": "control_response", "response": {
        "subtype": "error", "request_id": "perm-0", "error": "callback failed"}})
    events, chat = translate("claude", messages)
    assert resolved(events) == [("error", None)]
    assert [r["outcome"] for r in chat if r["type"] == "approval"] == [None, None]


# ---- questions for the user ----------------------------------------------------------


def _codex_question(method: str, params: dict[str, Any], result: dict[str, Any]
                    ) -> list[tuple[str, Any]]:
    ids = {"threadId": "thr_1", "turnId": "turn_1"}
    return [("agent", {"method": "turn/started", "params": {
                "threadId": "thr_1", "turn": {"id": "turn_1", "status": "inProgress",
                                              "items": []}}}),
            ("agent", {"method": method, "id": 7, "params": {**ids, **params}}),
            ("client", {"id": 7, "result": result})]


def _opencode_question(ending: str) -> list[tuple[str, Any]]:
    def ev(kind: str, **props: Any) -> tuple[str, Any]:
        return ("agent", {"type": kind, "properties": {"sessionID": "ses_1", **props}})

    answer = ev("question.replied", requestID="que_1", answers=[["Red"]]) \
        if ending == "replied" else ev("question.rejected", requestID="que_1")
    return [ev("session.status", status={"type": "busy"}),
            ev("question.asked", id="que_1", questions=[{"question": "Colour?"}]),
            answer, ev("session.idle")]


def _acp_elicitation(action: str) -> list[tuple[str, Any]]:
    return [("client", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                        "params": {"cwd": "/w", "mcpServers": []}}),
            ("agent", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}}),
            ("agent", {"jsonrpc": "2.0", "id": 9, "method": "elicitation/create", "params": {
                "sessionId": "s1", "message": "Colour?", "requestedSchema": {}}}),
            ("client", {"jsonrpc": "2.0", "id": 9, "result": {"action": action}})]


QUESTIONS = [
    ("codex", _codex_question("item/tool/requestUserInput",
                              {"itemId": "call_q", "questions": [{"question": "Colour?"}]},
                              {"answers": {"q": {"answers": ["Red"]}}}), "answered"),
    ("codex", _codex_question("mcpServer/elicitation/request",
                              {"serverName": "s", "message": "Colour?"},
                              {"action": "decline"}), "declined"),
    ("codex", _codex_question("mcpServer/elicitation/request",
                              {"serverName": "s", "message": "Colour?"},
                              {"action": "cancel"}), "cancelled"),
    ("opencode", _opencode_question("replied"), "answered"),
    ("opencode", _opencode_question("rejected"), "declined"),
    ("acp", _acp_elicitation("accept"), "answered"),
    ("acp", _acp_elicitation("decline"), "declined"),
]


@pytest.mark.parametrize(("provider", "messages", "want"), QUESTIONS,
                         ids=[f"{p}-{w}-{n}" for n, (p, _, w) in enumerate(QUESTIONS)])
def test_a_question_ends_answered_declined_or_cancelled(provider: str, messages: Any,
                                                        want: str):
    events, chat = translate(provider, messages)
    assert [e.payload.outcome for e in events if isinstance(e, UserInputResolved)] == [want]
    answered = [r for r in chat if r["type"] == "question" and r["state"] == "answered"]
    assert [r["outcome"] for r in answered] == [want]


def test_the_schema_types_the_shared_words_as_closed_sets():
    from topics.schema import schema

    defs: Any = schema()["$defs"]

    def enum(struct: str, field: str) -> set[str]:
        prop = defs[struct]["properties"][field]
        return {v for alt in prop.get("anyOf", [prop]) for v in alt.get("enum", [])}

    decisions = {"accept", "accept_for_session", "decline", "cancel"}
    assert enum("RequestResolvedPayload", "outcome") == decisions
    assert enum("ChatApproval", "outcome") == decisions
    assert enum("UserInputResolvedPayload", "outcome") == {"answered", "declined", "cancelled"}
    assert enum("ChatQuestion", "outcome") == {"answered", "declined", "cancelled"}
    assert enum("ItemPayload", "author") == {"user", "runtime", "hook", "agent"}
    # the runtime's own word keeps its type: a string, as on every record already published
    decision = defs["RequestResolvedPayload"]["properties"]["decision"]
    assert {k: v for k, v in decision.items() if k != "description"} == {"type": "string"}


def test_a_record_published_before_outcome_existed_still_decodes():
    from msgspec import UNSET

    from topics.canonical import decode_event

    old = ('{"type":"request.resolved","schemaVersion":1,"eventId":"e","seq":3,'
           '"provider":"claude","sessionId":"s","createdAt":"2026-01-01T00:00:00.000Z",'
           '"synthetic":false,"payload":{"requestType":"file_change_approval","decision":"deny"}}')
    ev = decode_event(old)
    assert isinstance(ev, RequestResolved)
    assert ev.payload.decision == "deny" and ev.payload.outcome is UNSET
