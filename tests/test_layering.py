"""Imports flow one way: topics <- adapters <- pipeline (STYLE.md "Layering")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "topics": {"topics"},
    "adapters": {"topics", "adapters"},
    "pipeline": {"topics", "adapters", "pipeline"},
}
IO_MODULES = {"faust", "aiokafka", "asyncio", "mode", "socket", "subprocess", "random", "uuid",
              "time", "threading"}
OURS = set(ALLOWED)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_flow_one_way(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        ours = _imports(path) & OURS
        assert ours <= ALLOWED[package], f"{path.name} imports {sorted(ours - ALLOWED[package])}"


@pytest.mark.parametrize("package", ["topics", "adapters"])
def test_only_the_pipeline_does_io_or_reads_clocks(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = _imports(path) & IO_MODULES
        assert not bad, f"{package}/{path.name} imports {sorted(bad)}"


def test_topics_import_only_stdlib_and_msgspec():
    stdlib = set(sys.stdlib_module_names)
    for path in sorted((ROOT / "topics").rglob("*.py")):
        extra = _imports(path) - stdlib - {"msgspec", "topics", "__future__"}
        assert not extra, f"topics/{path.name} imports {sorted(extra)}"


def test_importing_packages_has_no_side_effects_and_replay_stays_light():
    code = ("import sys, topics, adapters, pipeline, pipeline.cli, pipeline.tools.replay;"
            "heavy = [m for m in ('faust', 'aiokafka', 'mode') if m in sys.modules];"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"importing the CLI loaded {out.stdout.strip()}"


def test_the_consumer_library_imports_no_faust():
    """A consumer service depends on the contract and aiokafka, not on the worker."""
    code = ("import sys, pipeline.cluster.consumer;"
            "print(','.join(m for m in ('faust', 'mode') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the consumer library loaded {out.stdout.strip()}"
