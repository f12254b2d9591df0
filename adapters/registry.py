"""The provider registry: provider id -> translator module.

Each adapter module is itself a `Translator` (module attributes `provider`,
`raw_source`, `state_type`, `initial`, `translate`, `IGNORED`). Modules are
imported on first use, so replaying one provider loads one adapter.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

from adapters.base import Translator

_MODULES: dict[str, str] = {
    "claude": "adapters.claude",
    "codex": "adapters.codex",
    "codex-exec": "adapters.codex_exec",
    "opencode": "adapters.opencode",
    "acp": "adapters.acp",
    "amp": "adapters.amp",
    "gemini": "adapters.gemini",
}


class UnknownProvider(KeyError):
    """No adapter is registered for this provider id."""


def providers() -> tuple[str, ...]:
    """Every provider id with a registered adapter module."""
    return tuple(_MODULES)


def build() -> str:
    """How the translators run: "mypyc" once `make compiled` has built them as C
    extensions (setup.py), else "interpreted"."""
    import adapters.base

    return "interpreted" if adapters.base.__file__.endswith(".py") else "mypyc"


def stale_extensions(here: Path = Path(__file__).parent) -> list[str]:
    """The modules whose source changed after they were compiled: Python imports the
    extension, so those edits do not run until `make compiled` (or `make interpreted`)."""
    extensions = sorted(here.glob("*.so"))
    if not extensions:
        return []
    # the code is in the group's shared library (adapters/compiled__mypyc*.so); a
    # module's own extension only loads it, and is rebuilt only when its name changes
    built = max(ext.stat().st_mtime for ext in extensions)
    sources = (here / f"{ext.name.split('.')[0]}.py" for ext in extensions)
    return [src.name for src in sources if src.exists() and src.stat().st_mtime > built]


def get(provider: str) -> Translator[Any]:
    """The translator of `provider`. Raises UnknownProvider."""
    name = _MODULES.get(provider)
    if name is None:
        raise UnknownProvider(f"no adapter for provider {provider!r}; known: {', '.join(_MODULES)}")
    module: ModuleType = importlib.import_module(name)
    return module  # type: ignore[return-value]
