"""Drift: every recorded conversation of every runtime release the project holds,
replayed through its adapter and held to its oracle.

A fleet runs many releases of each runtime at once, and a release that changes its
wire format breaks a translator silently. So every recording is a test:

* `fixtures/captured/<provider>/<runtime>__<scenario>.capture.jsonl`: the current
  releases (the release is the oracle's `source.runtime_version`);
* `fixtures/versions/<provider>/<runtime>__<release>__<scenario>.capture.jsonl`:
  other releases, named in the file;
* `fixtures/more-runtimes/<provider>/<runtime>__<scenario>.capture.jsonl`: more agents,
  in their own formats and through ACP.

Each has its oracle `<name>.expect.json` beside it (computed from the native
messages alone, see fixtures/captured/README.md). Both are found by globbing:
verifying a new release is dropping its recordings in. Each file is translated as
`canonflow replay --format capture` does (one line per record), and the events are
checked as the held-out conformance check does (the same rules, written here):
every event a valid canonical event, seq gapless, event ids unique, no line failed;
every item and turn that starts completes, as many turns as the runtime ended;
the assistant texts exactly; as many tool items as tool calls, each native tool
output carried by a tool item; approvals opened and the answered ones resolved;
errors and interrupts reported; no runtime.warning (every message here is of a
known type). A second run, the state encoded and decoded between every two lines,
must give the same bytes. Where the stream states the runtime's release, the adapter
records it (`runtimeVersion`, and `runtimeName` where the protocol names the agent),
and it is the release the file is named for.

docs/runtimes/index.md "Verified runtime releases" and each adapter's docstring list the
releases; tests here compare both with the recordings, so neither goes stale.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
import shlex
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import adapters
from adapters import get, providers
from tests.adapters.harness import capture_lines, read_capture, run_record_by_record, run_whole
from topics.canonical import TOOL_ITEM_TYPES, decode_event

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SETS = ("captured", "versions", "more-runtimes")
RELEASES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "runtimes" / "index.md"
SECTION = "## Verified runtime releases"

CAPTURES = sorted(p for s in SETS for p in (FIXTURES / s).glob("*/*.capture.jsonl"))
ORACLES = sorted(p for s in SETS for p in (FIXTURES / s).glob("*/*.expect.json"))


def _stem(path: Path) -> str:
    """The recording's name: its file name without `.capture.jsonl` / `.expect.json`."""
    return re.sub(r"\.(capture\.jsonl|expect\.json)$", "", path.name)


def _label(path: Path) -> str:
    """`versions/claude/claude-code-sdk-stdio__2.0.77__reasoning`: the test id."""
    return f"{path.parents[1].name}/{path.parent.name}/{_stem(path)}"


def _oracle(path: Path) -> dict[str, Any]:
    return json.loads(path.with_name(path.name.replace(".capture.jsonl", ".expect.json"))
                      .read_text())


def _release_of(text: str) -> str:
    """The release number in a runtime's own version string ("codex-cli 0.171.0",
    "2.1.332 (Claude Code)", "0.61.0")."""
    m = re.search(r"\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z.-]+)?", text)
    assert m, f"no release number in {text!r}"
    return m.group(0)


def _recording(path: Path) -> tuple[str, str, str]:
    """(provider, runtime, release) of a capture file: the release from its name, else
    (the current releases in fixtures/captured) from its oracle."""
    parts = _stem(path).split("__")
    if len(parts) == 3:
        return path.parent.name, parts[0], parts[1]
    assert len(parts) == 2, f"{path.name}: expected <runtime>[__<release>]__<scenario>"
    return path.parent.name, parts[0], _release_of(_oracle(path)["source"]["runtime_version"])


def _version_key(release: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", release))


def _rel(path: Path) -> str:
    return str(path.relative_to(FIXTURES))


# ---- translating a recording ---------------------------------------------------------


@cache
def _replayed(path: Path) -> tuple[bytes, ...]:
    """The canonical events of a recording (as JSON). run_whole fails on a line that
    does not translate: these are valid native lines, none may become a dead letter."""
    provider, _, _ = _recording(path)
    return tuple(run_whole(provider, read_capture(path), sid=path.name))


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(b) for b in _replayed(path)]


# ---- the oracle's checks -------------------------------------------------------------


