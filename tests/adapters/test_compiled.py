"""The compiled build (`make compiled`, mypyc) translates exactly like the source.

The translator modules are built with mypyc into a copy of the project (or the tree's
own build is copied there, when `make` has just made it), and the same inputs go
through that copy and through a pure-Python copy, each in a process of its
own: every captured conversation as recorded, then again with about a third of its
lines damaged (fields removed, nulled, or given another type). Both builds must give
the same canonical events and the same failures, byte for byte. Compiled code checks
the declared types at run time where Python does not, so a damaged line is where the
two could part.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import random
import runpy
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import msgspec
import pytest

from adapters import Line, stale_extensions
from tests.adapters.harness import read_capture
from topics.runtimes import RUNTIMES

ROOT = Path(__file__).resolve().parents[2]
CAPTURED = ROOT / "tests" / "fixtures" / "captured"


# Both travel as msgpack arrays, which the child reads and writes as tuples (it imports
# only the project copy, not this module).
class Conversation(msgspec.Struct, array_like=True):
    provider: str
    lines: list[Line]


class Outcome(msgspec.Struct, array_like=True):
    events: list[bytes]
    failures: list[str]


# run in the child: each conversation record by record, the session state encoded and
# decoded between records as the pipeline's tables do, its spooled chunks in a spool
CHILD = """
import sys
import msgspec
from adapters import Line, MemorySpool, Session, build, get, new_session, translate_record
from topics.canonical import encode_event

convs = msgspec.msgpack.decode(open(sys.argv[1], "rb").read(),
                               type=list[tuple[str, list[Line]]])
out = []
for provider, lines in convs:
    t = get(provider)
    codec = msgspec.msgpack.Decoder(Session[t.state_type])
    session, spool = new_session(t), MemorySpool()
    for n, line in enumerate(lines):
        session, events, failures = translate_record(t, session, "sid", [line], offset=n,
                                                     spool=spool)
        session = codec.decode(msgspec.msgpack.encode(session))
        out.append(([encode_event(e) for e in events],
                    [f"{type(f.error).__name__}: {f.error}" for f in failures]))
