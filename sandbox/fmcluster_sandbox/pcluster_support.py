"""Make ParallelCluster's real create path work against the moto-based sandbox.

ParallelCluster (``pcluster.lib``) validates the config against EC2/IAM/S3, uploads artifacts to a
cluster bucket, synthesizes a CloudFormation template with the CDK and creates a stack. moto has most of
those APIs; this module fills the gaps *inside the sandbox* (ParallelCluster itself is never patched):

* seeds ParallelCluster's official AMIs as AWS publishes them: named as pcluster looks them up
  (``aws-parallelcluster-<version>-<os part>-<arch>-<build time> <ISO time>``, pcluster/aws/ec2.py and
  ``OS_TO_IMAGE_NAME_PART_MAP``), owned by account 247102896272 (the owner pcluster's own release scripts
  use), for the OSes ParallelCluster publishes (``PRIVATE_OSES`` are not), with the root device of the
  base OS (``/dev/xvda`` on Amazon Linux, ``/dev/sda1`` on Ubuntu and RHEL: "Device names for volumes on
  Amazon EC2 instances", EC2 user guide) — descriptions AWS gives them are not published, so none;
* registers CloudFormation models for the resource types of ParallelCluster's template that moto lacks
  (:mod:`fmcluster_sandbox.cfn_models`, :mod:`fmcluster_sandbox.cfn_instances`, :mod:`fmcluster_sandbox.cfn_fsx`),
  stack failure and deletion as CloudFormation does them (:mod:`fmcluster_sandbox.cfn_stacks`) and the
  compute fleet status the head node keeps (:mod:`fmcluster_sandbox.pcluster_fleet`);
* the fault ``fail_status: {"pcluster_stack:<cluster>": "CREATE_FAILED"}`` makes that cluster's head node
  send the FAILURE signal of a failed bootstrap to its wait condition.

``install(faults)`` is idempotent and must run before the server handles requests; the sandbox hands it
its :class:`~fmcluster_sandbox.faults.Faults` (a later call only replaces the faults consulted).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import threading
from urllib.parse import urlparse

from fmcluster_sandbox import cfn_fsx, cfn_instances, cfn_models, cfn_stacks, pcluster_fleet

SEEDED_ARCHITECTURES = ("x86_64", "arm64")
# The account that publishes ParallelCluster's official AMIs.
PCLUSTER_AMI_OWNER_ID = "247102896272"
# Root device name by the OS's own AMIs (EC2 user guide, "Device names for volumes").
ROOT_DEVICES = {"alinux2023": "/dev/xvda", "ubuntu2204": "/dev/sda1", "ubuntu2404": "/dev/sda1",
                "rhel8": "/dev/sda1", "rhel9": "/dev/sda1"}

logger = logging.getLogger(__name__)
_install_lock = threading.Lock()
_installed = False
# The sandbox's Faults (fmcluster_sandbox.faults); None: no faults injected.
_faults = None
# Fault kind of fail_status that fails a ParallelCluster cluster's stack (by cluster = stack name).
STACK_FAULT_KIND = "pcluster_stack"


def _pcluster_version() -> str:
    from pcluster.utils import get_installed_version

    return get_installed_version()


def official_ami_specs() -> list[dict]:
    """Describe the official AMIs pcluster expects, with stable ids (same in every region and run)."""
    from pcluster.constants import OS_TO_IMAGE_NAME_PART_MAP, PRIVATE_OSES

    version = _pcluster_version()
    created = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    specs = []
    for os_name, os_part in OS_TO_IMAGE_NAME_PART_MAP.items():
        if os_name in PRIVATE_OSES:
            continue
        for arch in SEEDED_ARCHITECTURES:
            stamp = f"{created:%Y%m%d%H%M} {created:%Y-%m-%dT%H-%M-%S}.000Z"
            name = f"aws-parallelcluster-{version}-{os_part}-{arch}-{stamp}"
            specs.append({
                "ami_id": f"ami-{hashlib.sha256(name.encode()).hexdigest()[:17]}", "name": name,
                "architecture": arch, "os": os_name, "root_device_name": ROOT_DEVICES.get(os_name, "/dev/sda1"),
                "tags": {"parallelcluster:version": version, "parallelcluster:os": os_name,
                         "parallelcluster:build_status": "available"},
            })
    return specs


def _seed_amis(ami_backend) -> None:
    from moto.ec2.models.amis import Ami

    zone = f"{ami_backend.region_name}a"
    for spec in official_ami_specs():
        if spec["ami_id"] in ami_backend.amis:
            continue
        ami_backend.amis[spec["ami_id"]] = Ami(
            ami_backend, spec["ami_id"], name=spec["name"], owner_id=PCLUSTER_AMI_OWNER_ID, owner_alias="amazon",
            public=True, virtualization_type="hvm", architecture=spec["architecture"],
            creation_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc), hypervisor="xen",
            root_device_type="ebs", root_device_name=spec["root_device_name"], region_name=zone,
            image_location=f"amazon/{spec['name']}", tags=spec["tags"])


def _hook_ami_loading() -> None:
    from fmcluster_sandbox.ami_seeding import add_seeder

    add_seeder(_seed_amis)


def _normalize_run_instances_mappings() -> None:
    # pcluster's launch-template validators call RunInstances(DryRun=True) with block device mappings
    # AWS accepts and moto rejects; see cfn_instances.normalize_block_device_mappings.
    from moto.ec2.responses.instances import InstanceResponse

    original = InstanceResponse._parse_block_device_mapping
    if getattr(original, "_fmcluster", False):
        return

    def _parse_block_device_mapping(self):
        mappings = self._get_param("BlockDeviceMappings", [])
        if not mappings:
            return original(self)
        fixed = cfn_instances.normalize_block_device_mappings(self.ec2_backend, self._get_param("ImageId"), mappings)
        self._get_param = _with_param(self._get_param, "BlockDeviceMappings", fixed)
        try:
            return original(self)
        finally:
            del self._get_param

    _parse_block_device_mapping._fmcluster = True
    InstanceResponse._parse_block_device_mapping = _parse_block_device_mapping


def _with_param(get_param, name, value):
    def _get_param(param_name, if_none=None):
        return value if param_name == name else get_param(param_name, if_none)

    return _get_param


_request_context = threading.local()


def _evaluate_secure_transport() -> None:
    # ParallelCluster's cluster bucket policy denies s3:* when {"Bool": {"aws:SecureTransport": "false"}}.
    # moto's bucket-policy check never supplies aws:SecureTransport and treats a statement whose
    # condition has no value as matching, so that Deny applies to every request, even over HTTPS.
    # Record each S3 request's scheme and evaluate the policy with it: a statement applies only when its
    # aws:SecureTransport condition holds (other condition keys keep moto's behaviour).
    # The same policy has a Deny for Principal {"Service": "logs.<region>.amazonaws.com"} on
    # parallelcluster/*; moto ignores non-"*" principals and applies it to everyone. Sandbox callers are
    # IAM identities, never AWS service principals, so statements for service principals are skipped.
    from moto.s3.models import FakeBucket
    from moto.s3.responses import S3Response

    original_setup = S3Response.setup_class
    if getattr(original_setup, "_fmcluster", False):
        return

    def setup_class(self, request, full_url=None, headers=None):
        url = request.raw_url if full_url is None else full_url
        _request_context.secure_transport = urlparse(url).scheme == "https"
        return original_setup(self, request, full_url, headers)

    def get_permission(self, action: str, resource: str):
        from moto.iam.access_control import IAMPolicy, PermissionResult

        if self.policy is None:
            return PermissionResult.NEUTRAL
        policy = json.loads(self.policy)
        statements = policy.get("Statement", [])
        if isinstance(statements, dict):
            statements = [statements]
        secure = "true" if getattr(_request_context, "secure_transport", True) else "false"
        applicable = []
        for statement in statements:
            principal = statement.get("Principal")
            if isinstance(principal, dict) and set(principal) == {"Service"}:
                continue
            condition = dict(statement.get("Condition") or {})
            flag = (condition.get("Bool") or {}).get("aws:SecureTransport")
            if flag is not None:
                if str(flag).lower() != secure:
                    continue
                rest = {k: v for k, v in condition["Bool"].items() if k != "aws:SecureTransport"}
                if rest:
                    condition["Bool"] = rest
                else:
                    del condition["Bool"]
                statement = {k: v for k, v in statement.items() if k != "Condition"}
                if condition:
                    statement["Condition"] = condition
            applicable.append(statement)
        if not applicable:
            return PermissionResult.NEUTRAL
        return IAMPolicy(json.dumps({**policy, "Statement": applicable})).is_action_permitted(action, resource)

    setup_class._fmcluster = True
    S3Response.setup_class = setup_class
    FakeBucket.get_permission = get_permission


def _stack_must_fail(stack_name: str) -> bool:
    forced = getattr(_faults, "forced_status", None)
    return forced is not None and forced(STACK_FAULT_KIND, stack_name) == "CREATE_FAILED"


def set_faults(faults) -> None:
    """Consult ``faults`` (the sandbox's Faults; None for none) for ParallelCluster stack faults."""
    global _faults
    _faults = faults
    cfn_models.set_head_node_failure_check(_stack_must_fail if faults is not None else None)



def _default_key_type() -> None:
    # CreateKeyPair without KeyType makes an RSA key on AWS and DescribeKeyPairs reports KeyType "rsa";
    # moto stores None and omits the field, and pcluster's KeyPairValidator fails with KeyError 'KeyType'.
    from moto.ec2.models.key_pairs import KeyPairBackend

    original = KeyPairBackend.create_key_pair
    if getattr(original, "_fmcluster", False):
        return

    def create_key_pair(self, name, key_type, tags):
        return original(self, name, key_type or "rsa", tags)

    create_key_pair._fmcluster = True
    KeyPairBackend.create_key_pair = create_key_pair


def install(faults=None) -> None:
    """Apply every sandbox extension ParallelCluster needs. Safe to call more than once.

    ``faults`` (the sandbox's :class:`~fmcluster_sandbox.faults.Faults`) is consulted for
    ``fail_status["pcluster_stack:<cluster>"]``; a later call with faults replaces them.
    """
    global _installed
    with _install_lock:
        if faults is not None:
            set_faults(faults)
        if _installed:
            return
        _hook_ami_loading()
        _normalize_run_instances_mappings()
        _evaluate_secure_transport()
        cfn_models.register()
        cfn_instances.install()
        cfn_fsx.install()
        cfn_stacks.install()
        pcluster_fleet.install()
        _default_key_type()
        _installed = True