def _strings(value: Any) -> list[str]:
    """Every string inside `value`, the native message an event may carry (`raw`) left out."""
    out, stack = [], [value]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict):
            stack.extend(v for k, v in x.items() if k != "raw")
        elif isinstance(x, list):
            stack.extend(x)
    return out


def _refs(event: dict[str, Any]) -> set[str]:
    """The provider's ids an event names, as strings (a JSON-RPC id may be the number 0)."""
    return {str(v) for v in (event.get("providerRefs") or {}).values()
            if isinstance(v, (str, int)) and not isinstance(v, bool)}


def _input_forms(texts: list[Any] | None, output: str) -> list[str]:
    """The forms in which a tool's own input may show in its events (the command, the
    script inside `bash -lc '...'`, their words), longest first: blanked out before the
    output is looked for, so that `printf 'fixture-ok\\n'` does not count as carrying the
    output `fixture-ok`. Forms the output itself contains are kept."""
    forms: set[str] = set()
    for text in texts or []:
        if not isinstance(text, str) or not text:
            continue
        found = {text, text.replace("\\\\", "\\")}
        shell = re.match(r"^\S*(?:ba|z)?sh\s+-l?c\s+(.*)$", text, re.S)
        if shell:
            script = shell.group(1).strip()
            if len(script) >= 2 and script[0] == script[-1] and script[0] in "\"'":
                script = script[1:-1]
            found |= {script, script.replace("\\\\", "\\")}
        for form in list(found):
            try:
                found |= {word for word in shlex.split(form) if len(word) >= 3}
            except ValueError:  # unbalanced quotes: the whole form is enough
                pass
        forms |= found
    return sorted((f for f in forms if f and f not in output), key=len, reverse=True)


def _carries(item_events: list[dict[str, Any]], tool: dict[str, Any]) -> bool:
    """Does a tool item's events carry the native tool's output (in a payload, or in its
    output deltas joined)?"""
    output = tool["output"]
    forms = _input_forms(tool.get("input_texts"), output)
    hay = []
    for s in _strings(item_events):
        for form in forms:
            s = s.replace(form, "\x00")
        hay.append(s)
    hay.append("".join(e["payload"].get("delta") or "" for e in item_events
                       if e["type"] == "content.delta"
                       and e["payload"].get("streamKind") != "assistant_text"))
    if any(output in s for s in hay):
        return True
    parts = tool.get("output_parts")
    if parts and all(any(p in s for s in hay) for p in parts):
        return True
    trimmed = output.strip()
    return bool(trimmed) and any(trimmed in s for s in hay)


def _text_candidates(texts: list[dict[str, Any]]) -> list[list[str]]:
    """The assistant texts the oracle accepts: every required text, each optional one
    (text a runtime streamed and never confirmed) present or not."""
    optional = [i for i, t in enumerate(texts) if t.get("optional")]
    drops = [set(c) for r in range(len(optional) + 1)
             for c in itertools.combinations(optional, r)]
    return [[t["text"] for i, t in enumerate(texts) if i not in drop] for drop in drops]


