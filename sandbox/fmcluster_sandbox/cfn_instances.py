"""ParallelCluster's head node and its teardown in moto's CloudFormation, as CloudFormation and EC2 do them.

* ``AWS::EC2::Instance`` whose settings come from a launch template (moto reads only the resource's own
  properties), launched through the sandbox's EC2 rules like any other RunInstances;
* block device mappings AWS accepts and moto rejects (instance-store entries, EBS entries that take their
  size from the AMI);
* stack deletion removes the head node's network interface and the cluster's hosted zone, and
  ParallelCluster's cleanup terminates the compute nodes (not the head node).
"""

from __future__ import annotations


def normalize_block_device_mappings(ec2_backend, image_id: str | None, mappings: list[dict]) -> list[dict]:
    """Rewrite block device mappings AWS accepts into the form moto requires.

    * instance-store mappings ({"DeviceName": ..., "VirtualName": "ephemeral0"}, no Ebs) create no EBS
      volume; moto raises "MissingParameter: ebs" (RunInstances) or KeyError (launch templates): drop.
    * an Ebs mapping without VolumeSize/SnapshotId takes its size from the AMI's mapping for the same
      device on AWS; moto raises "MissingParameter: size or snapshotId": use the AMI's snapshot.
    """
    ami = ec2_backend.amis.get(image_id) if image_id else None
    image_snapshots = {ami.root_device_name: ami.ebs_snapshot.id} if ami is not None else {}
    fixed = []
    for mapping in mappings or []:
        if mapping.get("VirtualName") and "Ebs" not in mapping:
            continue
        ebs = mapping.get("Ebs")
        if ebs is not None and not ebs.get("VolumeSize") and not ebs.get("SnapshotId"):
            snapshot = image_snapshots.get(mapping.get("DeviceName"))
            extra = {"SnapshotId": snapshot} if snapshot else {"VolumeSize": 8}
            mapping = {**mapping, "Ebs": {**ebs, **extra}}
        fixed.append(mapping)
    return fixed


def _create_instance_from_launch_template(account_id: str, region_name: str, properties: dict):
    """AWS::EC2::Instance whose settings come from a LaunchTemplate (ParallelCluster's head node).

    moto's Instance model reads ImageId etc. from the resource's own properties only (KeyError
    'ImageId'), and ignores NetworkInterfaces, MetadataOptions and the IamInstanceProfile{Name} form.
    """
    from moto.ec2 import ec2_backends

    backend = ec2_backends[account_id][region_name]
    launch_template = dict(properties["LaunchTemplate"])
    launch_template["Version"] = str(launch_template.get("Version", "$Default"))
    data = {**backend._get_template_from_args(launch_template).data, **properties}
    image_id = data["ImageId"]
    nics = [{k: v for k, v in nic.items() if v is not None} for nic in data.get("NetworkInterfaces", [])]
    subnet_id = data.get("SubnetId")
    for nic in nics:
        if nic.get("NetworkInterfaceId") and not subnet_id:
            subnet_id = backend.get_network_interface(nic["NetworkInterfaceId"]).subnet.id
    reservation = backend.run_instances(
        image_id=image_id,
        user_data=data.get("UserData"),
        count=1,
        security_group_names=data.get("SecurityGroups", []),
        security_group_ids=data.get("SecurityGroupIds", []),
        instance_type=data.get("InstanceType", "m1.small"),
        is_instance_type_default=not data.get("InstanceType"),
        subnet_id=subnet_id,
        key_name=data.get("KeyName"),
        nics=nics,
        ebs_optimized=data.get("EbsOptimized", False),
        metadata_options=data.get("MetadataOptions", {}),
        launch_template=launch_template,
        block_device_mappings=normalize_block_device_mappings(backend, image_id, data.get("BlockDeviceMappings", [])),
    )
    instance = reservation.instances[0]
    for tag in properties.get("Tags", []):
        instance.add_tag(tag["Key"], tag["Value"])
    profile = data.get("IamInstanceProfile")
    if profile:
        name = profile.get("Name") if isinstance(profile, dict) else profile
        if name:
            backend.associate_iam_instance_profile(instance_id=instance.id, iam_instance_profile_name=name)
    return instance


def _support_instances_from_launch_templates() -> None:
    from moto.ec2.models.instances import Instance

    original = Instance.create_from_cloudformation_json.__func__
    if getattr(original, "_fmcluster", False):
        return

    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        properties = cloudformation_json.get("Properties", {})
        if "LaunchTemplate" in properties and "ImageId" not in properties:
            return _create_instance_from_launch_template(account_id, region_name, properties)
        return original(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)

    create_from_cloudformation_json._fmcluster = True
    Instance.create_from_cloudformation_json = classmethod(create_from_cloudformation_json)


def terminate_compute_nodes(account_id: str, region_name: str, cluster_name: str) -> None:
    """Terminate a cluster's compute nodes (not its head node), as pcluster's cleanup Lambda does."""
    from moto.ec2 import ec2_backends

    backend = ec2_backends[account_id][region_name]
    filters = {
        "tag:parallelcluster:cluster-name": [cluster_name],
        "instance-state-name": ["pending", "running", "stopping", "stopped"],
    }
    ids = [
        instance.id
        for reservation in backend.describe_instances(filters=filters)
        for instance in reservation.instances
        if {"key": "parallelcluster:node-type", "value": "HeadNode"} not in _tag_pairs(instance)
    ]
    if ids:
        backend.terminate_instances(ids)


def _support_deletions() -> None:
    """Let stack deletion remove the head node ENI and the cluster's hosted zone, as on AWS.

    moto's NetworkInterface.delete() takes no (account, region) arguments and FakeZone has no delete at
    all, so both outlived their stack (an "in-use" ENI and a "<cluster>.pcluster." zone).
    """
    from moto.ec2.models.elastic_network_interfaces import NetworkInterface
    from moto.route53.models import FakeZone

    if getattr(NetworkInterface, "_fmcluster", False):
        return

    def delete_eni(cls, resource_name, cloudformation_json, account_id, region_name) -> None:
        from moto.ec2 import ec2_backends

        eni = ec2_backends[account_id][region_name].enis.get(resource_name)
        if eni is None:
            return
        instance = getattr(eni, "instance", None)
        if instance is not None and instance.state != "terminated":
            raise RuntimeError(f"{resource_name} is attached to {instance.id}")  # retried after the instance
        eni.delete()

    def delete_zone(cls, resource_name, cloudformation_json, account_id, region_name) -> None:
        from moto.route53 import route53_backends

        route53_backends[account_id]["aws"].delete_hosted_zone(resource_name)

    NetworkInterface.delete_from_cloudformation_json = classmethod(delete_eni)
    FakeZone.delete_from_cloudformation_json = classmethod(delete_zone)
    NetworkInterface._fmcluster = True


def _tag_pairs(instance) -> list[dict[str, str]]:
    return [{"key": tag["key"], "value": tag["value"]} for tag in instance.get_tags()]



def install() -> None:
    _support_instances_from_launch_templates()
    _support_deletions()
