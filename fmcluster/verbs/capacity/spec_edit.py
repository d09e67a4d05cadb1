"""Write a bought Capacity Block's id into a spec file, changing nothing else: its comments, key order, quoting,
flow or block style and indentation stay as the user wrote them (ruamel.yaml's round-trip mode, with the file's
own indentation). The result is read back and compared with the original: if anything but that one value
changed, the file is left alone and the user is told what to write by hand. The file keeps its mode, line ends and
byte-order mark, a symlink is written through, and a queue whose capacity is a YAML anchor other queues share is
refused (the id would reach them too). :func:`check_writable` runs all of this before anything is bought."""

from __future__ import annotations

import io
import os
import stat
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
    """Set ``capacity.reservation_id`` of the queue named ``queue``. The file keeps its mode, owner, line ends and
    byte-order mark; a symlink is written through (the link stays a link); a failed write leaves no temporary
    file and the spec as it was."""
    target = Path(os.path.realpath(spec_path))
    raw = target.read_bytes().decode("utf-8")
    text, newline, bom = _plain_text(spec_path, raw)
    written = _rewritten(spec_path, text, queue, reservation_id)
    _replace(target, bom + written.replace("\n", newline))


def check_writable(spec_path: Path, queue: str) -> None:
    """Before buying: the spec can take the id, so that a block is never bought into a spec fmcluster then cannot
    write (the file and its directory writable, the queue's capacity its own). Raises :class:`UsageError`."""
    target = Path(os.path.realpath(spec_path))
    if not target.is_file():
        raise UsageError(f"{spec_path}: not a file fmcluster can write the reservation id into")
    if not os.access(target, os.W_OK):
        raise UsageError(f"{spec_path}: not writable, so the bought block's id could not be written into it; make "
                         f"it writable (chmod u+w {target}) or buy without --spec/--queue")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise UsageError(f"{target.parent}: not writable; fmcluster writes {target.name} by renaming a new copy "
                         "over it there, so that a failed write never leaves half a spec")
    try:
        text, _, _ = _plain_text(spec_path, target.read_bytes().decode("utf-8"))
        _rewritten(spec_path, text, queue, PLACEHOLDER_ID)
    except SpecEditError as exc:
        raise UsageError(str(exc).replace(PLACEHOLDER_ID, "<the bought id>")) from None


# A well-formed reservation id for the check before buying (EC2's form: cr- and 17 hex digits).
PLACEHOLDER_ID = "cr-00000000000000000"


def _plain_text(spec_path: Path, raw: str) -> tuple[str, str, str]:
    """The text with \\n line ends, the line end to write back, and the byte-order mark (or "")."""
    bom = "\ufeff" if raw.startswith("\ufeff") else ""
    raw = raw[len(bom):]
    crlf, lf = raw.count("\r\n"), raw.count("\n")
    if crlf and crlf != lf:
        raise SpecEditError(f"{spec_path}: mixes CRLF and LF line ends, which a rewrite would not keep; make them "
                            "one kind first")
    return raw.replace("\r\n", "\n"), "\r\n" if crlf else "\n", bom


def _rewritten(spec_path: Path, text: str, queue: str, reservation_id: str) -> str:
    from ruamel.yaml import YAML
    from ruamel.yaml.util import load_yaml_guess_indent

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
    sharing = [q.get("name") for q in data.get("queues") or []
               if isinstance(q, dict) and q.get("name") != queue and q.get("capacity") is target]
    if sharing:
        raise SpecEditError(f"{spec_path}: queue {queue!r}'s capacity is a YAML anchor it shares with queue(s) "
                            f"{', '.join(map(repr, sharing))}: writing reservation_id: {reservation_id} there would "
                            f"put them on the same block; give queue {queue!r} a capacity mapping of its own")
    target["reservation_id"] = reservation_id
    out = io.StringIO()
    editor.dump(data, out)
    written = out.getvalue()
    if yaml.safe_load(written) != _with_id(original, queue, reservation_id):
        raise SpecEditError(f"{spec_path}: could not rewrite it without changing something else; write "
                            f"reservation_id: {reservation_id} under queue {queue!r}'s capacity by hand")
    return written


def _replace(target: Path, text: str) -> None:
    """Write ``text`` over ``target`` by renaming a new file over it: never half a spec, and the new file takes
    the old one's mode (and owner where allowed)."""
    import tempfile

    status = os.stat(target)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".fmcluster-tmp", dir=target.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as handle:
            os.fchmod(handle.fileno(), stat.S_IMODE(status.st_mode))
            try:
                os.fchown(handle.fileno(), status.st_uid, status.st_gid)
            except PermissionError:  # another user's file in a writable directory: its mode still holds
                pass
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


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
    """The spec as it should read after the write: a copy in which nothing is shared (a YAML alias is a copy of
    its anchor), so that a write reaching another queue through an anchor shows as a difference."""
    expected = _unshared(original)
    _capacity_of(expected, queue)["reservation_id"] = reservation_id
    return expected


def _unshared(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _unshared(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unshared(item) for item in value]
    return value
