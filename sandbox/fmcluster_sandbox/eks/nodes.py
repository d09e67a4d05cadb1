"""A managed node group's instances: real moto EC2 instances, launched through the sandbox's EC2 rules.

At the end of each create/update the group holds ``scalingConfig.desiredSize`` running instances. They
launch as EKS's Auto Scaling group launches them: through the node group's launch template (its network
interfaces, placement group, Capacity Reservation or Capacity Block, image and tags), spread over the node
group's subnets, with the instance type from the template or ``instanceTypes[0]``, ``SPOT`` as Spot, and
the cluster security group when the template names no security group ("Customize managed nodes with launch
templates"). Each instance is tagged ``eks:cluster-name``, ``eks:nodegroup-name``,
``kubernetes.io/cluster/<cluster>: owned`` and ``aws:autoscaling:groupName``, as EKS tags them. EC2's
RunInstances rules (:mod:`fmcluster_sandbox.ec2_launch`) decide whether they can launch; a refusal becomes a
health issue (``AsgInstanceLaunchFailures`` with EC2's error) and the group ``CREATE_FAILED`` (after a
create) or ``DEGRADED`` (after an update).
"""

from __future__ import annotations

from typing import Any

from fmcluster_sandbox import instance_catalog, topology
from fmcluster_sandbox.eks import amis
from fmcluster_sandbox.moto_backends import live_instances, terminate

CLUSTER_TAG = "eks:cluster-name"
NODEGROUP_TAG = "eks:nodegroup-name"
ARCH = {"x86_64": "amd64", "arm64": "arm64"}
# EKS's taint effects as the kubelet registers them on the Node ("Recipe: Prevent pods from being scheduled on
# specific nodes": NO_SCHEDULE -> NoSchedule, ...).
BLOCK_NOT_ACTIVE = "InvalidCapacityReservationId.Unavailable"  # EC2's code for a block not active (ec2_launch)
KUBE_EFFECT = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


