"""The pins of the worker image: deploy/constraints.txt, made from this checkout's venv.

The image installs the project from pyproject.toml (`pip install '.[rocksdb]'`) and
takes every version from deploy/constraints.txt, which only pins and never adds a
package. This module computes what that file must pin: the installed closure of
pyproject's runtime dependencies plus the `rocksdb` extra, at the versions the
tests ran with, and the build backend. Regenerate after changing dependencies:

    .venv/bin/python -m tests.deploy.pins > deploy/constraints.txt
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
#: The extras the image installs (deploy/Dockerfile), besides the runtime dependencies.
IMAGE_EXTRAS = ("rocksdb",)
#: The build backend pyproject's [build-system] asks for, pinned too (PIP_CONSTRAINT
#: reaches pip's isolated build environment; --constraint does not).
BUILD_PINS = {"setuptools": "80.9.0"}


def pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


def image_requirements() -> list[Requirement]:
    """pyproject's runtime dependencies and those of the image's extras."""
    project = pyproject()["project"]
    reqs = list(project["dependencies"])
    for extra in IMAGE_EXTRAS:
        reqs += project["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


def closure(*, missing_ok: bool = False,
            follow: Callable[[str, str], bool] | None = None) -> tuple[dict[str, str], set[str]]:
    """Every distribution the image needs: (name -> version installed here, names not
    installed here). A missing distribution's own dependencies are unknown, and so are
    those of a distribution for which `follow(name, version)` is false.

    Raises metadata.PackageNotFoundError for a missing distribution unless `missing_ok`
    (the pins must be made where everything is installed: they are what the tests
    ran with).
    """
    found: dict[str, str] = {}
    missing: set[str] = set()
    visited: set[tuple[str, frozenset[str]]] = set()
    stack: list[tuple[Requirement, frozenset[str]]] = [(r, frozenset()) for r in
                                                        image_requirements()]
    while stack:
        req, requested = stack.pop()
        # A dependency's marker may name an extra of the package that requires it.
        if req.marker and not any(req.marker.evaluate({"extra": e})
                                  for e in (requested or {""})):
            continue
        name = canonicalize_name(req.name)
        key = (name, frozenset(req.extras))
        if key in visited:
            continue
        visited.add(key)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            if not missing_ok:
                raise
            missing.add(name)
            continue
        found[name] = dist.version
        if follow is not None and not follow(name, dist.version):
            continue
        stack += [(Requirement(r), frozenset(req.extras)) for r in dist.requires or []]
    return dict(sorted(found.items())), missing


def parse_constraints(text: str) -> dict[str, str]:
    """name -> pinned version of a constraints file. Raises ValueError for a line that
    is not `name==version` (or a comment), or a name pinned twice."""
    pins: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip() or not version.strip() or any(
                c in version for c in "<>=!~,;* "):
            raise ValueError(f"not an exact pin: {line!r}")
        key = canonicalize_name(name.strip())
        if key in pins:
            raise ValueError(f"{key} pinned twice")
        pins[key] = version.strip()
    return pins


def constraints_text() -> str:
    lines = [
        "# Pins for the worker image (deploy/Dockerfile): pip reads this as constraints, so it",
        "# fixes versions and never adds a package; what to install comes from pyproject.toml.",
        "# Generated from a venv where the tests passed; regenerate with",
        "#   .venv/bin/python -m tests.deploy.pins > deploy/constraints.txt",
    ]
    lines += [f"{name}=={version}" for name, version in closure()[0].items()]
    lines += ["# build backend ([build-system] requires)"]
    lines += [f"{name}=={version}" for name, version in BUILD_PINS.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(constraints_text())