def oracle_problems(events: list[dict[str, Any]], oracle: dict[str, Any]) -> list[str]:
    """How the canonical events of a recording depart from its oracle ([] when they do not)."""
    problems: list[str] = []
    unreliable = oracle.get("unreliable") or {}

    # envelope: seq 1..N per session, unique event ids
    seqs: dict[str, list[int]] = {}
    for e in events:
        seqs.setdefault(e["sessionId"], []).append(e["seq"])
    for sid, got in seqs.items():
        if got != list(range(1, len(got) + 1)):
            problems.append(f"session {sid}: seq is not 1..{len(got)}")
    if len({e["eventId"] for e in events}) != len(events):
        problems.append("duplicate eventIds")

    by_item: dict[str, list[dict[str, Any]]] = {}
    item_type: dict[str, str] = {}
    started: dict[str, int] = {}
    completed: dict[str, int] = {}
    texts: dict[str, list[str]] = {}
    turns_started: list[str | None] = []
    turns_done: list[tuple[str | None, str]] = []
    opened: dict[str, set[str]] = {}
    resolved: set[str] = set()
    warnings, errors = [], []
    for pos, e in enumerate(events):
        ty, p, iid = e["type"], e.get("payload") or {}, e.get("itemId")
        if iid is not None:
            by_item.setdefault(iid, []).append(e)
        if ty in ("item.started", "item.updated", "item.completed"):
            if iid is None:
                problems.append(f"{ty} without itemId")
                continue
            item_type.setdefault(iid, p.get("itemType"))
            if ty == "item.started":
                started.setdefault(iid, pos)
            elif ty == "item.completed":
                completed[iid] = pos
        elif ty == "content.delta" and p.get("streamKind") == "assistant_text":
            texts.setdefault(iid, []).append(p.get("delta") or "")
        elif ty == "turn.started":
            turns_started.append(e.get("turnId"))
        elif ty == "turn.completed":
            turns_done.append((e.get("turnId"), p.get("state")))
        elif ty in ("request.opened", "user-input.requested"):
            rid = e.get("requestId")
            if rid is None:
                problems.append(f"{ty} without requestId")
                continue
            opened.setdefault(rid, set()).update(_refs(e))
        elif ty in ("request.resolved", "user-input.resolved"):
            resolved.add(e.get("requestId"))
        elif ty == "runtime.warning":
            warnings.append(p.get("message"))
        elif ty == "runtime.error":
            errors.append(e)

    # items and turns: every start completed; as many turns ended as the runtime ended
    left_open = oracle.get("open_turns_at_end", 0)
    never = [i for i, at in started.items() if completed.get(i, -1) < at]
    if never and not left_open:
        problems.append(f"items started and never completed: {never[:4]}")
    done_ids = [t for t, _ in turns_done]
    still = [t for t in turns_started if t is not None and t not in done_ids]
    still_unnamed = (sum(t is None for t in turns_started)
                     - sum(t is None for t in done_ids))
    if len(still) + max(0, still_unnamed) > left_open:
        problems.append(f"turns started and never completed: {still[:4]}")
    want = oracle.get("turns", 0)
    if not want <= len(turns_done) <= want + left_open:
        problems.append(f"{len(turns_done)} turn.completed, the runtime ended {want} "
                        f"({'/'.join(oracle.get('turn_states', []))})")

    # assistant text, exactly, one text per item in order of first delta
    canon = [t for t in ("".join(v) for v in texts.values()) if t]
    if "e" not in unreliable:
        accepted = _text_candidates(oracle.get("assistant_texts", []))
        loose = oracle.get("text_boundaries") == "loose" and any(
            "".join(canon) == "".join(c) for c in accepted)
        if canon not in accepted and not loose:
            problems.append(f"assistant texts {canon!r}, expected {accepted[0]!r}")
    odd = sorted({str(item_type.get(i)) for i in texts if item_type.get(i) != "assistant_message"})
    if odd:
        problems.append(f"assistant text on items of type {odd}")

    # tools: as many items as calls, each native output carried by one of them
    if "f" not in unreliable:
        tools = [i for i in item_type if item_type[i] in TOOL_ITEM_TYPES]
        calls = oracle.get("tool_calls", [])
        lo, hi = oracle.get("tool_count_range") or [len(calls), len(calls)]
        if not lo <= len(tools) <= hi:
            problems.append(f"{len(tools)} tool items, expected {lo}..{hi}: "
                            f"{[t.get('name') for t in calls]}")
        refs = {i: set().union(*(_refs(e) for e in by_item[i])) | {i} for i in tools}
        free = list(tools)
        named: dict[int, str] = {}
        for n, call in enumerate(calls):
            hit = next((i for i in free if call.get("id") is not None
                        and str(call["id"]) in refs[i]), None)
            if hit is not None:
                named[n] = hit
                free.remove(hit)
        for n, call in enumerate(calls):
            if not call.get("output"):
                continue
            own = named.get(n)
            if own is not None and _carries(by_item[own], call):
                continue
            other = next((i for i in free if _carries(by_item[i], call)), None)
            if other is None:
                problems.append(f"output of tool {call.get('name')} ({call.get('id')}) "
                                f"{call['output'][:40]!r} is carried by no tool item")
            else:
                free.remove(other)

    # approvals and questions: opened, the answered ones resolved
    asked = oracle.get("requests", [])
    need = sum(not r.get("optional") for r in asked)
    if not need <= len(opened) <= len(asked):
        problems.append(f"{len(opened)} requests opened, expected {need}..{len(asked)}")
    pool = list(opened)
    pairs = []
    for r in asked:
        hit = next((k for k in pool if str(r.get("id")) in opened[k]
                    or (r.get("tool_use_id") and r["tool_use_id"] in opened[k])), None)
        if hit is not None:
            pool.remove(hit)
        pairs.append([r, hit])
    for pair in pairs:
        if pair[1] is None and pool and not pair[0].get("optional"):
            pair[1] = pool.pop(0)
    for r, k in pairs:
        if r.get("answered") and (k is None or k not in resolved):
            problems.append(f"answered request {r.get('id')} ({r.get('kind')}) "
                            f"{'never opened' if k is None else 'never resolved'}")

    # nothing unknown, failures and interrupts said
    if warnings:
        problems.append(f"{len(warnings)} runtime.warning: {warnings[:3]}")
    if oracle.get("error") and not errors:
        problems.append("the run failed but no runtime.error was emitted")
    if oracle.get("interrupted") and not any(
            st in ("interrupted", "cancelled", "failed") for _, st in turns_done):
        problems.append("the run was interrupted but no turn ended interrupted, cancelled "
                        "or failed")
    return problems


