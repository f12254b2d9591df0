"""Optional compiled build of the adapter core (the rest of the project is in pyproject.toml).

With CANONFLOW_COMPILE=1, the translator modules are compiled with mypyc (shipped with
mypy, which must then be installed in the build environment):

    CANONFLOW_COMPILE=1 pip install --no-build-isolation .   # make does it in place

They are the same Python source, run as C extensions: `canonflow bench` measures the
adapter core about 1.6x faster that way. Without the variable nothing is compiled and
the project is pure Python. The structs they use live in modules that are never
compiled (adapters/contract.py, adapters/*_state.py): mypyc drops class keywords.
"""

import os

from setuptools import setup

COMPILED = [
    "adapters/base.py",
    "adapters/ids.py",
    "adapters/tools.py",
    "adapters/acp.py",
    "adapters/amp.py",
    "adapters/claude.py",
    "adapters/codex.py",
    "adapters/codex_exec.py",
    "adapters/gemini.py",
    "adapters/opencode.py",
]


def ext_modules() -> list:
    if os.environ.get("CANONFLOW_COMPILE", "") != "1":
        return []
    from mypyc.build import mypycify

    return mypycify(COMPILED, opt_level="3", group_name="adapters.compiled")


setup(ext_modules=ext_modules())
