"""Write a bought Capacity Block's id into a spec file, changing nothing else: its comments, key order, quoting,
flow or block style and indentation stay as the user wrote them (ruamel.yaml's round-trip mode, with the file's
own indentation). The result is read back and compared with the original: if anything but that one value
changed, the file is left alone and the user is told what to write by hand."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import yaml

from fmcluster.errors import FmclusterError, UsageError


class SpecEditError(FmclusterError):
    exit_code = 1


def queue_problem(spec_path: Path, queue: str) -> str | None:
    """Why ``queue`` of the spec cannot take a Capacity Block id (None: it can): the queue is missing, or not of
    capacity type capacity-block."""
    from fmcluster.spec.loader import parse_spec

    spec, _ = parse_spec(spec_path)
    names = [q.name for q in spec.queues]
    found = next((q for q in spec.queues if q.name == queue), None)
    if found is None:
        return f"{spec_path}: no queue named {queue!r} (its queues: {', '.join(names)})"
    if found.capacity.type != "capacity-block":
        return (f"{spec_path}: queue {queue!r} has capacity type {found.capacity.type!r}, not 'capacity-block'; "
                "set queues[].capacity.type: capacity-block first (and a fixed node count)")
    return None


def write_reservation_id(spec_path: Path, queue: str, reservation_id: str) -> None:
    """Set ``capacity.reservation_id`` of the queue named ``queue``."""
    from ruamel.yaml import YAML
    from ruamel.yaml.util import load_yaml_guess_indent

    text = spec_path.read_text(encoding="utf-8")
    original = yaml.safe_load(text)
    # ruamel's guess reads the first block sequence (its items' indent and the dash's offset); a mapping's
    # indent is read separately, since files often nest mappings by 2 and indent sequences differently.
    _, sequence_indent, dash_offset = load_yaml_guess_indent(text)
    editor = YAML()
    editor.preserve_quotes = True
    editor.width = 4096  # never re-wrap a long line
    editor.indent(mapping=_mapping_indent(text), sequence=sequence_indent or 2, offset=dash_offset or 0)
    data = editor.load(text)
    target = _capacity_of(data, queue)
    if target is None:
        raise UsageError(f"{spec_path}: queue {queue!r} has no capacity mapping to write into")
    target["reservation_id"] = reservation_id
    out = io.StringIO()
    editor.dump(data, out)
    written = out.getvalue()
    expected = _with_id(original, queue, reservation_id)
    if yaml.safe_load(written) != expected:
        raise SpecEditError(f"{spec_path}: could not rewrite it without changing something else; write "
                            f"reservation_id: {reservation_id} under queue {queue!r}'s capacity by hand")
    temporary = spec_path.with_name(f".{spec_path.name}.fmcluster-tmp")
    temporary.write_text(written, encoding="utf-8")
    os.replace(temporary, spec_path)


def _mapping_indent(text: str) -> int:
    """How far the file indents a mapping nested in a mapping (2 when it nests none)."""
    parent: int | None = None
    for line in text.splitlines():
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        column = len(line) - len(stripped)
        if parent is not None and column > parent and not stripped.startswith("- "):
            return column - parent
        parent = column if stripped.rstrip().endswith(":") and not stripped.startswith("- ") else None
    return 2


def _capacity_of(data: Any, queue: str) -> Any:
    for item in (data or {}).get("queues") or []:
        if isinstance(item, dict) and item.get("name") == queue and isinstance(item.get("capacity"), dict):
            return item["capacity"]
    return None


def _with_id(original: Any, queue: str, reservation_id: str) -> Any:
    import copy

    expected = copy.deepcopy(original)
    _capacity_of(expected, queue)["reservation_id"] = reservation_id
    return expected
