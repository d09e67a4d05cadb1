"""How the burn-in check job carries each node's tool outputs home through the launcher's log, and reading them back
into :class:`~fmcluster.backends.burn_in.node_outputs.NodeOutputs`.

Every rank (one per node) prints each tool's stdout and stderr base64-encoded, cut into chunks, one line per chunk::

    FMCLUSTER-BURN-IN <host> <check> <exit code|none> <out|err> <i>/<n> <base64 chunk or ->

Why this is safe with real Open MPI: mpirun forwards each rank's output as its daemon reads it from that rank's pipe,
so lines of different ranks interleave, and a line cut where one read ended can have another rank's output put in
the middle. Each frame line is short (:data:`CHUNK` characters of base64 plus the header, under the 4,096 bytes of
PIPE_BUF, which POSIX writes to a pipe in one piece) and printed by one ``printf``, so it enters the pipe whole and a
cut is rare; and the reader never trusts the order: it takes only lines that match the frame exactly, puts each
stream's chunks back by their number, and requires all ``n`` of them and valid base64. A cut or garbled line makes
its chunk missing, so that tool's output is unreadable, which the judge counts as a failed check, never as a pass
(rerun; a real fault fails the same way twice). ``none`` is the tool not installed (``command -v`` found nothing),
the judge's ``absent``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping

from fmcluster.backends.burn_in.node_outputs import NodeOutputs, ToolRun

MARK = "FMCLUSTER-BURN-IN"
CHUNK = 1024
_FRAME = re.compile(rf"{MARK} (\S+) (\w+) (-?\d+|none) (out|err) (\d+)/(\d+) ([A-Za-z0-9+/=]+|-)$")


class BrokenFrames(ValueError):
    """A node's frames for a tool do not add up (a chunk missing, doubled or not base64)."""


def read(log: str, hosts: Mapping[str, str] | None = None) -> tuple[dict[str, NodeOutputs],
                                                                    dict[tuple[str, str], str]]:
    """The NodeOutputs of every host the log has frames from (renamed by ``hosts``: hostname -> node), and what
    could not be put back together ((node, check) -> why): that check has no run, which the judge fails."""
    streams: dict[tuple[str, str, str], dict[str, object]] = {}
    for line in log.splitlines():
        match = _FRAME.search(line.strip())
        if match is None:
            continue
        host, check, code, stream, index, count, chunk = match.groups()
        entry = streams.setdefault((host, check, stream), {"code": code, "count": int(count), "chunks": {}})
        chunks = entry["chunks"]
        assert isinstance(chunks, dict)
        if int(index) in chunks or entry["count"] != int(count) or entry["code"] != code:
            entry["broken"] = "a chunk sent twice or with another count"
        chunks[int(index)] = "" if chunk == "-" else chunk
    outputs: dict[str, dict[str, dict[str, object]]] = {}
    broken: dict[tuple[str, str], str] = {}
    for (host, check, stream), entry in streams.items():
        node = (hosts or {}).get(host, host)
        try:
            text = _joined(entry)
        except BrokenFrames as exc:
            broken[(node, check)] = f"its {stream} could not be read from the log: {exc}"
            continue
        outputs.setdefault(node, {}).setdefault(check, {"code": entry["code"]})[stream] = text
    result = {}
    for node, checks in outputs.items():
        runs = {}
        for check, parts in checks.items():
            if (node, check) in broken or "out" not in parts:
                continue
            code = parts["code"]
            runs[check] = ToolRun(None if code == "none" else int(str(code)), str(parts["out"]),
                                  str(parts.get("err", "")))
        result[node] = NodeOutputs(node, runs)
    return result, broken


def _joined(entry: dict[str, object]) -> str:
    if entry.get("broken"):
        raise BrokenFrames(str(entry["broken"]))
    chunks = entry["chunks"]
    count = entry["count"]
    assert isinstance(chunks, dict) and isinstance(count, int)
    missing = sorted(set(range(1, count + 1)) - set(chunks))
    if missing or len(chunks) != count:
        raise BrokenFrames(f"{len(missing)} of {count} chunk(s) missing from the log")
    try:
        return base64.b64decode("".join(chunks[i] for i in range(1, count + 1)), validate=True).decode(
            errors="replace")
    except (binascii.Error, ValueError) as exc:
        raise BrokenFrames(f"not base64 ({exc})") from None