sys.stdout.buffer.write(msgspec.msgpack.encode([build(), out]))
"""

_VALUES = [None, 0, 1, -1, 2**70, 1.5, True, False, "", "x", [], [1], {}, {"a": None},
           "completed", "assistant"]


def _damage(obj: object, rng: random.Random, depth: int = 0) -> None:
    """Remove one field of `obj`, or give it another value, somewhere in its tree."""
    if isinstance(obj, dict) and obj:
        key = rng.choice(list(obj))
        roll = rng.random()
        if roll < 0.25:
            del obj[key]
        elif roll < 0.6 or depth > 4 or not isinstance(obj[key], dict | list):
            obj[key] = copy.deepcopy(rng.choice(_VALUES))
        else:
            _damage(obj[key], rng, depth + 1)
    elif isinstance(obj, list) and obj:
        i = rng.randrange(len(obj))
        if rng.random() < 0.5 and isinstance(obj[i], dict | list):
            _damage(obj[i], rng, depth + 1)
        else:
            obj[i] = copy.deepcopy(rng.choice(_VALUES))


def _inputs(copies: int) -> list[Conversation]:
    rng = random.Random(20261130)
    convs = []
    for path in sorted(CAPTURED.glob("*/*.capture.jsonl")):
        lines = read_capture(path)
        convs.append(Conversation(path.parent.name, lines))
        for _ in range(copies):
            damaged = []
            for line in lines:
                if rng.random() < 0.3:
                    obj = json.loads(line.data)
                    for _ in range(rng.randrange(1, 4)):
                        _damage(obj, rng)
                    line = Line(json.dumps(obj).encode(), line.origin, line.time_ms)
                damaged.append(line)
            convs.append(Conversation(path.parent.name, damaged))
    return convs


def _copy_project(dest: Path) -> Path:
    dest.mkdir()
    for name in ("adapters", "topics"):
        shutil.copytree(ROOT / name, dest / name,
                        ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    return dest


def _copy_fresh_build(dest: Path) -> bool:
    """Copy the tree's mypyc extensions into `dest` when they are newer than setup.py and
    every adapter source: `make test` has just built them (`make compiled`) with the same
    setup.py, so a second build would only spend minutes of compiler time. False when
    there is no such build (interpreted, or a source edited since): build then."""
    extensions = sorted((ROOT / "adapters").rglob("*.so"))
    if not extensions:
        return False
    built = max(p.stat().st_mtime for p in extensions)
    sources = [ROOT / "setup.py", *(ROOT / "adapters").rglob("*.py")]
    if any(p.stat().st_mtime > built for p in sources):
        return False
    for p in extensions:
        shutil.copy2(p, dest / p.relative_to(ROOT))
    return True


def _translate(project: Path, inputs: Path) -> tuple[str, list[Outcome]]:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(inputs)], cwd=project,
                          env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"},
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    build, out = msgspec.msgpack.decode(proc.stdout, type=tuple[str, list[Outcome]])
    return build, out


def test_the_compiled_build_gives_the_same_events_and_failures_as_the_source(tmp_path):
    if importlib.util.find_spec("mypyc") is None:
        pytest.skip("mypyc is not installed (it comes with mypy, in the test extra)")
    if not shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0]):
        pytest.skip("no C compiler to build the mypyc extensions with")
    inputs = tmp_path / "inputs.msgpack"
    convs = _inputs(copies=4)
    inputs.write_bytes(msgspec.msgpack.encode(convs))

    pure = _copy_project(tmp_path / "pure")
    compiled = _copy_project(tmp_path / "compiled")
    if not _copy_fresh_build(compiled):
        built = subprocess.run(
            [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace", "--parallel", "2"],
            cwd=compiled, env={"CANONFLOW_COMPILE": "1", "PATH": "/usr/bin:/bin",
                               "HOME": str(tmp_path)},
            capture_output=True, timeout=600)
        assert built.returncode == 0, built.stderr.decode()[-3000:]
    built_modules = sorted(str(p.relative_to(compiled).with_name(p.name.split(".")[0]))
                           for p in (compiled / "adapters").rglob("*.so"))
    # setup.py's list: the conversation core but its structs, every runtime's modules but
    # its structs, re-exports and file locations
    wanted = runpy.run_path(str(ROOT / "setup.py"), run_name="setup")["compiled"](RUNTIMES)
    assert "adapters/core/contract.py" not in wanted and len(wanted) > len(RUNTIMES)
    assert all(f"{r.package.replace('.', '/')}/translator.py" in wanted for r in RUNTIMES)
    assert built_modules == sorted([*(m.removesuffix(".py") for m in wanted),
                                    "adapters/compiled__mypyc"])

    build_p, out_p = _translate(pure, inputs)
    build_c, out_c = _translate(compiled, inputs)
    assert (build_p, build_c) == ("interpreted", "mypyc")
    assert len(out_p) == sum(len(c.lines) for c in convs)
    # the damage reaches the translators: many lines fail, many still give events
    failed = sum(1 for o in out_p if o.failures)
    assert failed > 500 and sum(len(o.events) for o in out_p) > 2_000
    diverging = [i for i, (p, c) in enumerate(zip(out_p, out_c, strict=True)) if p != c]
    assert not diverging, (f"{len(diverging)} lines differ, first: "
                           f"{out_p[diverging[0]]} != {out_c[diverging[0]]}")


def test_a_source_edited_after_its_extension_was_built_is_reported(tmp_path):
    (tmp_path / "codex").mkdir()
    source = tmp_path / "codex" / "translator.py"
    source.write_text("")
    (tmp_path / "codex" / "state.py").write_text("")  # never compiled: not stale
    shim = tmp_path / "codex" / "translator.cpython-311-x86_64-linux-gnu.so"  # loads the group
    group = tmp_path / "compiled__mypyc.cpython-311-x86_64-linux-gnu.so"  # the code
    shim.write_bytes(b"")
    group.write_bytes(b"")
    os.utime(shim, (1_000, 1_000))
    os.utime(source, (2_000, 2_000))
    os.utime(group, (3_000, 3_000))
    assert stale_extensions(tmp_path) == []
    os.utime(source, (4_000, 4_000))
    assert stale_extensions(tmp_path) == ["codex/translator.py"]
