"""Read a spec file and compose its YAML within bounds, so that no file can hang or exhaust fmcluster.

A spec is a few kilobytes of YAML in a regular file. Anything else is refused quickly with a message that
names the file: a named pipe that never ends, ``/dev/zero`` or another device, a directory, a file over
:data:`MAX_SPEC_BYTES`, bytes that are not UTF-8, nesting deeper than :data:`MAX_DEPTH`, an alias that
contains itself, or aliases that expand to more than :data:`MAX_VALUES` values (a "billion laughs" bomb
is a few hundred bytes that would expand to millions of values).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from fmcluster.errors import SpecError, SpecProblem

# A multi-megabyte file passed by mistake (a dataset, a log) is not a spec.
MAX_SPEC_BYTES = 1_000_000
# A spec nests about five levels (queues[0].capacity.type); nothing legitimate comes close to this.
MAX_DEPTH = 40
# Values after aliases are expanded; a ten-queue spec with storage and tags has a few hundred.
MAX_VALUES = 20_000

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _fail(name: str, message: str, line: int | None = None, column: int | None = None) -> SpecError:
    return SpecError([SpecProblem(name, line, column, "", message)])


def _not_regular(mode: int) -> str | None:
    for test, kind in _FILE_KINDS:
        if test(mode):
            return f"is {kind}, not a spec file (a spec is a regular YAML file)"
    return None if stat.S_ISREG(mode) else "is not a regular file, so it is not a spec file"


def read_spec_text(path: str | Path) -> str:
    """The text of the regular file at ``path``, read without blocking and never past the size limit."""
    name = str(path)
    # O_NONBLOCK: opening a FIFO must not wait for a writer. O_NOCTTY: a terminal device never becomes ours.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(name, flags)
    except FileNotFoundError:
        raise _fail(name, "no such file") from None
    except OSError as exc:
        try:  # a socket cannot be opened at all (ENXIO): say what the path is rather than the errno
            kind = _not_regular(os.stat(name).st_mode)
        except OSError:
            kind = None
        raise _fail(name, kind or f"cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        problem = _not_regular(info.st_mode)
        if problem:
            raise _fail(name, problem)
        if info.st_size > MAX_SPEC_BYTES:
            raise _fail(name, f"is {info.st_size:,} bytes; {_LIMIT}")
        raw = _read_at_most(fd, MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise _fail(name, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_SPEC_BYTES:  # the file grew while it was read, or lies about its size (/proc)
        raise _fail(name, f"is more than {MAX_SPEC_BYTES:,} bytes; {_LIMIT}")
    if b"\x00" in raw:
        raise _fail(name, "is a binary file, not YAML text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise _fail(name, f"is not UTF-8 text (bad byte at offset {exc.start})", line, column) from None


_LIMIT = f"a spec is a short YAML file (limit {MAX_SPEC_BYTES:,} bytes)"


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        chunk = os.read(fd, min(65536, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


class LimitExceeded(yaml.MarkedYAMLError):
    """The YAML is well formed but outside what a spec can be (too deep, recursive, or an alias bomb)."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe composer with three bounds, checked while the node graph is built (before any
    alias is expanded): nesting depth, self-containing aliases, and the size after alias expansion."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        # Completed nodes and how many values each stands for once its aliases are expanded.
        self._sizes: dict[yaml.Node, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and target not in self._sizes:
                raise LimitExceeded(None, None, f"alias *{event.anchor} refers to a value that contains it "
                                                "(a recursive alias); a spec cannot be infinite", event.start_mark)
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise LimitExceeded(None, None, f"nested more than {MAX_DEPTH} levels deep; a spec nests a few "
                                                "levels", self.peek_event().start_mark)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        size = 1 + sum(self._sizes[child] for child in _children(node))
        if size > MAX_VALUES:
            raise LimitExceeded(None, None, f"this value expands to more than {MAX_VALUES:,} values through YAML "
                                            "aliases (an alias bomb?); a spec has a few hundred", node.start_mark)
        self._sizes[node] = size
        return node


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def compose_bounded(text: str, name: str) -> yaml.Node | None:
    """The YAML node graph of ``text`` (one document), or a :class:`SpecError` at the offending position."""
    try:
        return yaml.compose(text, Loader=_BoundedLoader)
    except LimitExceeded as exc:
        mark = exc.problem_mark
        raise _fail(name, str(exc.problem), mark.line + 1, mark.column + 1) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        reason = exc.problem or exc.context or "invalid YAML"
        raise _fail(name, f"YAML syntax error: {reason}", line, column) from None
    except yaml.reader.ReaderError as exc:  # a control character YAML does not allow
        before = text[: exc.position]
        line = before.count("\n") + 1
        column = exc.position - (before.rfind("\n") + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise _fail(name, f"YAML does not allow the control character U+{code:04X}", line, column) from None
    except yaml.YAMLError as exc:
        raise _fail(name, f"YAML syntax error: {exc}") from None
