"""``create`` on a Capacity Block that begins later: everything else is made now, and the block's nodes come at its
start (EC2 launches into a block only while it is ``active``; PCS, EKS and ParallelCluster take a ``scheduled``
one and launch its nodes when it begins). This says when, and ``create --wait`` waits for it."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from fmcluster.aws.cluster_blocks import not_begun
from fmcluster.engine import TimedOut
from fmcluster.output import ui
from fmcluster.verbs.session import Session

#: How often ``--wait`` reads the block again while it waits for its start.
POLL_SECONDS = 30.0


def announce(session: Session, wait: bool, timeout_min: float | None) -> list[dict[str, Any]]:
    """Say when each future block's nodes come; with ``wait``, wait (Ctrl-C or ``timeout_min`` ends it) until every
    block has begun. Returns the blocks that had not begun."""
    spec = session.spec
    if spec is None:
        return []
    blocks = not_begun(session.ctx, spec)
    for block in blocks:
        rid = block["reservation_ids"][0]
        ui.note(f"queue {', '.join(block['queues'])}: Capacity Block {rid} is {block['state']}; its "
                f"{block['instance_count']} node(s) come when it {block['countdown']}. "
                f"`{session.hint(f'fmcluster status {session.name}')}` counts down"
                + ("" if wait else f"; `{session.hint(f'fmcluster create {session.spec_file} --wait')}` waits "
                                   "for it"))
    if wait and blocks:
        _wait_for_start(session, blocks, timeout_min)
    return blocks


def _wait_for_start(session: Session, blocks: list[dict[str, Any]], timeout_min: float | None) -> None:
    start = max(dt.datetime.fromisoformat(b["start"].replace("Z", "+00:00")) for b in blocks)
    deadline = time.monotonic() + timeout_min * 60 if timeout_min else None
    if timeout_min and (start - dt.datetime.now(dt.timezone.utc)).total_seconds() > timeout_min * 60:
        raise TimedOut(f"the Capacity Block begins {start:%Y-%m-%d %H:%M} UTC, after --timeout {timeout_min:g} min; "
                       "the cluster is made and its nodes come at the start (`create --wait` without --timeout, or "
                       "a longer one, waits for them)")
    with ui.Ticker(f"waiting for the Capacity Block(s) to begin at {start:%Y-%m-%d %H:%M} UTC") as ticker:
        began = time.monotonic()
        while not_begun(session.ctx, session.require_spec()):
            left = (start - dt.datetime.now(dt.timezone.utc)).total_seconds()
            if deadline is not None and time.monotonic() + min(left, POLL_SECONDS) > deadline:
                raise TimedOut(f"--timeout reached before the Capacity Block began ({start:%Y-%m-%d %H:%M} UTC); "
                               "the cluster is made and its nodes come at the start")
            ticker.update(f"{max(left, 0) / 3600:.1f} h to go", time.monotonic() - began)
            session.ctx.stop.wait(max(1.0, min(left, POLL_SECONDS)))
