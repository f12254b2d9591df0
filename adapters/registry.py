"""The adapter registry: provider id -> adapter package, derived from the runtime
registry (topics.runtimes, the one place a runtime is registered).

Each adapter package is itself a `Translator` (adapters.core.record: the attributes
`provider`, `raw_source`, `state_type`, `initial`, `translate`, `message_id`,
`IGNORED`, re-exported from its `translator.py`). Packages are imported on first use,
so replaying one provider loads one adapter. The registry is read at each call: a
test may extend it (topics.runtimes.RUNTIMES).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import topics.runtimes
from adapters.core.record import Translator


class UnknownProvider(KeyError):
    """No adapter is registered for this provider id."""


def packages() -> dict[str, str]:
    """provider id -> the name of its adapter package, in catalog order."""
    return {r.id: r.package for r in topics.runtimes.RUNTIMES}


def providers() -> tuple[str, ...]:
    """Every provider id with a registered adapter package."""
    return tuple(r.id for r in topics.runtimes.RUNTIMES)


def build() -> str:
    """How the translators run: "mypyc" once `make compiled` has built them as C
    extensions (setup.py), else "interpreted"."""
    import adapters.core.record

    return "interpreted" if adapters.core.record.__file__.endswith(".py") else "mypyc"


def stale_extensions(here: Path = Path(__file__).parent) -> list[str]:
    """The modules whose source changed after they were compiled: Python imports the
    extension, so those edits do not run until `make compiled` (or `make interpreted`)."""
    extensions = sorted(here.rglob("*.so"))
    if not extensions:
        return []
    # the code is in the group's shared library (adapters/compiled__mypyc*.so); a
    # module's own extension only loads it, and is rebuilt only when its name changes
    built = max(ext.stat().st_mtime for ext in extensions)
    sources = (ext.with_name(f"{ext.name.split('.')[0]}.py") for ext in extensions)
    return [src.relative_to(here).as_posix() for src in sources
            if src.exists() and src.stat().st_mtime > built]


def get(provider: str) -> Translator[Any]:
    """The translator of `provider`. Raises UnknownProvider (also when the registered
    package says it translates another provider), ImportError when the package is
    missing."""
    known = packages()
    name = known.get(provider)
    if name is None:
        raise UnknownProvider(f"no adapter for provider {provider!r}; known: {', '.join(known)}")
    module: ModuleType = importlib.import_module(name)
    if getattr(module, "provider", None) != provider:  # a registry line pointing elsewhere
        raise UnknownProvider(f"adapter package {name} translates {getattr(module, 'provider', None)!r}, "
                              f"not {provider!r} (topics.runtimes)")
    return module  # type: ignore[return-value]
