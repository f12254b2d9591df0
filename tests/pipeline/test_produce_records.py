"""`canonflow produce`'s records (pipeline.tools.kafka_io.iter_records): up to `--batch`
consecutive lines of one origin a record, read as they are sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.tools.kafka_io import IN_FLIGHT, iter_records, records_from_file

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"


def _expected(path: Path, batch: int) -> list[tuple[bytes, str, int | None]]:
    """The records as the contract says: consecutive lines of one origin, at most
    `batch` a record, each record with its first line's capture time."""
    out: list[tuple[list[bytes], str, int | None]] = []
    for raw in path.read_bytes().splitlines():
        if not raw.strip():
            continue
        line = json.loads(raw)
        data = json.dumps(line["msg"], separators=(",", ":")).encode()
        last = out[-1] if out else None
        if last is not None and last[1] == line["origin"] and len(last[0]) < batch:
            last[0].append(data)
        else:
            out.append(([data], line["origin"], line.get("t")))
    return [(b"\n".join(lines), origin, t) for lines, origin, t in out]


@pytest.mark.parametrize("batch", [1, 2, 3, 50])
@pytest.mark.parametrize("path", sorted(CAPTURED.glob("*/*.capture.jsonl"))[::3],
                         ids=lambda p: p.stem)
def test_records_group_lines_of_one_origin_up_to_the_batch(path: Path, batch: int):
    got = [(r.value, r.origin, r.t) for r in iter_records(str(path), "capture", batch)]
    expected = _expected(path, batch)
    # the capture's msg bytes are kept as written; compare them as JSON
    assert [(json.loads(b"[" + v.replace(b"\n", b",") + b"]"), o, t) for v, o, t in got] == \
        [(json.loads(b"[" + v.replace(b"\n", b",") + b"]"), o, t) for v, o, t in expected]
    assert [(r.value, r.origin, r.t) for r in records_from_file(str(path), "capture", batch)] \
        == got


def test_a_file_is_read_as_its_records_are_taken(tmp_path: Path):
    """produce read the whole file into a list first, and kept a future per record. A
    line written after the first record was taken is still sent: nothing was read
    ahead of what was taken, but a buffer."""
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"".join(b'{"type":"x","n":%d}\n' % n for n in range(3 * IN_FLIGHT)))
    records = iter_records(str(path), "native")
    first = next(records)
    assert first.value == b'{"type":"x","n":0}' and first.origin is None  # native: no header
    with open(path, "ab") as fh:
        fh.write(b'{"type":"x","n":"late"}\n')
    rest = list(records)
    assert len(rest) == 3 * IN_FLIGHT and rest[-1].value == b'{"type":"x","n":"late"}'
