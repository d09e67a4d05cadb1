"""``fmcluster burn-in NAME``: the burn-in checks the cluster's backend runs on its idle nodes (:meth:`Backend.burn_in
<fmcluster.backends.protocol.Backend.burn_in>`), reported as docs/burn-in-json.md says. The backend prints nothing:
its progress comes back through smoke's sink (:data:`fmcluster.verbs.connect.smoke_command.SINK`)."""

from __future__ import annotations

from typing import Any

from fmcluster.backends import registry
from fmcluster.backends.protocol import BurnInRequest
from fmcluster.catalog.burn_in_levels import LEVELS
from fmcluster.errors import UsageError
from fmcluster.verbs.connect.resolve import recorded
from fmcluster.verbs.connect.smoke_command import SINK


def run(name: str, queue: str | None, level: str | None, timeout_min: float, image: str | None = None,
        host: str | None = None, user: str | None = None, identity: str | None = None,
        nccl_tests: str | None = None) -> dict[str, Any]:
    if level is not None and level not in LEVELS:  # before the cluster is even looked up: a bad flag changes nothing
        raise UsageError(f"unknown burn-in level {level!r}; the levels: {', '.join(LEVELS)} (`fmcluster burn-in "
                         "--help` says what each runs)")
    session, spec = recorded(name)
    request = BurnInRequest(queue, level, timeout_min, image, host, user, identity, nccl_tests)
    return registry.get(spec.backend).burn_in(session.context, request, SINK)
