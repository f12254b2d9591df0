"""Optional compiled build of the adapter core (the rest of the project is in pyproject.toml).

With CANONFLOW_COMPILE=1, the translator modules are compiled with mypyc (shipped with
mypy, which must then be installed in the build environment):

    CANONFLOW_COMPILE=1 pip install --no-build-isolation .   # make does it in place

They are the same Python source, run as C extensions: `canonflow bench` measures the
adapter core about 1.6x faster that way. Without the variable nothing is compiled and
the project is pure Python. The structs they use live in modules that are never
compiled (adapters/core/contract.py, adapters/<runtime>/state.py): mypyc drops class
keywords. Nor are the packages' `__init__.py` (re-exports only) compiled.
"""

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
#: Modules of the conversation core that are never compiled.
UNCOMPILED = ("__init__.py", "contract.py")


def compiled(runtimes: Iterable) -> list[str]:
    """The modules mypyc compiles: the conversation core but its structs, and the
    translator of every registered runtime (topics.runtimes), as paths from here."""
    core = sorted(p.name for p in (HERE / "adapters" / "core").glob("*.py")
                  if p.name not in UNCOMPILED)
    return [*(f"adapters/core/{name}" for name in core),
            *(f"{r.package.replace('.', '/')}/translator.py" for r in runtimes)]


def ext_modules() -> list:
    if os.environ.get("CANONFLOW_COMPILE", "") != "1":
        return []
    from mypyc.build import mypycify

    sys.path.insert(0, str(HERE))  # the registry, from this source tree
    from topics.runtimes import RUNTIMES

    return mypycify(compiled(RUNTIMES), opt_level="3", group_name="adapters.compiled")


if __name__ == "__main__":  # as setuptools runs it; a test imports `compiled`
    setup(ext_modules=ext_modules())
