"""CloudFormation resource models moto lacks, as far as ParallelCluster's cluster template needs them.

moto maps a template's resource types to the *direct* subclasses of ``CloudFormationModel`` (see
``moto.cloudformation.parsing.get_model_map``); a type it does not know is skipped with a warning, and a
``Fn::GetAtt``/``Ref`` on it then fails the whole stack. Each class below directly subclasses
``CloudFormationModel`` so moto finds it; :func:`register` makes moto re-scan after import.

The models only do what the sandbox needs to look like AWS from ParallelCluster's side: a physical id,
the attributes the template reads, and (for ParallelCluster's cleanup custom resource) the side effects
its Lambda would have on stack deletion.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from moto.core.common_models import CloudFormationModel
from moto.moto_api._internal import mock_random

logger = logging.getLogger(__name__)


class _SandboxResource:
    """Shared behaviour: remember the properties, exist immediately, update in place."""

    _attributes: tuple[str, ...] = ()

    def __init__(self, name: str, properties: dict[str, Any], account_id: str, region_name: str, **kwargs):
        self.name = name
        self.properties = properties
        self.account_id = account_id
        self.region_name = region_name
        self.stack_id = kwargs.get("StackId", "")
        self.logical_id = kwargs.get("LogicalId", "")

    @property
    def physical_resource_id(self) -> str:
        return self.name

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in cls._attributes

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        if attribute_name == "Arn" and "Arn" in self._attributes:
            return self.arn
        raise UnformattedGetAttTemplateException()

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs
    ):
        return cls(resource_name, cloudformation_json.get("Properties", {}), account_id, region_name, **kwargs)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ):
        original_resource.properties = cloudformation_json.get("Properties", {})
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name) -> None:
        return None

    def is_created(self) -> bool:
        return True


class CloudWatchAlarm(_SandboxResource, CloudFormationModel):
    # The head node health alarms: ParallelCluster only reads their Arn (into the composite alarm).
    _attributes = ("Arn",)

    def __init__(self, name, properties, account_id, region_name, **kwargs):
        super().__init__(properties.get("AlarmName") or name, properties, account_id, region_name, **kwargs)
        self.arn = f"arn:aws:cloudwatch:{region_name}:{account_id}:alarm:{self.name}"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudWatch::Alarm"


# Listing CloudFormationModel again keeps it a direct subclass, which is how moto finds models.
class CloudWatchCompositeAlarm(CloudWatchAlarm, CloudFormationModel):
    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudWatch::CompositeAlarm"


class LogsMetricFilter(_SandboxResource, CloudFormationModel):
    # Metric filters on the cluster log group; nothing reads them back in the sandbox.
    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::Logs::MetricFilter"


class SecurityGroupEgress(_SandboxResource, CloudFormationModel):
    # Applies the rule to moto's security group so DescribeSecurityGroups looks like AWS.
    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::EC2::SecurityGroupEgress"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        resource = super().create_from_cloudformation_json(
            resource_name, cloudformation_json, account_id, region_name, **kwargs
        )
        resource._authorize()
        return resource

    def _authorize(self) -> None:
        from moto.ec2 import ec2_backends

        props = self.properties
        permission = {
            "IpProtocol": str(props.get("IpProtocol", "-1")),
            "FromPort": props.get("FromPort"),
            "ToPort": props.get("ToPort"),
        }
        if props.get("CidrIp"):
            permission["IpRanges"] = [{"CidrIp": props["CidrIp"]}]
        elif props.get("CidrIpv6"):
            permission["Ipv6Ranges"] = [{"CidrIpv6": props["CidrIpv6"]}]
        elif props.get("DestinationSecurityGroupId"):
            permission["UserIdGroupPairs"] = [{"GroupId": props["DestinationSecurityGroupId"]}]
        else:
            return
        try:
            ec2_backends[self.account_id][self.region_name].authorize_security_group_egress(
                props["GroupId"], [permission]
            )
        except Exception as err:  # a duplicate rule is not worth failing a stack for
            logger.debug("egress rule on %s not applied: %s", props.get("GroupId"), err)


class WaitConditionHandle(_SandboxResource, CloudFormationModel):
    # Ref gives the presigned URL the head node would cfn-signal to when bootstrap finishes.
    def __init__(self, name, properties, account_id, region_name, **kwargs):
        super().__init__(name, properties, account_id, region_name, **kwargs)
        arn = quote(f"{self.stack_id}/{self.logical_id}", safe="")
        self.url = (
            f"https://cloudformation-waitcondition-{region_name}.s3.amazonaws.com/{arn}"
            f"?X-Amz-Signature={mock_random.get_random_hex(32)}"
        )

    @property
    def physical_resource_id(self) -> str:
        return self.url

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudFormation::WaitConditionHandle"


# What ParallelCluster's head node sends with its FAILURE signal when cfn-init fails (error_exit in
# pcluster/resources/head_node/user_data.sh, when no /var/log/parallelcluster/bootstrap_error_msg exists).
HEAD_NODE_BOOTSTRAP_ERROR = (
    "Failed to bootstrap the head node. Please check /var/log/cfn-init.log and /var/log/chef-client.log in the "
    "head node or in CloudWatch logs. Please refer to https://docs.aws.amazon.com/parallelcluster/latest/ug/"
    "troubleshooting-v3.html#troubleshooting-v3-get-logs for more details on ParallelCluster logs."
)


class WaitConditionFailed(Exception):
    """A wait condition received a FAILURE signal; the message is CloudFormation's event reason."""

    def __init__(self, unique_id: str, message: str, physical_resource_id: str = ""):
        super().__init__(f"WaitCondition received failed message: '{message}' for uniqueId: {unique_id}")
        self.message = str(self)
        self.unique_id = unique_id
        self.physical_resource_id = physical_resource_id


