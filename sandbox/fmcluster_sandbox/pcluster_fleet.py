"""ParallelCluster's compute fleet status, which its head node's clustermgtd keeps in DynamoDB.

The sandbox's head node runs nothing, so this stands in for it: once the stack is complete the fleet is
``RUNNING``; ``pcluster update-compute-fleet`` requests (STOP_REQUESTED, START_REQUESTED) move through
STOPPING/STARTING to STOPPED/RUNNING, and a stop terminates the compute nodes as clustermgtd does.
"""

from __future__ import annotations

import datetime
import logging

from fmcluster_sandbox import cfn_instances
from fmcluster_sandbox.cfn_stacks import later

logger = logging.getLogger(__name__)
# The head node's clustermgtd moves the compute fleet from X_REQUESTED through X-ING to the final state
# within a minute or so; the sandbox's stand-in takes this many seconds per step.
FLEET_TRANSITION_SECONDS = 1.0
_FLEET_TRANSITIONS = {
    "STOP_REQUESTED": ("STOPPING", "STOPPED"),
    "START_REQUESTED": ("STARTING", "RUNNING"),
}
_FLEET_KEY = {"Id": {"S": "COMPUTE_FLEET"}}


def _fleet_table(stack_name: str) -> str:
    from pcluster.constants import PCLUSTER_DYNAMODB_PREFIX

    return PCLUSTER_DYNAMODB_PREFIX + stack_name


def _set_fleet_status(ddb_backend, table: str, status: str, expected: str | None) -> bool:
    """Write Data.status like clustermgtd does; with `expected`, only if the status is still that."""
    try:
        ddb_backend.update_item(
            table,
            _FLEET_KEY,
            "set #dt.#st=:s, #dt.#lut=:t",
            {"#dt": "Data", "#st": "status", "#lut": "lastStatusUpdatedTime"},
            {
                ":s": {"S": status},
                ":t": {"S": str(datetime.datetime.now(tz=datetime.timezone.utc))},
                **({":cur": {"S": expected}} if expected else {}),
            },
            condition_expression="#dt.#st = :cur" if expected else None,
        )
        return True
    except Exception as err:  # a newer request won, or the cluster is gone
        logger.debug("compute fleet %s: not moved to %s: %s", table, status, err)
        return False


def headnode_bootstrapped(stack) -> None:
    # The real head node writes {"status": "RUNNING"} to parallelcluster-<cluster> before it signals
    # its wait condition; pcluster's compute-fleet calls fail ("COMPUTE_FLEET data not found") without it.
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[stack.account_id][stack.region_name]
    table = _fleet_table(stack.name)
    if table not in backend.tables or backend.get_item(table, _FLEET_KEY) is not None:
        return
    now = str(datetime.datetime.now(tz=datetime.timezone.utc))
    backend.put_item(
        table,
        {**_FLEET_KEY, "Data": {"M": {"status": {"S": "RUNNING"}, "lastStatusUpdatedTime": {"S": now}}}},
    )


def install() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    original = DynamoDBBackend.update_item
    if getattr(original, "_fmcluster", False):
        return

    def advance(backend, table: str, requested: str) -> None:
        in_progress, final = _FLEET_TRANSITIONS[requested]
        if _set_fleet_status(backend, table, in_progress, expected=requested):
            if requested == "STOP_REQUESTED":
                cfn_instances.terminate_compute_nodes(backend.account_id, backend.region_name, table.split("-", 1)[1])
            later(lambda: _set_fleet_status(backend, table, final, expected=in_progress), FLEET_TRANSITION_SECONDS)

    def update_item(self, table_name, key, *args, **kwargs):
        item = original(self, table_name, key, *args, **kwargs)
        if table_name.startswith(_fleet_table("")) and key == _FLEET_KEY:
            status = item.attrs.get("Data")
            status = status.value.get("status").value if status is not None and status.type == "M" else None
            if status in _FLEET_TRANSITIONS:
                later(lambda: advance(self, table_name, status), FLEET_TRANSITION_SECONDS)
        return item

    update_item._fmcluster = True
    DynamoDBBackend.update_item = update_item
