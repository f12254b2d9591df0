"""Optional compiled build of the adapter core (the rest of the project is in pyproject.toml).

With CANONFLOW_COMPILE=1, the translator modules are compiled with mypyc (shipped with
mypy, which must then be installed in the build environment):

    CANONFLOW_COMPILE=1 pip install --no-build-isolation .   # make does it in place

They are the same Python source, run as C extensions: `canonflow bench` measures the
adapter core about 1.6x faster that way. Without the variable nothing is compiled and
the project is pure Python. The structs they use live in modules that are never
compiled (adapters/core/contract.py, a runtime's `state.py` and `wire.py`): mypyc drops
class keywords. Nor are the packages' `__init__.py` (re-exports only) or a runtime's
`sources.py` (where its files live, read by the pipeline) compiled.
"""

import os
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
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


if __name__ == "__main__":  # as setuptools runs it; a test imports `compiled`
    # setuptools before 67 calls its `[tool.setuptools]` table of pyproject.toml "beta"
    # on every build (_BetaConfiguration), the table where package discovery and package
    # data are declared: a warning about setuptools, not about this project.
    warnings.filterwarnings("ignore", message=r"Support for `\[tool\.setuptools\]`")
    setup(ext_modules=ext_modules())
