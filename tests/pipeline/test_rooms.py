"""The pipeline's rooms stay rooms (README "Layout"): read from the source's AST, so a
new import that breaks them fails here, not in a reader's head.

- No import cycle between two modules of pipeline/ (imports inside functions count:
  a cycle deferred to call time is still a cycle a reader must untangle).
- Each room imports only the rooms below it; above all, nothing that runs in the
  worker (pipeline.worker and what it uses) imports a tool or a viewer.
- Only the Faust doors (pipeline/worker/faust_door.py: tables, acknowledgements,
  batches; pipeline/worker/faust_consumer.py: the consumer and table recovery) import
  Faust's or mode's internals, touch a table's local store, its changelog or persisted
  offsets, Faust's current-event variable, or the consumer's private books.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"
DOORS = ("pipeline.worker.faust_door", "pipeline.worker.faust_consumer")

#: The rooms each room may import (its own always). pipeline.settings and the package
#: itself are rooms of their own; the CLI, the entry point, may import every room.
ROOMS: dict[str, set[str]] = {
    "pipeline": set(),
    "settings": set(),
    "privacy": set(),
    "cluster": {"settings"},
    "ops": {"settings", "cluster"},
    "worker": {"settings", "cluster", "privacy", "ops"},
    "views": {"settings", "cluster", "ops"},
    # the shipper redacts the dead letter of a line too long to ship, as the worker would
    "transcripts": {"settings", "cluster", "privacy"},
    "tools": {"settings", "cluster", "privacy", "ops", "worker", "views", "transcripts"},
}
#: What the worker process runs: none of it may reach a tool or a viewer.
IN_THE_WORKER = {"settings", "privacy", "cluster", "ops", "worker"}
#: Faust's public modules (its documented API); every other faust.* module, and mode
#: (Faust's service library), is an internal.
FAUST_PUBLIC = {"faust", "faust.types", "faust.auth"}
#: Attributes that reach under Faust's public API: the current-event variable, a
#: table's changelog and persisted offsets, the consumer's flow, a store's private parts,
#: the consumer's books of its partitions and its aiokafka thread.
INTERNAL_ATTRIBUTES = {"_current_event", "set_persisted_offset", "send_changelog",
                       "changelog_topic", "stop_flow", "resume_flow", "_db_for_partition",
                       "_key_index", "_key_partition", "_recovery", "unacked",
                       "_read_offset", "_committed_offset", "_acked", "_acked_index", "_gap",
                       "_thread", "_fetch_max_wait_ms"}
#: `<table>.data` (a table's local store) on a name that says it is a table.
TABLE_NAME = re.compile(r"(^|_)(table|tables|windows|sessions|items|store|t)$")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PIPELINE.rglob("*.py")):
        parts = path.relative_to(PIPELINE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _imported(name: str) -> set[str]:
    """The pipeline modules `name` imports (a `from package import module` names the
    module), anywhere in its source."""
    found: set[str] = set()
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imported(name) for name in MODULES}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "pipeline"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_rooms_are_the_ones_the_readme_names():
    assert {_room(m) for m in MODULES} - {"cli"} == set(ROOMS)


def test_no_import_cycle_between_pipeline_modules():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m) != "cli"))
def test_each_room_imports_only_the_rooms_below_it(module: str):
    room = _room(module)
    bad = sorted(m for m in GRAPH[module] if _room(m) not in ROOMS[room] | {room})
    assert not bad, f"{module} ({room}) imports {bad}"


def test_nothing_the_worker_runs_imports_a_tool_or_a_viewer():
    for module, imported in GRAPH.items():
        if _room(module) in IN_THE_WORKER:
            bad = sorted(m for m in imported if _room(m) in ("tools", "views", "cli"))
            assert not bad, f"{module} runs in the worker and imports {bad}"


def _faust_internals(tree: ast.AST) -> list[str]:
    """Where `tree` reaches into Faust's internals (see the module doc)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names
                      if a.name.split(".")[0] in ("faust", "mode") and a.name not in FAUST_PUBLIC]
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root == "mode" or (root == "faust" and node.module not in FAUST_PUBLIC):
                found.append(f"from {node.module}")
            elif root == "faust":
                found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Attribute):
            if node.attr in INTERNAL_ATTRIBUTES:
                found.append(f".{node.attr} (line {node.lineno})")
            elif node.attr == "data" and TABLE_NAME.search(_name_of(node.value)):
                found.append(f"{_name_of(node.value)}.data (line {node.lineno})")
            elif isinstance(node.value, ast.Name) and node.value.id in ("faust", "mode") and (
                    node.attr.startswith("_") or node.value.id == "mode"
                    or node.attr in ("streams", "tables", "stores", "transport")):
                found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
    return found


def _name_of(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def test_only_the_faust_doors_reach_into_faust():
    for module, tree in TREES.items():
        if module not in DOORS:
            assert _faust_internals(tree) == [], f"{module} goes around the Faust doors"
    for door in DOORS:
        assert _faust_internals(TREES[door]), f"{door} no longer needs Faust's internals?"


@pytest.mark.parametrize("source", [
    "from faust.tables import TableManager",
    "from faust.streams import _current_event",
    "import mode.utils",
    "self.windows.data.get(key)",
    "table.data.set_persisted_offset(tp, 1)",
    "t.changelog_topic.get_topic_name()",
    "faust.streams._current_event.set(None)",
    "app.consumer._read_offset.pop(tp, None)",
])
def test_the_door_check_sees_each_way_around(source: str):
    assert _faust_internals(ast.parse(source))
