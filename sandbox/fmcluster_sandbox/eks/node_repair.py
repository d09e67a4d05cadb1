"""Managed node group node auto repair: ``nodeRepairConfig`` on CreateNodegroup and UpdateNodegroupConfig.

Its shape (types, ``min``/``max``, the ``repairAction`` enum) is botocore's EKS model, checked for every request
by :mod:`fmcluster_sandbox.model_check`. The rules the model's documentation states in words, enforced here:

* ``maxUnhealthyNodeThresholdCount`` and ``maxUnhealthyNodeThresholdPercentage`` cannot both be set, nor
  ``maxParallelNodesRepairedCount`` and ``maxParallelNodesRepairedPercentage`` ("When using this, you cannot also
  set ... at the same time"; EKS User Guide "Automatically repair nodes in EKS clusters": "Set either the absolute
  count or percentage, but not both");
* every entry of ``nodeRepairConfigOverrides`` has all four members ("If you use this, you must specify all the
  values"; the guide: "Each override requires all of the following fields").

What EKS answers: DescribeNodegroup returns the configuration as it was sent. "Node auto repair is disabled by
default" (the model): a node group made without one is described without it, since no AWS page shows what
DescribeNodegroup returns for such a group.
"""

from __future__ import annotations

import copy
from typing import Any

from fmcluster_sandbox.eks.errors import invalid

EXCLUSIVE = (("maxUnhealthyNodeThresholdCount", "maxUnhealthyNodeThresholdPercentage"),
             ("maxParallelNodesRepairedCount", "maxParallelNodesRepairedPercentage"))
OVERRIDE_MEMBERS = ("nodeMonitoringCondition", "nodeUnhealthyReason", "minRepairWaitTimeMins", "repairAction")


def checked(config: dict[str, Any] | None, where: dict[str, str]) -> dict[str, Any] | None:
    """The configuration to keep, after the rules the model states in words; None when none was sent."""
    if config is None:
        return None
    for count, percentage in EXCLUSIVE:
        if count in config and percentage in config:
            raise invalid(f"nodeRepairConfig: {count} and {percentage} cannot both be specified", **where)
    for index, override in enumerate(config.get("nodeRepairConfigOverrides") or []):
        missing = [m for m in OVERRIDE_MEMBERS if override.get(m) in (None, "")]
        if missing:
            raise invalid(f"nodeRepairConfig.nodeRepairConfigOverrides[{index}]: every override must specify "
                          f"{', '.join(OVERRIDE_MEMBERS)}; missing {', '.join(missing)}", **where)
    return copy.deepcopy(config)