# ---- what the stream says about its release ------------------------------------------


def _stated(provider: str, path: Path) -> tuple[str | None, bool]:
    """(the agent's name when the protocol names it, does the stream state its release?),
    read from the native messages: Claude's `system/init` `claude_code_version`, the
    Codex app-server's initialize `userAgent`, OpenCode's session `info.version`, an ACP
    agent's initialize `agentInfo`. Codex exec and Gemini's stream-json never say."""
    name, says = None, False
    for line in read_capture(path):
        if line.origin != "agent":
            continue
        msg = json.loads(line.data)
        if not isinstance(msg, dict):
            continue
        result = msg.get("result") if isinstance(msg.get("result"), dict) else {}
        if provider in ("claude", "amp", "qwen"):
            says |= (msg.get("type"), msg.get("subtype")) == ("system", "init") and isinstance(
                msg.get("claude_code_version" if provider != "qwen" else "qwen_code_version"),
                str)
        elif provider == "codex":
            says |= isinstance(result.get("userAgent"), str)
        elif provider == "opencode":
            body = msg.get("payload") if "type" not in msg else msg
            info = ((body or {}).get("properties") or {}).get("info")
            says |= (body or {}).get("type") in ("session.created", "session.updated") and (
                isinstance(info, dict) and isinstance(info.get("version"), str))
        elif provider == "acp":
            agent = result.get("agentInfo")
            if isinstance(agent, dict) and isinstance(agent.get("version"), str):
                says, name = True, agent.get("name")
    return name, says


# ---- the tests -----------------------------------------------------------------------


def test_recordings_are_found():
    assert {p.parent.name for p in CAPTURES} >= {"claude", "codex", "codex-exec", "opencode",
                                                 "gemini", "acp"}
    assert any(p.parents[1].name == "versions" for p in CAPTURES)


def test_every_recording_has_its_oracle_and_every_oracle_its_recording():
    assert ({p.parent / _stem(p) for p in CAPTURES}
            == {p.parent / _stem(p) for p in ORACLES})


@pytest.mark.parametrize("path", CAPTURES, ids=_label)
def test_recording_replays_as_its_oracle_says(path: Path):
    provider, runtime, release = _recording(path)
    oracle = _oracle(path)
    assert (oracle["provider"], oracle["runtime"]) == (provider, runtime)
    assert _release_of(oracle["source"]["runtime_version"]) == release, \
        "the file is named for another release than its oracle recorded"
    for raw in _replayed(path):  # a valid canonical event: the seed 002 vocabulary, typed
        decode_event(raw)
    problems = oracle_problems(_events(path), oracle)
    assert not problems, f"{_rel(path)} ({runtime} {release}):\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", CAPTURES, ids=_label)
def test_recording_replays_the_same_with_its_state_stored_between_lines(path: Path):
    provider, _, _ = _recording(path)
    assert tuple(run_record_by_record(provider, read_capture(path), sid=path.name)) \
        == _replayed(path)


