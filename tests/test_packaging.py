"""The distribution installs one top-level name, `canonflow`, and works installed.

The wheel is built from a copy of the source, then installed with `--no-deps` in a
fresh venv; the dependencies come from this interpreter's site-packages on PYTHONPATH
(a path entry, so its `.pth` files, the editable install's among them, are not run).
Nothing of the repository is on that venv's path: what runs is what the wheel holds.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPO_TOP = ("topics", "adapters", "pipeline")
SAMPLE = "pipeline/tools/samples/claude__bash_roundtrip.jsonl"


def _can_build_wheels() -> bool:
    """The build needs setuptools 77 (pyproject's license, an SPDX expression), which
    builds wheels by itself."""
    import setuptools

    major = int(setuptools.__version__.split(".")[0])
    return major >= 77


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("canonflow", *REPO_TOP):
        shutil.copytree(ROOT / name, src / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    # without build isolation when this environment can build a wheel (the test extra
    # has setuptools>=77); else pip fetches pyproject's build requirements
    isolation = ["--no-build-isolation"] if _can_build_wheels() else []
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q",
                    "-w", str(out), str(src)], check=True, cwd=src)
    (built,) = out.glob("canonflow-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    env_dir = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]  # the dependencies only
    subprocess.run([env_dir / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True, env=env)
    return env_dir, env


def test_the_wheel_installs_only_canonflow(wheel: Path):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n for n in names if n.endswith(".dist-info/RECORD")).rsplit("/", 1)[0]
        assert z.read(f"{info}/top_level.txt").decode().split() == ["canonflow"]
        record = [line.split(",")[0] for line in z.read(f"{info}/RECORD").decode().splitlines()]
        assert {path.split("/")[0] for path in record} == {"canonflow", info}
        # and no module of it imports the repository's top-level names
        for name in names:
            if not name.endswith(".py"):
                continue
            for node in ast.walk(ast.parse(z.read(name), name)):
                if isinstance(node, ast.Import):
                    tops = {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    tops = {node.module.split(".")[0]}
                else:
                    continue
                assert not tops & set(REPO_TOP), f"{name}:{node.lineno} imports {tops}"


def test_installed_canonflow_imports_and_runs(venv: tuple[Path, dict[str, str]],
                                              tmp_path: Path):
    env_dir, env = venv
    python, command = env_dir / "bin" / "python", env_dir / "bin" / "canonflow"
    check = ("import sys; from canonflow import Consumer; "
             "from canonflow.events import TurnCompleted, decode_event; "
             "import canonflow; print(canonflow.__file__); "
             f"print(sorted(set(sys.modules) & {set(REPO_TOP)!r}))")
    out = subprocess.run([python, "-c", check], env=env, cwd=tmp_path, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    assert out[0].startswith(str(env_dir)), out
    assert out[1] == "[]", f"top-level names imported: {out[1]}"

    version = subprocess.run([command, "--version"], env=env, cwd=tmp_path, check=True,
                             capture_output=True, text=True).stdout
    assert version.startswith("canonflow "), version

    # the adapters are imported by name (topics.runtimes): a replay runs one
    replay = ["replay", "-p", "claude", "--format", "capture", str(ROOT / SAMPLE)]
    installed = subprocess.run([command, *replay], env=env, cwd=tmp_path, capture_output=True)
    assert installed.returncode == 0, installed.stderr.decode()
    repo = subprocess.run([sys.executable, "-m", "pipeline.cli", *replay], cwd=ROOT, check=True,
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert installed.stdout and installed.stdout == repo.stdout

    # and the schema comes from the package's data, as in the repository
    schema = subprocess.run([command, "schema"], env=env, cwd=tmp_path, check=True,
                            capture_output=True).stdout
    assert schema == (ROOT / "topics" / "canonflow.schema.json").read_bytes()
