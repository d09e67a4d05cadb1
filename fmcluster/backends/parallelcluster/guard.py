"""The budget guard's call on ParallelCluster: the compute fleet stop that `pcluster update-compute-fleet --status
STOP_REQUESTED` makes. pcluster.lib writes it as one DynamoDB UpdateItem on the cluster's table
``parallelcluster-<cluster>`` (``JsonComputeFleetStatusManager._put_status`` in
pcluster/models/compute_fleet_status_manager.py, 3.16: key ``{"Id": "COMPUTE_FLEET"}``, ``set #dt.#st=:s,
#dt.#lut=:t`` on ``Data.status`` and ``Data.lastStatusUpdatedTime``); the head node's clustermgtd then stops every
queue's nodes. pcluster's own condition (the status it read just before) is left out: a schedule cannot read first,
and a stop must land whatever state the fleet is in. The head node and storage stay, and bill.
``destroy-compute`` is refused at load time (``spec_rules``). Light: no boto3."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fmcluster.backends.protocol import GuardCall
from fmcluster.spec.models import Spec

# pcluster/constants.py PCLUSTER_DYNAMODB_PREFIX
TABLE_PREFIX = "parallelcluster-"


def guard_calls(spec: Spec, on_limit: str, fires_at: str) -> list[GuardCall]:
    table = TABLE_PREFIX + spec.name
    # pcluster writes str(datetime.now(tz=timezone.utc)) ("2026-12-07 09:05:03+00:00"); the schedule's moment is it.
    when = str(dt.datetime.fromisoformat(fires_at.replace("Z", "+00:00")).astimezone(dt.timezone.utc))
    update = {
        "TableName": table,
        "Key": {"Id": {"S": "COMPUTE_FLEET"}},
        "UpdateExpression": "set #dt.#st=:s, #dt.#lut=:t",
        "ExpressionAttributeNames": {"#dt": "Data", "#st": "status", "#lut": "lastStatusUpdatedTime"},
        "ExpressionAttributeValues": {":s": {"S": "STOP_REQUESTED"}, ":t": {"S": when}},
    }
    return [GuardCall("stop-fleet", "dynamodb", "updateItem", update,
                      (f"arn:aws:dynamodb:{spec.region}:{{account}}:table/{table}",), "dynamodb:UpdateItem",
                      "requests the compute fleet stop (STOP_REQUESTED), as pcluster update-compute-fleet does")]


def fleet_unfinished(report: dict[str, Any]) -> str | None:
    """The compute fleet not STOPPED after the guard's moment (pcluster describe-compute-fleet's status, as
    ``describe`` reports it): STOP_REQUESTED and STOPPING are a stop under way, RUNNING a call that failed or was
    undone. A queue with no minimum runs no node either way, so its counts cannot say this."""
    fleet = report.get("compute_fleet")
    if fleet is None or fleet == "STOPPED":
        return None
    return f"the compute fleet is {fleet}, not STOPPED"