@pytest.mark.parametrize("path", CAPTURES, ids=_label)
def test_the_release_a_stream_states_is_recorded(path: Path):
    provider, _, release = _recording(path)
    name, says = _stated(provider, path)
    events = _events(path)
    versions = {e["payload"]["runtimeVersion"] for e in events
                if "runtimeVersion" in (e.get("payload") or {})}
    names = {e["payload"]["runtimeName"] for e in events
             if "runtimeName" in (e.get("payload") or {})}
    assert versions == ({release} if says else set())
    assert names == ({name} if name else set())
    if says:  # on the event that carries the session's configuration
        assert {e["type"] for e in events if "runtimeVersion" in e["payload"]} <= {
            "session.configured", "thread.metadata.updated"}


# ---- the lists of releases -----------------------------------------------------------


def verified_releases() -> dict[str, dict[str, Counter[str]]]:
    """provider -> runtime -> release -> recorded conversations."""
    out: dict[str, dict[str, Counter[str]]] = {}
    for path in CAPTURES:
        provider, runtime, release = _recording(path)
        out.setdefault(provider, {}).setdefault(runtime, Counter())[release] += 1
    return out


def release_table() -> str:
    """The table of docs/runtimes/index.md "Verified runtime releases", from the
    recordings."""
    found = verified_releases()
    rows = ["| provider | runtime (recordings' name) | releases verified (conversations) |",
            "| --- | --- | --- |"]
    for provider in providers():
        runtimes = found.get(provider)
        if not runtimes:
            rows.append(f"| `{provider}` | | none recorded (goldens only) |")
        for runtime, releases in sorted((runtimes or {}).items()):
            cell = ", ".join(f"{r} ({releases[r]})" for r in sorted(releases, key=_version_key))
            rows.append(f"| `{provider}` | `{runtime}` | {cell} |")
    return "\n".join(rows) + "\n"


def test_docs_list_every_verified_release():
    text = RELEASES_PAGE.read_text()
    assert SECTION + "\n" in text, f"docs/runtimes/index.md has no section {SECTION!r}"
    section = text.split(SECTION + "\n", 1)[1].split("\n## ", 1)[0]
    table = release_table()
    assert table in section, (
        f"docs/runtimes/index.md {SECTION!r} is not the recordings' table; it should read:\n\n{table}")


@pytest.mark.parametrize("provider", sorted(verified_releases()))
def test_adapter_docstring_table_names_every_verified_release(provider: str):
    """Each adapter's docstring has a table row per runtime, `| `<runtime>` ... |`, that
    names every release its recordings verify."""
    # from the source: a module compiled with mypyc (make's default) keeps no docstring
    package = get(provider).__name__.split(".")[1:]  # type: ignore[attr-defined]
    source = Path(adapters.__file__).parent.joinpath(*package) / "translator.py"
    doc = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""
    missing = []
    for runtime, releases in sorted(verified_releases()[provider].items()):
        rows = [ln for ln in doc.splitlines() if ln.startswith(f"| `{runtime}`")]
        missing += [f"{runtime} {r}" for r in sorted(releases, key=_version_key)
                    if not any(re.search(rf"(?<![\d.]){re.escape(r)}(?!\.?\d)", row)
                               for row in rows)]
    assert not missing, f"{get(provider).__name__}: its docstring's table lacks {missing}"  # type: ignore[attr-defined]


def test_a_codex_user_agent_without_a_release_records_none():
    """The release is read from the user agent's first word only: a client that sets
    another originator format leaves runtimeVersion absent, never a wrong one."""
    def configured(user_agent: str) -> dict[str, Any]:
        lines = capture_lines([
            ("client", {"id": 1, "method": "initialize", "params": {"clientInfo": {
                "name": "c", "version": "1"}}}),
            ("agent", {"id": 1, "result": {"userAgent": user_agent}}),
            ("client", {"id": 2, "method": "thread/start", "params": {}}),
            ("agent", {"id": 2, "result": {"thread": {"id": "t1"}, "model": "m"}}),
        ])
        events = [json.loads(b) for b in run_whole("codex", lines)]
        return next(e["payload"] for e in events if e["type"] == "session.configured")

    assert configured("codex_cli_rs/0.99.1 (Mac OS 15.1.0; arm64) iTerm.app/3.5")[
        "runtimeVersion"] == "0.99.1"
    assert "runtimeVersion" not in configured("custom agent")
    assert "runtimeVersion" not in configured("codex_cli_rs/dev (linux)")
