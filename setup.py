"""The distribution's layout, and the optional compiled build of the adapter core (the
rest of the project is in pyproject.toml).

One top-level name. The repository's three packages, `topics`, `adapters` and
`pipeline`, are top-level there: `python -m pipeline.cli`, the tests and an editable
install (`pip install -e .`) import them under those names. A built distribution (a
wheel, and what `pip install .` installs) ships them inside `canonflow` instead, as
`canonflow.topics`, `canonflow.adapters` and `canonflow.pipeline`, so that it installs
no top-level name but its own and sits beside any other package (PyPI's `adapters`, for
one). The build copies each module there and rewrites its imports of the three
(`from topics.x import y` becomes `from canonflow.topics.x import y`), and each string
literal that is a whole dotted name in them (`"adapters.claude"`, `"pipeline.cli"`:
the packages imported by name, the `-m` of a child process). The installed code then
never imports a top-level `topics`, `adapters` or `pipeline`. The source is not
renamed: the rewrite is mechanical, and the wheel test installs the result in a fresh
venv and runs it.

With CANONFLOW_COMPILE=1, the translator modules are compiled with mypyc (shipped with
mypy, which must then be installed in the build environment), in place only:

    CANONFLOW_COMPILE=1 python setup.py build_ext --inplace   # as make does

They are the same Python source, run as C extensions: `canonflow bench` measures the
adapter core about 1.6x faster that way. Without the variable nothing is compiled and
the project is pure Python. The structs they use live in modules that are never
compiled (adapters/core/contract.py, a runtime's `state.py` and `wire.py`): mypyc drops
class keywords. Nor are the packages' `__init__.py` (re-exports only) or a runtime's
`sources.py` (where its files live, read by the pipeline) compiled.
"""

import io
import os
import re
import sys
import tokenize
import warnings
from collections.abc import Iterable
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
#: The repository's top-level packages, shipped inside `canonflow`.
ROOTS = ("topics", "adapters", "pipeline")
#: A string literal that names a module (or `module:attribute`) of the three, whole.
_DOTTED = re.compile(rf"(?:{'|'.join(ROOTS)})(?:\.\w+)+(?::\w+)?")
#: An import line in a triple-quoted string (the code of a `python -c` child).
_IMPORT_LINE = re.compile(rf"^(\s*(?:from|import) )(?=(?:{'|'.join(ROOTS)})\b)", re.M)
#: Modules of the conversation core that are never compiled.
UNCOMPILED = ("__init__.py", "contract.py")
#: Modules of a runtime's package that are never compiled: re-exports, structs (its
#: state and its typed native messages), where its files live.
UNCOMPILED_RUNTIME = ("__init__.py", "state.py", "wire.py", "sources.py")


def _modules(package: Path, skip: tuple[str, ...]) -> list[str]:
    return [p.relative_to(HERE).as_posix() for p in sorted(package.glob("*.py"))
            if p.name not in skip]


def compiled(runtimes: Iterable) -> list[str]:
    """The modules mypyc compiles, as paths from here: the conversation core but its
    structs, and every module of each registered runtime's package (topics.runtimes)
    but its structs, its re-exports and its file locations."""
    packages = (HERE / r.package.replace(".", "/") for r in runtimes)
    return [*_modules(HERE / "adapters" / "core", UNCOMPILED),
            *(m for package in packages for m in _modules(package, UNCOMPILED_RUNTIME))]


def ext_modules() -> list:
    if os.environ.get("CANONFLOW_COMPILE", "") != "1":
        return []
    from mypyc.build import mypycify

    sys.path.insert(0, str(HERE))  # the registry, from this source tree
    from topics.runtimes import RUNTIMES

    return mypycify(compiled(RUNTIMES), opt_level="3", group_name="adapters.compiled")