def _no_failure(stack_name: str) -> bool:
    return False


_head_node_fails: Callable[[str], bool] = _no_failure


def set_head_node_failure_check(check: Callable[[str], bool] | None) -> None:
    """``check(stack_name)`` says whether that stack's head node fails to bootstrap (sandbox faults)."""
    global _head_node_fails
    _head_node_fails = check or _no_failure


def _stack_name(stack_id: str) -> str:
    # arn:aws:cloudformation:<region>:<account>:stack/<name>/<uuid>
    parts = stack_id.split(":stack/", 1)[-1].split("/")
    return parts[0] if parts else ""


def _head_node_id(account_id: str, region_name: str, cluster_name: str) -> str:
    from moto.ec2 import ec2_backends

    filters = {
        "tag:parallelcluster:cluster-name": [cluster_name],
        "tag:parallelcluster:node-type": ["HeadNode"],
        "instance-state-name": ["pending", "running"],
    }
    reservations = ec2_backends[account_id][region_name].describe_instances(filters=filters)
    ids = [instance.id for reservation in reservations for instance in reservation.instances]
    return ids[-1] if ids else "i-00000000000000000"


class WaitCondition(_SandboxResource, CloudFormationModel):
    # The real head node signals its wait condition once cfn-init/bootstrap succeeds. moto creates the
    # head node instance (which the wait condition depends on) synchronously and "running", and nothing
    # runs on it, so the sandbox signals success at creation with the head node's usual payload, or, when
    # the sandbox's faults say this stack's head node fails (``pcluster_stack:<name>``), the FAILURE
    # signal its user data sends: creating the resource then raises WaitConditionFailed.
    _attributes = ("Data",)

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        resource = super().create_from_cloudformation_json(
            resource_name, cloudformation_json, account_id, region_name, **kwargs
        )
        stack_name = _stack_name(resource.stack_id)
        if stack_name and _head_node_fails(stack_name):
            raise WaitConditionFailed(
                _head_node_id(account_id, region_name, stack_name),
                HEAD_NODE_BOOTSTRAP_ERROR,
                resource.physical_resource_id,
            )
        return resource

    @property
    def physical_resource_id(self) -> str:
        return f"{self.stack_id}/{self.logical_id}"

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        if attribute_name == "Data":
            count = int(self.properties.get("Count", 1) or 1)
            return json.dumps({str(i + 1): "bootstrap completed (sandbox)" for i in range(count)})
        return super().get_cfn_attribute(attribute_name)

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudFormation::WaitCondition"


