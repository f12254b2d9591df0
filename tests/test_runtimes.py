"""A runtime is registered in one place (topics.runtimes): a toy runtime added there,
with its adapter package, is picked up by everything that lists runtimes.

The toy is added as a newcomer would add a runtime, in a copy of the project: its
package under adapters/, one line in the registry's list. The catalog's constants are
derived once, at import, so the copy is read by a process of its own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from topics.runtimes import RUNTIMES

ROOT = Path(__file__).resolve().parents[1]

TOY_INIT = '''"""toy: a made-up runtime (tests/test_runtimes.py)."""

from adapters.toy.translator import (
    IGNORED,
    initial,
    message_id,
    provider,
    raw_source,
    state_type,
    translate,
)

__all__ = ["IGNORED", "initial", "message_id", "provider", "raw_source", "state_type",
           "translate"]
'''

TOY_STATE = '''from adapters.core.contract import Stored


class State(Stored, frozen=True, kw_only=True):
    turns: int = 0
'''

TOY_TRANSLATOR = '''"""toy: `{"type": "say", "text": ...}` lines, one turn each -> canonical events."""

from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import Emitter, replace
from topics.canonical import (
    ContentDelta,
    ContentDeltaPayload,
    ItemCompleted,
    ItemPayload,
    ItemStarted,
    TurnCompleted,
    TurnCompletedPayload,
    TurnStarted,
    TurnStartedPayload,
)
from adapters.toy.state import State

provider = "toy"
raw_source = "toy.jsonl"
message_id = None
state_type = State
IGNORED: frozenset[str] = frozenset()


def initial() -> State:
    return State()


def translate(state: State, msg: Message, out: Emitter) -> State:
    kind = msg.obj.get("type")
    text = msg.obj.get("text")
    out.native_type = str(kind)
    if kind != "say":
        out.unknown(str(kind))
        return state
    if not isinstance(text, str):
        raise MalformedRecord("say.text must be a string")
    n = state.turns + 1
    turn, item = out.id("trn", str(n)), out.id("itm", str(n))
    out.emit(TurnStarted, TurnStartedPayload(), turn=turn)
    out.emit(ItemStarted, ItemPayload(itemType="assistant_message"), turn=turn, item=item)
    out.emit(ContentDelta, ContentDeltaPayload(streamKind="assistant_text", delta=text),
             turn=turn, item=item)
    out.emit(ItemCompleted, ItemPayload(itemType="assistant_message", status="completed",
                                        text=text), turn=turn, item=item)
    out.emit(TurnCompleted, TurnCompletedPayload(state="completed"), turn=turn)
    return replace(state, turns=n)
'''

# run in the child, from the project: register the toy, then read what derives from it
CHILD = '''
import io, json, runpy, sys
import topics.runtimes as runtimes
from adapters import get, providers
from pipeline.tools.manifests import strimzi_topics
from pipeline.tools.replay import replay
from topics.catalog import CATALOG, PROVIDERS, RAW_TOPICS, changelog_topics
from topics.schema import schema

def replayed(view):
    out, err = io.BytesIO(), io.BytesIO()
    replay("toy", [("toy.jsonl", io.BytesIO(sys.argv[1].encode()))], out, err,
           fmt="native", session="s1", include_raw=False, view=view)
    assert not err.getvalue(), err.getvalue()
    return [json.loads(line) for line in out.getvalue().splitlines()]

print(json.dumps({
    "providers": list(PROVIDERS),
    "raw_topic": RAW_TOPICS["toy"],
    "catalog": [t.name for t in CATALOG if t.provider == "toy"],
    "changelogs": [t.name for t in changelog_topics("app") if "toy" in t.name],
    "manifests": [m["spec"]["topicName"] for m in strimzi_topics(3, 1, "c")
                  if "toy" in m["spec"]["topicName"]],
    "schema": schema()["x-canonflow-providers"],
    "adapters": [list(providers()), get("toy").raw_source],
    "events": [e["type"] for e in replayed("canonical")],
    "chat": [(r["type"], r.get("content") or r.get("result")) for r in replayed("chat")],
    "compiled": runpy.run_path("setup.py", run_name="setup")["compiled"](runtimes.RUNTIMES),
}))
'''


TOY_LINE = '    Runtime(id="toy", name="Toy", package="adapters.toy", raw_topic="agents.raw.toy"),\n'


def _project_with_toy(dest: Path) -> Path:
    """A copy of the project with the toy runtime: its package and its registry line."""
    dest.mkdir()
    for name in ("topics", "adapters", "pipeline"):
        shutil.copytree(ROOT / name, dest / name,
                        ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(ROOT / "setup.py", dest / "setup.py")
    package = dest / "adapters" / "toy"
    package.mkdir()
    (package / "__init__.py").write_text(TOY_INIT)
    (package / "state.py").write_text(TOY_STATE)
    (package / "translator.py").write_text(TOY_TRANSLATOR)
    registry = dest / "topics" / "runtimes.py"
    text = registry.read_text()
    end = text.index("\n)\n", text.index("RUNTIMES: tuple[Runtime, ...] = (")) + 1
    registry.write_text(text[:end] + TOY_LINE + text[end:])
    return dest


def test_a_runtime_registered_once_reaches_the_catalog_schema_adapters_chat_and_build(
        tmp_path):
    project = _project_with_toy(tmp_path / "project")
    native = '{"type": "say", "text": "Hello from the toy."}\n'
    proc = subprocess.run([sys.executable, "-c", CHILD, native], cwd=project,
                          env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert got["providers"][-1] == "toy" and len(got["providers"]) == len(RUNTIMES) + 1
    assert got["raw_topic"] == "agents.raw.toy"
    assert got["catalog"] == ["agents.raw.toy"]
    assert got["changelogs"] == ["app-sessions.toy-changelog", "app-items.toy-changelog"]
    assert got["manifests"] == ["agents.raw.toy", "canonflow-sessions.toy-changelog",
                                "canonflow-items.toy-changelog"]
    assert got["schema"]["toy"] == "Toy"
    assert got["adapters"] == [got["providers"], "toy.jsonl"]
    assert got["events"] == ["turn.started", "item.started", "content.delta",
                             "item.completed", "turn.completed"]
    assert got["chat"] == [["text", "Hello from the toy."], ["done", "Hello from the toy."]]
    assert got["compiled"][-1] == "adapters/toy/translator.py"
    assert "adapters/codex/translator.py" in got["compiled"]


def test_the_registry_lists_each_runtime_once_with_its_package():
    from adapters import get, providers
    from topics.runtimes import RUNTIMES

    ids = [r.id for r in RUNTIMES]
    assert len(set(ids)) == len(ids)
    assert len({r.raw_topic for r in RUNTIMES}) == len(ids)
    assert providers() == tuple(ids)
    for r in RUNTIMES:
        assert get(r.id).provider == r.id
        assert (ROOT / r.package.replace(".", "/") / "translator.py").is_file()
