"""The EKS emulator and a node group's instance types (EKS API reference; botocore's EKS model): UpdateNodegroupConfig
has no ``instanceTypes`` member, so a request that carries one is refused as EKS refuses an unknown member, before
anything changes. botocore itself never sends it; the request here is edited after botocore built it, as a client
of another SDK could send it."""

from __future__ import annotations

import json

import botocore.session
import pytest
from botocore.exceptions import ClientError

REGION = "us-east-1"


def test_update_nodegroup_config_takes_no_instance_types(sandbox):
    model = botocore.session.get_session().get_service_model("eks")
    assert "instanceTypes" not in model.operation_model("UpdateNodegroupConfig").input_shape.members
    assert "instanceTypes" in model.operation_model("CreateNodegroup").input_shape.members
    eks = sandbox.client("eks", REGION)

    def add_types(params, **_) -> None:
        body = json.loads(params["body"] or b"{}")
        body["instanceTypes"] = ["m7i.4xlarge"]
        params["body"] = json.dumps(body).encode()

    eks.meta.events.register("before-call.eks.UpdateNodegroupConfig", add_types)
    with pytest.raises(ClientError) as refused:
        eks.update_nodegroup_config(clusterName="any", nodegroupName="any", scalingConfig={"desiredSize": 1})
    error = refused.value.response["Error"]
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400, error
    assert "instanceTypes" in error["Message"], error
