"""deploy/Dockerfile: installs the project from pyproject.toml the way the README does,
every dependency pinned, non-root, the worker web port and `canonflow run` (not built
here: no container engine)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.files import DEPLOY, ROOT, dockerfile, pyproject
from tests.deploy.pins import IMAGE_EXTRAS, closure, image_requirements, parse_constraints

CONSTRAINTS = DEPLOY / "constraints.txt"


@pytest.fixture(scope="module")
def instructions():
    return dockerfile()


def args_defaults(instructions) -> dict[str, str]:
    return dict(i.args.split("=", 1) for i in instructions if i.keyword == "ARG" and "=" in i.args)


def pip_install(instructions) -> tuple[list[str], dict[str, str]]:
    """The words after `pip install` in the one RUN that installs, and the variables set
    on that command line."""
    runs = [i for i in instructions if i.keyword == "RUN" and re.search(r"pip install", i.args)]
    assert len(runs) == 1, runs
    words = shlex.split(runs[0].args)
    at = next(n for n, w in enumerate(words) if w.endswith("pip") and words[n + 1] == "install")
    env = dict(w.split("=", 1) for w in words[:at] if "=" in w)
    return words[at + 2:], env


def install_targets(words: list[str]) -> list[str]:
    return [w for w in words if not w.startswith("-")]


def readme_install_target() -> str:
    """The target of the documented set-up command without make (docs/getting-started.md),
    `pip install -e '.[test]'`."""
    readme = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    setup = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    (command,) = re.findall(r"pip install (-e '[^']+')", setup)
    return shlex.split(command)[1]


def test_base_images_are_a_pinned_python_3_11_slim(instructions):
    defaults = args_defaults(instructions)
    stages = [i for i in instructions if i.keyword == "FROM"]
    assert len(stages) >= 1
    for stage in stages:
        image = stage.args.split()[0]
        image = re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], image)
        assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", image), image


def test_runs_canonflow_as_a_non_root_user_with_the_web_port_and_a_healthcheck(instructions):
    final = max(i.stage for i in instructions)
    last = [i for i in instructions if i.stage == final]
    users = [i.args for i in last if i.keyword == "USER"]
    assert users and re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[-1]), users
    assert "6066" in [p.split("/")[0] for i in last if i.keyword == "EXPOSE"
                      for p in i.args.split()]
    (cmd,) = [i for i in last if i.keyword == "CMD"]
    assert cmd.json_or_words() == ["canonflow", "run"]
    (health,) = [i for i in last if i.keyword == "HEALTHCHECK"]
    assert "127.0.0.1" in health.args and "6066" in health.args
    envs = " ".join(i.args for i in last if i.keyword == "ENV")
    assert "CANONFLOW_STORE=rocksdb://" in envs
    assert "CANONFLOW_WEB_HOST" not in envs  # loopback by default; compose/k8s open it


def test_installs_the_project_from_pyproject_like_the_readme(instructions):
    words, env = pip_install(instructions)
    (target,) = install_targets(words)
    readme = readme_install_target()
    # both install the project directory (pyproject.toml), only the extras differ
    base, _, extras = target.partition("[")
    readme_base, _, readme_extras = readme.partition("[")
    assert base == readme_base == "."
    optional = pyproject()["project"]["optional-dependencies"]
    assert set(extras.rstrip("]").split(",")) == set(IMAGE_EXTRAS) <= set(optional)
    assert set(readme_extras.rstrip("]").split(",")) <= set(optional)
    assert "-e" not in words and "--editable" not in words
    for flag in ("-r", "--requirement"):
        assert flag not in words, "the image installs pyproject's dependencies, not a list"
    # the pins reach pip (build environment included) as constraints, never as requirements
    assert env.get("PIP_CONSTRAINT", "").endswith("deploy/constraints.txt")


def _top_packages() -> set[str]:
    """The directories the build ships (setup.py's layout: `canonflow`, and the
    repository's packages it takes in)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    roots = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                 and any(getattr(t, "id", "") == "ROOTS" for t in n.targets))
    return {"canonflow", *roots}


def test_copies_what_the_build_needs_and_the_dockerignore_lets_it_through(instructions):
    copies = [i.json_or_words() for i in instructions
              if i.keyword == "COPY" and "--from" not in i.args]
    sources = {s.rstrip("/") for words in copies for s in words[:-1] if not s.startswith("--")}
    project = pyproject()
    needed = {"pyproject.toml", "setup.py", project["project"]["readme"],
              "deploy/constraints.txt", *_top_packages()}
    assert needed <= sources, needed - sources
    for source in sources:
        assert (ROOT / source).exists(), source
        files = [ROOT / source] if (ROOT / source).is_file() else [
            p for p in (ROOT / source).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        for path in files:
            assert not ignored(path.relative_to(ROOT).as_posix()), f"{path} is dockerignored"
    assert ignored(".venv/bin/python") and ignored("tests/deploy/test_dockerfile.py")
    assert ignored("pipeline/__pycache__/cli.cpython-311.pyc")


def ignored(path: str) -> bool:
    """Whether deploy/Dockerfile.dockerignore keeps `path` out of the build context
    (Docker's rules: the last matching pattern wins; a pattern matching a directory
    matches what is inside it)."""
    patterns = [line.strip() for line in (DEPLOY / "Dockerfile.dockerignore").read_text(
        encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")]
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    result = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        regex = _pattern_regex(pattern.lstrip("!").strip("/"))
        if any(re.fullmatch(regex, p) for p in prefixes):
            result = not negated
    return result


def _pattern_regex(pattern: str) -> str:
    """A .dockerignore pattern as a regex: `*` and `?` stop at '/', `**` crosses them."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] in "*?":
            out, i = out + ("[^/]*" if pattern[i] == "*" else "[^/]"), i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return out


def test_every_dependency_is_pinned_as_pyproject_allows():
    pins = parse_constraints(CONSTRAINTS.read_text(encoding="utf-8"))
    for req in image_requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{name} has no pin in deploy/constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"deploy/constraints.txt pins {name}=={pins[name]}, pyproject wants {req}")
    for spec in pyproject()["build-system"]["requires"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins and req.specifier.contains(pins[name]), spec


def test_every_distribution_the_image_installs_is_pinned():
    pins = parse_constraints(CONSTRAINTS.read_text(encoding="utf-8"))
    # Follow a package's dependencies only where it is installed at its pinned version:
    # those are the dependencies the image gets (a newer one here may need others).
    installed, not_here = closure(missing_ok=True,
                                  follow=lambda name, version: pins.get(name) == version)
    unpinned = (set(installed) | not_here) - set(pins)
    assert not unpinned, (
        f"unpinned: {sorted(unpinned)}; regenerate with "
        "`.venv/bin/python -m tests.deploy.pins > deploy/constraints.txt`")


@pytest.mark.parametrize("line", ["faust-streaming>=0.15", "aiokafka", "a==1; b==2", "x==1 ; y"])
def test_constraints_accept_only_exact_pins(line):
    with pytest.raises(ValueError):
        parse_constraints(line)


def test_the_dockerfile_parser_joins_continuations_and_counts_stages(tmp_path: Path):
    path = tmp_path / "Dockerfile"
    path.write_text("# c\nARG X=1\nFROM a AS b\nRUN one \\\n  # inside\n  two\nFROM c\nCMD [\"x\"]\n")
    parsed = dockerfile(path)
    assert [(i.keyword, i.args, i.stage) for i in parsed] == [
        ("ARG", "X=1", -1), ("FROM", "a AS b", 0), ("RUN", "one  two", 0),
        ("FROM", "c", 1), ("CMD", '["x"]', 1)]
