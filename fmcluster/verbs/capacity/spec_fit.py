"""Before `capacity buy --spec S --queue Q` pays: the block fits the queue, and the spec can take its id.

A Capacity Block holds one instance type, a fixed number of instances, in one Availability Zone (EC2 User Guide,
"Capacity Blocks for ML"): the queue must run that type, and need no more nodes than the block holds (for a
``{min, max}`` queue its max, which the scheduler may launch). The spec must exist, be writable (it and its
directory: the id is written by renaming a new copy over it), and name the queue as a ``capacity-block`` queue whose
capacity is its own. Any mismatch is bad input (exit 2) before EC2 is asked anything, so nothing is bought.
(Whether the spec's subnet is in the block's Availability Zone is checked beside this, in ``purchase``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fmcluster.errors import UsageError
from fmcluster.spec.models import Queue, Spec, max_nodes
from fmcluster.verbs.capacity import spec_edit


def check(spec_path: Path, queue: str, offer: dict[str, Any]) -> tuple[Spec, Queue]:
    """The parsed spec and its queue, when the offered block fits the queue and the spec can be written; else
    :class:`UsageError` saying what does not fit."""
    from fmcluster.spec.loader import parse_spec

    parsed, _ = parse_spec(spec_path)  # a missing or unreadable spec is a SpecError (exit 2)
    problem = spec_edit.queue_problem(spec_path, queue)
    if problem:
        raise UsageError(problem)
    found = next(q for q in parsed.queues if q.name == queue)
    offering = offer.get("offering_id")
    if found.instance_type != offer.get("instance_type"):
        raise UsageError(f"{spec_path}: queue {queue!r} runs {found.instance_type}, but offering {offering} is for "
                         f"{offer.get('instance_type')}")
    needed, held = max_nodes(found), offer.get("instance_count")
    if isinstance(held, int) and held < needed:
        what = "nodes" if isinstance(found.nodes, int) else "nodes at most (nodes.max)"
        raise UsageError(f"{spec_path}: queue {queue!r} has {needed} {what}, but offering {offering} holds "
                         f"{held} instance(s); find a block of {needed} (`fmcluster capacity find --count "
                         f"{needed} …`) or lower the queue's nodes")
    spec_edit.check_writable(spec_path, queue)
    return parsed, found
