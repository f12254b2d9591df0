"""Golden pairs for every adapter: native capture in, canonical JSON lines out.

goldens/<provider>/<name>.in.jsonl (capture format) must have a reviewed
<name>.out.jsonl beside it, and every .out must have its .in: a missing or unused
golden fails. Each is fed whole, record by record and resumed at every cut point.
Rewrite after a reviewed change with UPDATE_GOLDENS=1.
"""

from __future__ import annotations

import pytest

from tests.adapters.harness import (
    GOLDENS,
    assert_envelope_invariants,
    assert_three_ways,
    check_golden,
    events_of,
    read_capture,
)

CASES = sorted(GOLDENS.glob("*/*.in.jsonl"))


def _id(path):  # noqa: ANN001
    return f"{path.parent.name}/{path.name[: -len('.in.jsonl')]}"


@pytest.mark.parametrize("path", CASES, ids=[_id(p) for p in CASES])
def test_golden_fed_three_ways_matches_reviewed_output(path):
    provider, name = path.parent.name, path.name[: -len(".in.jsonl")]
    out = assert_three_ways(provider, read_capture(path))
    check_golden(provider, name, out)
    assert_envelope_invariants(events_of(out))


def test_every_golden_output_has_its_input():
    unused = [p for p in GOLDENS.glob("*/*.out.jsonl")
              if not p.with_name(p.name.replace(".out.jsonl", ".in.jsonl")).exists()]
    assert not unused, f"golden outputs without inputs: {unused}"


def test_goldens_exist():
    assert CASES, "no golden inputs found"


def test_every_registered_runtime_has_goldens_and_every_golden_a_runtime():
    from adapters import providers

    dirs = {p.parent.name for p in CASES}
    missing = [p for p in providers() if p not in dirs]
    assert not missing, f"no goldens for {missing}: add tests/adapters/goldens/<provider>/"
    assert dirs <= set(providers()), f"goldens of unregistered runtimes: {dirs - set(providers())}"
