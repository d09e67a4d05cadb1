"""Read nccl-tests output (``all_reduce_perf`` and friends): the result rows, the average bus bandwidth and
the correctness verdict. Accepts what real runs print: ``srun --label`` prefixes (``0: ``), NCCL INFO lines
in between, the older table without a ``root`` column and with ``error`` instead of ``#wrong``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_LABEL = re.compile(r"^\s*\d+:\s?")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")
_OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)")
_NUMBER = re.compile(r"^-?[0-9.]+(e[-+]?\d+)?$|^N/A$", re.IGNORECASE)


@dataclass(frozen=True)
class Row:
    size_bytes: int
    time_us: float
    algbw_gb_s: float
    busbw_gb_s: float
    wrong: str  # "0", an error magnitude like "2e-07", or "N/A"
    in_place_busbw_gb_s: float | None = None
    in_place_wrong: str = "0"


@dataclass
class NcclResult:
    rows: list[Row] = field(default_factory=list)
    avg_busbw_gb_s: float | None = None
    out_of_bounds: int | None = None

    @property
    def peak_busbw_gb_s(self) -> float | None:
        """The best bus bandwidth over all sizes and both placements: where large messages plateau."""
        values = [r.busbw_gb_s for r in self.rows] + [r.in_place_busbw_gb_s for r in self.rows
                                                      if r.in_place_busbw_gb_s is not None]
        return max(values) if values else None

    @property
    def wrong_results(self) -> int:
        """Rows whose ``#wrong`` count (out of place or in place) is non-zero. The older ``error`` column holds
        magnitudes like 2e-07, not counts: those are not counted."""
        return sum(1 for r in self.rows if any(w.isdigit() and int(w) > 0 for w in (r.wrong, r.in_place_wrong)))


def parse(text: str) -> NcclResult:
    result = NcclResult()
    columns: list[str] | None = None
    for raw in text.splitlines():
        line = _LABEL.sub("", raw, count=1).rstrip()
        if (match := _AVG.search(line)) is not None:
            result.avg_busbw_gb_s = float(match.group(1))
            continue
        if (match := _OUT_OF_BOUNDS.search(line)) is not None:
            result.out_of_bounds = int(match.group(1))
            continue
        stripped = line.lstrip("#").split()
        if stripped[:2] == ["size", "count"]:
            columns = stripped
            continue
        if line.startswith("#") or not stripped or not stripped[0].isdigit():
            continue
        row = _row(stripped, columns)
        if row is not None:
            result.rows.append(row)
    return result


def _row(fields: list[str], columns: list[str] | None) -> Row | None:
    # size count type redop [root] time algbw busbw wrong  time algbw busbw wrong
    has_root = columns is not None and "root" in columns
    if columns is None:  # a headerless table (some logs keep only the rows): infer from the field count
        has_root = len(fields) >= 13
    start = 5 if has_root else 4
    numbers = fields[start:]
    if len(numbers) < 4 or not all(_NUMBER.match(n) for n in numbers[:4]):
        return None
    try:
        in_place = float(numbers[6]) if len(numbers) >= 8 else None
        return Row(int(fields[0]), float(numbers[0]), float(numbers[1]), float(numbers[2]), numbers[3], in_place,
                   numbers[7] if len(numbers) >= 8 else "0")
    except ValueError:
        return None
