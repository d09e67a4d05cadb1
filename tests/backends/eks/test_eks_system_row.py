"""Issue 35 part 5: `status` of an EKS cluster shows the `system` node group's own row as its Kubernetes API sees it:
its nodes Ready (they carry the system role label, not a queue label) and no scheduler quota (it is no queue), so a
system-node outage (fewer Ready nodes than the group's desired size while EKS says the group is ACTIVE) is a
problem line. Against the sandbox, whose EKS makes a Node for each running instance of a node group."""

from __future__ import annotations

import pytest
from fixtures.kube import cluster_api
from fixtures.lifecycle import CONFIGS
from fixtures.sandbox_eks import REGION, new_cluster

from fmcluster.connection import aws
from fmcluster.render.common import CLUSTER_TAG
from fmcluster.state.store import StateStore
from fmcluster.verbs.lifecycle.status import status

pytest.importorskip("fmcluster_sandbox.eks")

SYSTEM_LABEL = {"fmcluster.io/node-role": "system"}  # fmcluster/backends/eks/nodes/system_nodes.py, typed here
PROBLEM = "node group system: {} of 2 nodes Ready"


def _system_row(name: str) -> tuple[dict, list[str]]:
    report = status(name, False)
    (row,) = [q for q in report["queues"] if q["name"] == "system"]
    return row, report["problems"]


def test_the_system_row_counts_its_ready_nodes_and_an_outage_is_a_problem(sandbox, sandbox_env, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setattr(aws, "_target", aws.target())  # restored after the test: other tests run offline
    aws.configure(None, REGION, sandbox.endpoint_url)
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "home"))
    eks, ec2, name, node_role, subnets = new_cluster(sandbox, "sysrow", creator_admin=True)
    try:
        eks.tag_resource(resourceArn=eks.describe_cluster(name=name)["cluster"]["arn"], tags={CLUSTER_TAG: name})
        eks.create_nodegroup(clusterName=name, nodegroupName="system", subnets=subnets[:1], nodeRole=node_role,
                             instanceTypes=["m5.large"], labels=SYSTEM_LABEL,
                             taints=[{"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}],
                             scalingConfig={"minSize": 2, "maxSize": 2, "desiredSize": 2})
        spec = (CONFIGS / "p5-kueue-eks.yaml").read_text()
        spec = spec.replace("name: p5-kueue", f"name: {name}").replace("region: us-east-1", f"region: {REGION}")
        StateStore().save_cluster(name, REGION, "eks", spec, None, "ACTIVE", endpoint_url=aws.target_label())

        row, problems = _system_row(name)
        assert (row["status"], row["desired"], row["nodes_ready"]) == ("ACTIVE", 2, 2), row
        assert (row["scheduler_queue"], row["quota"]) == (False, None), row
        assert not [p for p in problems if p.startswith("node group system:")], problems

        # an outage: one system instance stopped (EC2 StopInstances: its node leaves) while EKS still wants 2
        (instance, *_) = [i["InstanceId"] for r in ec2.describe_instances(Filters=[
            {"Name": "tag:eks:nodegroup-name", "Values": ["system"]},
            {"Name": "tag:eks:cluster-name", "Values": [name]},
            {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]]
        ec2.stop_instances(InstanceIds=[instance])
        # the sandbox's Node of a stopped instance stays, with the node lifecycle controller's Ready=Unknown
        call = cluster_api(sandbox.endpoint_url, eks.describe_cluster(name=name)["cluster"], REGION)
        ready = sorted((c["status"], c["reason"]) for n in call("GET", "/api/v1/nodes")[1]["items"]
                       for c in n["status"]["conditions"] if c["type"] == "Ready")
        assert ready == [("True", "KubeletReady"), ("Unknown", "NodeStatusUnknown")], ready
        row, problems = _system_row(name)
        assert row["nodes_ready"] == 1, row
        if row["status"] in ("ACTIVE", "DEGRADED"):  # the group at rest: the missing node is an outage
            assert any(p.startswith(PROBLEM.format(1)) for p in problems), problems
        else:
            pytest.fail(f"EKS reports the system group {row['status']} after one instance ended")
    finally:
        for group in eks.list_nodegroups(clusterName=name)["nodegroups"]:
            eks.delete_nodegroup(clusterName=name, nodegroupName=group)
        eks.delete_cluster(name=name)
