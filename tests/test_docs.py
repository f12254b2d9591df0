"""The documentation: the site builds with warnings as errors, the README's links into
docs/ exist, and the prose of the code and the docs cites no ticket, no lab note and
no document outside the repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: What the prose must not say: ticket numbers, the internal names of specifications,
#: and documents outside the repository.
FORBIDDEN = re.compile(r"issue [0-9]+|seed 00|\.\./shared|DESIGN\.md|STYLE\.md")
#: Where that prose is: the packages, the docs and the README.
PROSE = ("topics", "adapters", "pipeline", "docs", "README.md")


def test_site_builds_strict(tmp_path: Path):
    """`mkdocs build --strict`: a broken internal link or anchor, a page missing from
    the nav or a generated reference that fails is an error, as `make docs` sees it.
    Never with --quiet: it hides the warnings from the count that --strict fails on."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("mkdocs", reason="the docs build needs the test extra (mkdocs)")
        pytest.importorskip("material", reason="the docs build needs mkdocs-material")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}{run.stderr}"
    for page in ("operating/configuration", "contract/reference", "runtimes/qwen"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


def test_readme_links_into_docs_exist():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(((?:docs/)[^)#\s]+)(?:#[^)]*)?\)", text)
    assert links, "README.md links to no page of docs/"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines; the docs site holds the detail"


def _prose_hits() -> list[str]:
    hits = []
    for name in PROSE:
        base = ROOT / name
        paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for path in paths:
            if path.suffix in (".so", ".png", ".pyc") or "__pycache__" in path.parts:
                continue
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if FORBIDDEN.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return hits


def test_prose_cites_no_ticket_or_outside_document():
    """`grep -rnE "issue [0-9]+|seed 00|\\.\\./shared|DESIGN\\.md|STYLE\\.md" topics adapters
    pipeline docs README.md` finds nothing."""
    hits = _prose_hits()
    assert not hits, "prose cites a ticket or an outside document:\n" + "\n".join(hits)


def _hooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "canonflow_docs", ROOT / "docs" / "hooks" / "canonflow_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_contract_reference_describes_every_field():
    """Every field of every record in topics/canonflow.schema.json has a description in
    the generated reference (a `#:` comment on the msgspec field, or its type's
    docstring naming it): a new field without one fails here."""
    undescribed = []
    section = ""
    for line in _hooks().contract_reference().splitlines():
        if line.startswith("### "):
            section = line[4:]
        elif line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            if cells[3] in ("", "-"):
                undescribed.append(f"{section}.{cells[0]}")
    assert not undescribed, f"fields without a description: {undescribed}"


def test_configuration_reference_lists_every_setting():
    """The generated configuration reference has a row, with a description, for every
    field of pipeline.settings.Settings, under the variable from_env reads."""
    import msgspec

    from pipeline.settings import Settings

    text = _hooks().settings_reference()
    for field in msgspec.structs.fields(Settings):
        row = next((ln for ln in text.splitlines()
                    if ln.startswith(f"| `CANONFLOW_{field.name.upper()}` |")), None)
        assert row is not None, f"no row for CANONFLOW_{field.name.upper()}"
        assert not row.rstrip().endswith("|  |"), row


def test_configuration_page_names_every_variable():
    """Every CANONFLOW_* variable the package code reads (a string literal naming it, or a
    Settings field) is on the configuration page, generated or written."""
    page = (ROOT / "docs" / "operating" / "configuration.md").read_text()
    page += _hooks().settings_reference()
    read: set[str] = set()
    for path in sorted((ROOT / "pipeline").rglob("*.py")) + sorted((ROOT / "adapters").rglob("*.py")):
        read |= set(re.findall(r"[\"'](CANONFLOW_[A-Z_]+)[\"']", path.read_text()))
    missing = sorted(v for v in read if f"`{v}`" not in page)
    assert not missing, f"docs/operating/configuration.md does not name {missing}"