class NodeOperations:
    def _alive(self, ng: Any) -> list[str]:
        return live_instances(self._ec2(ng.account, ng.region), ng.instances)

    def _reconcile(self, ng: Any) -> str | None:
        """Bring the group to desiredSize instances. Returns None, or the EC2 error code of a refused launch
        (the health issue is recorded on the group)."""
        ng.instances = self._alive(ng)
        wanted = ng.spec["scalingConfig"]["desiredSize"]
        if len(ng.instances) > wanted:
            self._terminate(ng, ng.instances[wanted:])
        missing = wanted - len(ng.instances)
        ng.issues = []
        if missing <= 0:
            return None
        issue = self._launch(ng, missing)
        if issue:
            code = issue.pop("ec2Code", "Unknown")
            ng.issues = [issue]
            return code
        return None

    def _waits_for_its_block(self, ng: Any, code: str | None) -> bool:
        """"Create a managed node group with Capacity Blocks for ML": made "before the capacity reservation is
        active, then the ASG won't be able to launch Amazon EC2 instances until it becomes active ... Whenever
        the reservation becomes active, then the launch of instances will succeed and the ASG will be scaled
        up to the desiredSize": such a group is not failed; its launches are retried (:meth:`_keep_desired_size`)."""
        waiting = ng.spec["capacityType"] == "CAPACITY_BLOCK" and code == BLOCK_NOT_ACTIVE
        ng.spec["waiting_for_block"] = waiting
        return waiting

    def _keep_desired_size(self, ng: Any) -> None:
        """The Auto Scaling group keeps desiredSize between transitions: it retries the launches of a Capacity
        Block group waiting for its block, and replaces an instance that is terminated out of band ("Health
        checks for instances in an Auto Scaling group": an unhealthy or terminated instance is replaced)."""
        if ng.status not in ("ACTIVE", "DEGRADED"):
            return
        if ng.spec.get("waiting_for_block"):
            self._waits_for_its_block(ng, self._reconcile(ng))
        elif len(self._alive(ng)) < ng.spec["scalingConfig"]["desiredSize"]:
            self._reconcile(ng)

    def _launch(self, ng: Any, missing: int) -> dict[str, Any] | None:
        spec = ng.spec
        cluster = self._get("cluster", ng.account, ng.region, None, ng.cluster)
        ec2 = self._ec2(ng.account, ng.region)
        template = spec.get("launchTemplate")
        data: dict[str, Any] = {}
        if template:
            data = ec2._get_template_from_args({"LaunchTemplateId": template["id"],
                                                "Version": template["version"]}).data
        # The template version the group runs names the type when it names one: after UpdateNodegroupVersion onto
        # a version of another type, the new nodes are of that type ("Customize managed nodes with launch
        # templates": the nodes "are recycled to match the new configuration of the specified launch template
        # version").
        instance_type = data.get("InstanceType") or spec["instanceTypes"][0]
        if not self.faults.has_capacity(instance_type):
            return {"code": "AsgInstanceLaunchFailures", "resourceIds": [spec["asg"]],
                    "ec2Code": "InsufficientInstanceCapacity",
                    "message": f"Could not launch On-Demand Instances. InsufficientInstanceCapacity - There is no "
                               f"capacity available for {instance_type} (sandbox fault)."}
        image = data.get("ImageId") or amis.for_ami_type(ng.region, spec["version"], spec["amiType"])
        if not image:
            return {"code": "AmiIdNotFound", "resourceIds": [spec["asg"]],
                    "message": f"The sandbox seeds no {spec['amiType']} image: put ImageId in the launch template"}
        groups: list[str] = []
        if not (data.get("SecurityGroupIds") or data.get("SecurityGroups") or data.get("NetworkInterfaces")):
            groups = [cluster.spec["resourcesVpcConfig"]["clusterSecurityGroupId"]] if cluster else []
        subnets = spec["subnets"]
        per_subnet = {s: 0 for s in subnets}
        for index in range(missing):
            per_subnet[subnets[(len(ng.instances) + index) % len(subnets)]] += 1
        tags = {CLUSTER_TAG: ng.cluster, NODEGROUP_TAG: ng.name, f"kubernetes.io/cluster/{ng.cluster}": "owned",
                "aws:autoscaling:groupName": spec["asg"]}
        try:
            for subnet_id, count in per_subnet.items():
                if not count:
                    continue
                kwargs: dict[str, Any] = {
                    "instance_type": instance_type, "is_instance_type_default": False, "region_name": ng.region,
                    "subnet_id": subnet_id, "tags": {"instance": dict(tags)}, "security_group_ids": groups,
                    "client_token": None,
                }
                if template:
                    kwargs["launch_template"] = {"LaunchTemplateId": template["id"], "Version": template["version"]}
                if spec["capacityType"] == "SPOT":
                    kwargs["instance_market_options"] = "spot"
                reservation = ec2.run_instances(image, count, data.get("UserData"), [], **kwargs)
                ng.instances.extend(i.id for i in reservation.instances)
        except Exception as exc:  # noqa: BLE001 - EC2 refused the launch: a health issue with its error
            code = getattr(exc, "code", None) or getattr(exc, "error_type", None) or type(exc).__name__
            message = getattr(exc, "message", None) or str(exc)
            return {"code": "AsgInstanceLaunchFailures", "resourceIds": [spec["asg"]], "ec2Code": str(code),
                    "message": f"Could not launch instances. {code} - {message}"}
        return None

    def _terminate(self, ng: Any, instance_ids: list[str]) -> None:
        if not instance_ids:
            return
        terminate(self._ec2(ng.account, ng.region), instance_ids)
        ng.instances = [i for i in ng.instances if i not in instance_ids]

    def _node_views(self, ng: Any) -> list[dict[str, Any]]:
        """The Kubernetes view of each running instance: the labels EKS's kubelet registers for a managed node
        ("Managed node groups": eks.amazonaws.com/nodegroup, capacityType; Kubernetes well-known labels), the
        network topology labels ``topology.k8s.aws/network-node-layer-1..N`` on instance types EC2 gives a topology
        (EKS user guide "Place distributed AI/ML workloads with network topology labels": one per layer, top
        first; layer-4 "Present only on instance types whose topology has four layers"), the same nodes
        DescribeInstanceTopology answers (:mod:`fmcluster_sandbox.topology`), and the node group's taints with
        Kubernetes effects (``NoSchedule`` …)."""
        ec2 = self._ec2(ng.account, ng.region)
        out = []
        for instance_id in self._alive(ng):
            instance = ec2.get_instance(instance_id)
            zone = getattr(instance.placement, "zone", None) or ec2.get_subnet(instance.subnet_id).availability_zone
            facts = instance_catalog.instance_type(instance.instance_type) or {}
            arch = next((ARCH[a] for a in instance_catalog.architectures(facts) if a in ARCH), "amd64")
            name = instance.private_dns_name
            labels = {
                **ng.spec["labels"],
                "node.kubernetes.io/instance-type": instance.instance_type,
                "eks.amazonaws.com/nodegroup": ng.name,
                "eks.amazonaws.com/capacityType": ng.spec["capacityType"],
                "eks.amazonaws.com/nodegroup-image": instance.image_id,
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": ng.region,
                "kubernetes.io/arch": arch,
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                **topology.labels(ng.account, zone, instance.id, self.faults.moved_to(instance.id)),
            }
            out.append({"name": name, "instance_type": instance.instance_type, "instance_id": instance.id,
                        "nodegroup": ng.name, "zone": zone, "labels": labels,
                        "running": instance.state == "running",  # a stopped instance's node stays, not Ready
                        "taints": [{**t, "effect": KUBE_EFFECT.get(t.get("effect", ""), t.get("effect"))}
                                   for t in ng.spec["taints"]]})
        return out