def rewrite(source: str) -> str:
    """`source` with its absolute imports of the three packages, and its string literals
    that are a whole dotted name in them, moved under `canonflow.`."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, int, str]] = []  # (row, col, end row, end col, text)
    statement_start = True  # the next token opens a statement
    mode = ""  # "from": before `import` of a from-import; "import": an import statement
    expect_module = False  # the next NAME is a module name of the statement
    # `import topics.runtimes` binds `topics`: its rewrite binds it with a from-import
    binds: list[str] = []
    last_end = (0, 0)
    for tok in tokens:
        kind, text = tok.type, tok.string
        if kind in (tokenize.NL, tokenize.COMMENT, tokenize.ENCODING):
            continue
        if kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) or text in (";", ":"):
            if binds:
                edits.append((*last_end, *last_end, f"; from canonflow import {', '.join(binds)}"))
            statement_start, mode, expect_module, binds = True, "", False, []
            continue
        last_end = tok.end
        if statement_start and text in ("from", "import"):
            mode, expect_module = text, True
        elif kind == tokenize.NAME and expect_module:
            if text in ROOTS:
                edits.append((*tok.start, *tok.start, "canonflow."))
                if mode == "import":
                    binds.append(text)
            expect_module = False
        elif mode == "from" and text == "import":
            mode = ""
        elif mode == "import" and text == ",":
            expect_module = True
        elif mode == "import" and text == "as" and binds:
            binds.pop()  # the last name is bound as its alias
        elif kind == tokenize.STRING and text[0] in "'\"" and _DOTTED.fullmatch(text[1:-1]):
            edits.append((*tok.start, *tok.end, f"{text[0]}canonflow.{text[1:-1]}{text[0]}"))
        elif kind == tokenize.STRING and text[:3] in ('"""', "'''"):
            edits.append((*tok.start, *tok.end, _IMPORT_LINE.sub(r"\1canonflow.", text)))
        statement_start = False
    for row, col, end_row, end_col, text in reversed(edits):
        lines[row - 1:end_row] = [lines[row - 1][:col] + text + lines[end_row - 1][end_col:]]
    return "".join(lines)


class BuildPy(build_py):
    """Builds the distribution's layout: each of the three packages under `canonflow`,
    its modules rewritten (rewrite); an editable install keeps the repository's."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for path in Path(self.build_lib, "canonflow").rglob("*.py"):
            path.write_text(rewrite(path.read_text(encoding="utf-8")), encoding="utf-8")


class BuildExt(build_ext):
    """The compiled modules' names are the repository's (`adapters.core...`): they are
    built in place, never into a distribution, which would install them as top-level
    `adapters` again."""

    def run(self) -> None:
        if self.extensions and not self.inplace:
            raise SystemExit("setup.py: CANONFLOW_COMPILE=1 builds in place only "
                             "(python setup.py build_ext --inplace, as make does)")
        super().run()


def layout() -> dict:
    """The packages and where they come from: the repository's top-level packages for an
    editable install, else everything under `canonflow` (the module docstring)."""
    found = find_packages(include=[f"{root}*" for root in ROOTS])
    data = {"pipeline.tools": ["samples/*.jsonl"], "pipeline.views": ["ui_static/*"],
            "topics": ["canonflow.schema.json"]}
    if "editable_wheel" in sys.argv:  # setuptools' PEP 660 build (pip install -e)
        return {"packages": ["canonflow", *found], "package_data": data}
    return {"packages": ["canonflow", *(f"canonflow.{p}" for p in found)],
            "package_dir": {f"canonflow.{p}": p.replace(".", "/") for p in found},
            "package_data": {f"canonflow.{p}": v for p, v in data.items()}}


if __name__ == "__main__":  # as setuptools runs it; a test imports `compiled`
    # setuptools before 67 calls its `[tool.setuptools]` table of pyproject.toml "beta"
    # on every build (_BetaConfiguration): a warning about setuptools, not this project
    warnings.filterwarnings("ignore", message=r"Support for `\[tool\.setuptools\]`")
    setup(ext_modules=ext_modules(), cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
          **layout())
