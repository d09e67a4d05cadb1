"""A compute node group's static nodes: real moto EC2 instances, launched through the sandbox's EC2 rules.

At the end of each create/update the group holds ``minInstanceCount`` running instances, tagged
``aws:pcs:compute-node-group-id`` / ``aws:pcs:cluster-id``. They launch as PCS launches them: the node
group's launch template (its network interfaces, placement group, Capacity Reservation), with ``amiId``
overriding the template's image, so EC2's RunInstances rules (:mod:`fmcluster_sandbox.ec2_launch`) decide
whether they can. A launch EC2 refuses fails the create/update with EC2's error in ``errorInfo``, except into a
Capacity Block that has not begun: PCS takes a ``scheduled`` block, and the nodes launch when it begins. Nodes that
launch but cannot reach the PCS API (:mod:`.reachability`) never register: the group still becomes ACTIVE
(its "provisioning status doesn't indicate the overall health of the compute node group", botocore PCS
model) and ``errorInfo`` says why.
"""

from __future__ import annotations

from typing import Any

from fmcluster_sandbox.moto_backends import live_instances, terminate
from fmcluster_sandbox.pcs import reachability

NODE_GROUP_TAG = "aws:pcs:compute-node-group-id"
CLUSTER_TAG = "aws:pcs:cluster-id"
REGISTRATION_FAILED = "NodeRegistrationFailed"  # errorInfo code chosen by the sandbox: AWS documents none
BLOCK_NOT_ACTIVE = "InvalidCapacityReservationId.Unavailable"  # EC2's code for a block not active (ec2_launch)


class NodeOperations:
    def _alive(self, ng: Any) -> list[str]:
        return live_instances(self._ec2(ng.account, ng.region), ng.instances)

    def _reconcile(self, ng: Any) -> dict[str, Any] | None:
        """Bring the group to minInstanceCount nodes; a failure (``fatal`` when nothing could launch)."""
        spec = ng.spec
        types = [c.get("instanceType", "") for c in spec["instanceConfigs"]]
        usable = [t for t in types if self.faults.has_capacity(t)]
        if not usable:
            return {"fatal": True, "code": "InsufficientInstanceCapacity",
                    "message": f"There is no Spot/On-Demand capacity available for {', '.join(types)} in the "
                               "requested subnets (sandbox fault)."}
        if ng.replace_instances:
            self._terminate(ng, list(ng.instances))
            ng.replace_instances = False
        ng.instances = self._alive(ng)
        wanted = spec["scalingConfiguration"]["minInstanceCount"]
        if len(ng.instances) > wanted:
            self._terminate(ng, ng.instances[wanted:])
        missing = wanted - len(ng.instances)
        if missing > 0:
            failure = self._launch(ng, usable[0], missing)
            if failure:
                return failure
        return self._registration(ng)

    def _launch(self, ng: Any, instance_type: str, missing: int) -> dict[str, Any] | None:
        spec = ng.spec
        ec2 = self._ec2(ng.account, ng.region)
        subnets = spec["subnetIds"]
        per_subnet = {s: 0 for s in subnets}
        for index in range(missing):
            per_subnet[subnets[(len(ng.instances) + index) % len(subnets)]] += 1
        template = spec.get("customLaunchTemplate")
        image = spec.get("amiId") or self._template_image(ng, template)
        if not image:
            return {"fatal": True, "code": "InvalidParameter",
                    "message": "No AMI: set amiId or ImageId in the launch template"}
        try:
            for subnet_id, count in per_subnet.items():
                if not count:
                    continue
                kwargs: dict[str, Any] = {
                    "instance_type": instance_type, "is_instance_type_default": False, "region_name": ng.region,
                    "subnet_id": subnet_id, "tags": {"instance": {NODE_GROUP_TAG: ng.id, CLUSTER_TAG: ng.cluster_id}},
                    "security_group_ids": list(spec.get("securityGroupIds") or []),
                    "key_name": spec.get("sshKeyName") or None, "client_token": None,
                }
                if template:
                    kwargs["launch_template"] = {"LaunchTemplateId": template["id"], "Version": template["version"]}
                if spec.get("purchaseOption") == "SPOT":
                    kwargs["instance_market_options"] = "spot"
                reservation = ec2.run_instances(image, count, None, [], **kwargs)
                for instance in reservation.instances:
                    ng.instances.append(instance.id)
                    try:
                        ec2.associate_iam_instance_profile(instance_id=instance.id,
                                                           iam_instance_profile_arn=spec["iamInstanceProfileArn"])
                    except Exception:  # noqa: BLE001 - association is cosmetic in the sandbox
                        pass
        except Exception as exc:  # noqa: BLE001 - EC2 refused the launch: the node group fails with its error
            code = getattr(exc, "code", None) or getattr(exc, "error_type", None) or type(exc).__name__
            return {"fatal": True, "code": str(code),
                    "message": f"RunInstances failed: {getattr(exc, 'message', None) or exc}"}
        return None

    def _waits_for_its_block(self, ng: Any, failure: dict[str, Any] | None) -> bool:
        """AWS PCS takes a Capacity Block that is ``scheduled`` or ``active`` ("Using Amazon EC2 Capacity Blocks for
        ML with AWS PCS", Limitations): a CAPACITY_BLOCK group made before its block begins is not failed; its
        static nodes launch once the block is active (:meth:`_launch_when_block_begins`)."""
        ng.waiting_for_block = bool(failure) and ng.spec.get("purchaseOption") == "CAPACITY_BLOCK" and \
            failure.get("code") == BLOCK_NOT_ACTIVE
        return ng.waiting_for_block

    def _launch_when_block_begins(self, ng: Any) -> None:
        failure = self._reconcile(ng)
        if not self._waits_for_its_block(ng, failure) and failure:
            ng.error_info = [{k: failure[k] for k in ("code", "message")}]

    def _registration(self, ng: Any) -> dict[str, Any] | None:
        ec2 = self._ec2(ng.account, ng.region)
        reasons = []
        for instance_id in ng.instances:
            reason = reachability.why_unreachable(ec2, ec2.get_instance(instance_id), ng.region)
            if reason:
                reasons.append(reason)
        if not reasons:
            return None
        return {"fatal": False, "code": REGISTRATION_FAILED,
                "message": f"{len(reasons)} of {len(ng.instances)} instance(s) could not register with the cluster: "
                           f"{reasons[0]}"}

    def _template_image(self, ng: Any, template: dict | None) -> str | None:
        if not template:
            return None
        try:
            version = self._ec2(ng.account, ng.region).get_launch_template(template["id"]).get_version(
                template["version"])
            return version.data.get("ImageId")
        except Exception:  # noqa: BLE001
            return None

    def _terminate(self, ng: Any, instance_ids: list[str]) -> None:
        if not instance_ids:
            return
        terminate(self._ec2(ng.account, ng.region), instance_ids)
        ng.instances = [i for i in ng.instances if i not in instance_ids]