class CustomResource(_SandboxResource, CloudFormationModel):
    """``AWS::CloudFormation::CustomResource`` backed by ParallelCluster's cleanup Lambda.

    moto would invoke the ServiceToken Lambda in Docker (unavailable here). ParallelCluster's template
    uses three such resources, all on its ``cleanup_resources`` handler, which does nothing on Create
    and Update and, on Delete, performs the ``Action`` property. The sandbox performs those actions
    against moto's backends directly. Unknown actions succeed without effect.
    """

    @property
    def physical_resource_id(self) -> str:
        return f"{self.logical_id}-{self.stack_id.rsplit('/', 1)[-1]}"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudFormation::CustomResource"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return True  # custom resources may return any attribute; these return none

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        return ""

    def delete(self, account_id: str, region_name: str) -> None:
        action = self.properties.get("Action")
        handler = {
            "DELETE_S3_ARTIFACTS": self._delete_s3_artifacts,
            "TERMINATE_EC2_INSTANCES": self._terminate_instances,
            "DELETE_DNS_RECORDS": self._delete_dns_records,
        }.get(action)
        if handler is not None:
            try:
                handler()
            except Exception as err:  # the real Lambda logs and reports success on cleanup errors too
                logger.warning("sandbox custom resource %s (%s) failed: %s", self.logical_id, action, err)

    def _delete_s3_artifacts(self) -> None:
        from moto.s3.models import s3_backends

        backend = s3_backends[self.account_id]["aws"]
        bucket = self.properties["ResourcesS3Bucket"]
        prefix = self.properties["ArtifactS3RootDirectory"].rstrip("/") + "/"
        keys = [key for key in list(backend.get_bucket(bucket).keys.keys()) if key.startswith(prefix)]
        if keys:
            backend.delete_objects(bucket, [{"Key": key} for key in keys], bypass_retention=True)

    def _terminate_instances(self) -> None:
        from fmcluster_sandbox.cfn_instances import terminate_compute_nodes

        terminate_compute_nodes(self.account_id, self.region_name, self.properties.get("StackName"))

    def _delete_dns_records(self) -> None:
        from moto.route53 import route53_backends

        zone_id = self.properties.get("ClusterHostedZone")
        if not zone_id:
            return  # the cluster uses an existing hosted zone or none
        backend = route53_backends[self.account_id]["aws"]
        zone = backend.get_hosted_zone(zone_id)
        zone.rrsets = [record for record in zone.rrsets if record.type in ("NS", "SOA")]


SANDBOX_MODELS: tuple[type[CloudFormationModel], ...] = (
    CloudWatchAlarm,
    CloudWatchCompositeAlarm,
    LogsMetricFilter,
    SecurityGroupEgress,
    WaitConditionHandle,
    WaitCondition,
    CustomResource,
)


def register() -> None:
    """Make moto's CloudFormation parser use the models above. Idempotent."""
    from moto.cloudformation import parsing

    for model in SANDBOX_MODELS:
        # moto ignores these two types ("NULL_MODELS"); the head node's Ref/GetAtt needs real objects
        if model.cloudformation_type() in parsing.NULL_MODELS:
            parsing.NULL_MODELS.remove(model.cloudformation_type())
    # the model lists are lru-cached from CloudFormationModel.__subclasses__() on first use
    parsing.get_model_list.cache_clear()
    parsing.get_model_map.cache_clear()
    parsing.get_name_type_map.cache_clear()
    missing = [m for m in SANDBOX_MODELS if parsing.get_model_map().get(m.cloudformation_type()) is not m]
    if missing:
        raise RuntimeError(f"moto did not pick up sandbox CloudFormation models: {missing}")
