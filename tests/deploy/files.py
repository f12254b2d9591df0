"""Loading the files under deploy/ for the tests, and small parsers they share.

No container engine runs on these machines, so the deploy files are tested by
parsing them and checking them against each other, the catalog and the CLI.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.pins import ROOT, pyproject

DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
#: Where the Grafana dashboard lives; written separately, loaded by the provisioning.
DASHBOARD = DEPLOY / "grafana" / "canonflow.json"

__all__ = ["DASHBOARD", "DEPLOY", "K8S", "ROOT", "compose", "dockerfile", "environment",
           "interpolate", "k8s_objects", "load_yaml", "load_yaml_all", "pyproject"]


def load_yaml(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def load_yaml_all(path: Path) -> list[Any]:
    with open(path, encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


def compose() -> dict[str, Any]:
    return load_yaml(DEPLOY / "compose.yaml")


#: ${VAR}, ${VAR:?message}, ${VAR?message}, ${VAR:-default}, ${VAR-default}, and $$.
_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[?-])([^}]*))?\}")


def interpolate(text: str, env: dict[str, str]) -> str:
    """`text` with compose's variable syntax substituted from `env`, as `docker compose`
    does it. Raises KeyError for a required variable (`:?`, `?`) that is unset (or
    empty, for `:?`)."""
    def one(m: re.Match[str]) -> str:
        if m.group() == "$$":
            return "$"
        name, op, arg = m.group(1), m.group(2), m.group(3)
        value = env.get(name)
        empty = value is None or (value == "" and op is not None and op.startswith(":"))
        if op in ("?", ":?"):
            if empty:
                raise KeyError(f"{name}: {arg}")
            return value or ""
        if op in ("-", ":-"):
            return arg if empty else value or ""
        return value or ""

    return _VARIABLE.sub(one, text)


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A compose service's environment as a dict (compose accepts a list or a map)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def k8s_objects() -> list[tuple[str, dict[str, Any]]]:
    """(file name, object) for every Kubernetes object in deploy/k8s, kustomization aside."""
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out += [(path.name, doc) for doc in load_yaml_all(path)]
    return out


class Instruction:
    """One Dockerfile instruction: keyword, the raw argument text, and its stage index."""

    def __init__(self, keyword: str, args: str, stage: int):
        self.keyword = keyword
        self.args = args
        self.stage = stage

    def json_or_words(self) -> list[str]:
        """The exec form (a JSON array) as a list, or the shell form split into words."""
        text = self.args.strip()
        if text.startswith("["):
            return json.loads(text)
        return shlex.split(text)

    def __repr__(self) -> str:
        return f"{self.keyword} {self.args}"


def dockerfile(path: Path = DEPLOY / "Dockerfile") -> list[Instruction]:
    """The instructions of a Dockerfile: comments dropped, continuation lines joined.

    Raises ValueError for a line that is no instruction.
    """
    instructions: list[Instruction] = []
    stage = -1
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if not keyword.isalpha():
            raise ValueError(f"{path}: not an instruction: {line!r}")
        if keyword == "FROM":
            stage += 1
        instructions.append(Instruction(keyword, args.strip(), stage))
    return instructions
