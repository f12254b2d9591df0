"""The pipeline's layers stay layers (README "Layout"): read from the source's AST, so
a new import that breaks them fails here, not in a reader's head.

- No import cycle between two modules of pipeline/ (imports inside functions count:
  a cycle deferred to call time is still a cycle a reader must untangle).
- Each layer imports only the layers below it; above all, nothing that runs in the
  worker (pipeline.worker and what it uses) imports a tool or a viewer.
- Only pipeline/worker/faust_internals.py (tables, acknowledgements, batches) and
  pipeline/worker/faust_consumer.py (the consumer and table recovery) import
  Faust's or mode's internals, touch a table's local store, its changelog or persisted
  offsets, Faust's current-event variable, or the consumer's private books.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"
INTERNALS = "pipeline.worker.faust_internals"
UNDER_FAUST = (INTERNALS, "pipeline.worker.faust_consumer")

#: The layers each layer may import (its own always). pipeline.settings and the package
#: itself are layers of their own; the CLI, the entry point, may import every layer.
LAYERS: dict[str, set[str]] = {
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


def _layer(module: str) -> str:
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


def test_the_layers_are_the_ones_the_readme_names():
    assert {_layer(m) for m in MODULES} - {"cli"} == set(LAYERS)


def test_no_import_cycle_between_pipeline_modules():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) != "cli"))
def test_each_layer_imports_only_the_layers_below_it(module: str):
    layer = _layer(module)
    bad = sorted(m for m in GRAPH[module] if _layer(m) not in LAYERS[layer] | {layer})
    assert not bad, f"{module} ({layer}) imports {bad}"


def test_nothing_the_worker_runs_imports_a_tool_or_a_viewer():
    for module, imported in GRAPH.items():
        if _layer(module) in IN_THE_WORKER:
            bad = sorted(m for m in imported if _layer(m) in ("tools", "views", "cli"))
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


def test_only_faust_internals_and_faust_consumer_reach_into_faust():
    for module, tree in TREES.items():
        if module not in UNDER_FAUST:
            assert _faust_internals(tree) == [], f"{module} goes around faust_internals and faust_consumer"
    for module in UNDER_FAUST:
        assert _faust_internals(TREES[module]), f"{module} no longer needs Faust's internals?"


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
def test_the_internals_check_sees_each_way_around(source: str):
    assert _faust_internals(ast.parse(source))


# ---- the worker's one commit path ------------------------------------------------

#: The modules that may publish or write a table: the commit path, the producer it
#: publishes through, and the module under Faust's API that does the local writes.
COMMIT_PATH = {"pipeline.worker.checkpoint", "pipeline.worker.output", INTERNALS}
#: Calls that publish to a topic or write a table (or its changelog).
PUBLISHING = {"publish", "write_entries", "write_tables", "note_persisted", "send",
              "send_soon", "send_and_wait", "send_batch", "send_changelog"}


def _publishing(tree: ast.AST) -> list[str]:
    """Where `tree` publishes or writes a table (see PUBLISHING), or writes to a table's
    local store (`local(t)[k] = v`, `local(t).pop(k)`)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in PUBLISHING:
                found.append(f"{name}() (line {node.lineno})")
            elif (isinstance(f, ast.Attribute) and f.attr in ("pop", "__setitem__", "clear")
                  and isinstance(f.value, ast.Call)
                  and getattr(f.value.func, "id", "") == "local"):
                found.append(f"local(...).{f.attr}() (line {node.lineno})")
        elif isinstance(node, ast.Assign | ast.Delete):
            for target in node.targets:
                if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Call)
                        and getattr(target.value.func, "id", "") == "local"):
                    found.append(f"local(...)[...] (line {node.lineno})")
    return found


def test_only_the_checkpoint_publishes_or_writes_a_table():
    """Everything the worker publishes to an output topic, and every table write, goes
    through pipeline.worker.checkpoint (the idle close and the stall watch hand it
    their outputs; the fleet stage hands it its table writes): grep finds no other."""
    worker = [m for m in MODULES if m.startswith("pipeline.worker.") and m not in COMMIT_PATH]
    assert "pipeline.worker.idle" in worker and "pipeline.worker.stall" in worker
    for module in worker:
        assert _publishing(TREES[module]) == [], f"{module} publishes around the checkpoint"
    assert _publishing(TREES["pipeline.worker.checkpoint"])


@pytest.mark.parametrize("source", [
    "await sink.publish(items, 'x')",
    "records = write_entries(table, entries)",
    "local(table)[key] = value",
    "local(table).pop(key, None)",
    "del local(table)[key]",
    "await producer.send_and_wait('t', b'v')",
])
def test_the_commit_path_check_sees_each_way_around(source: str):
    assert _publishing(ast.parse(source))
