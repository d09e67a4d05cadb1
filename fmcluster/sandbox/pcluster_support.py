"""Make ParallelCluster's real create path work against the moto-based sandbox.

ParallelCluster (``pcluster.lib``) validates the config against EC2/IAM/S3, uploads artifacts to a
cluster bucket, synthesizes a CloudFormation template with the CDK and creates a stack. moto has most of
those APIs; this module fills the gaps *inside the sandbox* (ParallelCluster itself is never patched):

* seeds the official ParallelCluster AMIs pcluster looks up by name (``aws-parallelcluster-<version>-
  <os>-<arch>*`` owned by ``amazon``) into every region's EC2 backend;
* registers CloudFormation models for the resource types of ParallelCluster's template that moto lacks
  (see :mod:`fmcluster.sandbox.cfn_models`);
* makes stack creation fail like CloudFormation: a resource that cannot be created fails the stack
  (``CREATE_FAILED``, or ``ROLLBACK_IN_PROGRESS`` → ``ROLLBACK_COMPLETE`` as ``DisableRollback``/
  ``OnFailure`` ask) with a ``CREATE_FAILED`` event for that resource, instead of an HTTP 500;
* the fault ``fail_status: {"pcluster_stack:<cluster>": "CREATE_FAILED"}`` makes that cluster's head node
  send the FAILURE signal of a failed bootstrap to its wait condition.

``install(faults)`` is idempotent and must run before the server handles requests; the sandbox hands it
its :class:`~fmcluster.sandbox.faults.Faults` (a later call only replaces the faults consulted).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import threading
from urllib.parse import urlparse

from fmcluster.sandbox import cfn_models

# OS/architecture combinations fmcluster generates configs for.
SEEDED_OSES = ("ubuntu2204", "alinux2023")
SEEDED_ARCHITECTURES = ("x86_64", "arm64")
# The account that publishes ParallelCluster's official AMIs.
PCLUSTER_AMI_OWNER_ID = "247102896272"

logger = logging.getLogger(__name__)
_install_lock = threading.Lock()
_installed = False
# The sandbox's Faults (fmcluster.sandbox.faults); None: no faults injected.
_faults = None
# Fault kind of fail_status that fails a ParallelCluster cluster's stack (by cluster = stack name).
STACK_FAULT_KIND = "pcluster_stack"


def _pcluster_version() -> str:
    from pcluster.utils import get_installed_version

    return get_installed_version()


def official_ami_specs() -> list[dict]:
    """Describe the official AMIs pcluster expects, with stable ids (same in every region and run)."""
    from pcluster.constants import OS_TO_IMAGE_NAME_PART_MAP

    version = _pcluster_version()
    created = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    specs = []
    for os_name in SEEDED_OSES:
        for arch in SEEDED_ARCHITECTURES:
            # Real names look like "aws-parallelcluster-3.16.1-ubuntu-2204-lts-hvm-x86_64-202601010000
            # 2026-01-01T00-00-00.000Z"; pcluster matches on the prefix and parses the OS part back out.
            name = (
                f"aws-parallelcluster-{version}-{OS_TO_IMAGE_NAME_PART_MAP[os_name]}-{arch}-"
                f"{created:%Y%m%d%H%M} {created:%Y-%m-%dT%H-%M-%S}.000Z"
            )
            digest = hashlib.sha256(name.encode()).hexdigest()[:17]
            specs.append(
                {
                    "ami_id": f"ami-{digest}",
                    "name": name,
                    "description": f"AWS ParallelCluster AMI for {os_name}",
                    "architecture": arch,
                    "os": os_name,
                    "tags": {
                        "parallelcluster:version": version,
                        "parallelcluster:os": os_name,
                        "parallelcluster:build_status": "available",
                    },
                }
            )
    return specs


def _seed_amis(ami_backend) -> None:
    from moto.ec2.models.amis import Ami

    zone = f"{ami_backend.region_name}a"
    for spec in official_ami_specs():
        if spec["ami_id"] in ami_backend.amis:
            continue
        ami_backend.amis[spec["ami_id"]] = Ami(
            ami_backend,
            spec["ami_id"],
            name=spec["name"],
            description=spec["description"],
            owner_id=PCLUSTER_AMI_OWNER_ID,
            owner_alias="amazon",
            public=True,
            virtualization_type="hvm",
            architecture=spec["architecture"],
            creation_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
            hypervisor="xen",
            root_device_type="ebs",
            root_device_name="/dev/sda1",
            region_name=zone,
            tags=spec["tags"],
        )


def _hook_ami_loading() -> None:
    from fmcluster.sandbox.ami_seeding import add_seeder

    add_seeder(_seed_amis)


def _normalize_run_instances_mappings() -> None:
    # pcluster's launch-template validators call RunInstances(DryRun=True) with block device mappings
    # AWS accepts and moto rejects; see cfn_models.normalize_block_device_mappings.
    from moto.ec2.responses.instances import InstanceResponse

    original = InstanceResponse._parse_block_device_mapping
    if getattr(original, "_fmcluster", False):
        return

    def _parse_block_device_mapping(self):
        mappings = self._get_param("BlockDeviceMappings", [])
        if not mappings:
            return original(self)
        fixed = cfn_models.normalize_block_device_mappings(self.ec2_backend, self._get_param("ImageId"), mappings)
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


def _extend_cloudformation_stacks() -> None:
    from moto.cloudformation.models import Stack

    if getattr(Stack, "_fmcluster", False):
        return

    # ParallelCluster puts its queues in a nested stack and reads its outputs with
    # Fn::GetAtt [Nested, Outputs.<Name>]; moto's Stack model has no get_cfn_attribute.
    def get_cfn_attribute(self, attribute_name: str):
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        if attribute_name.startswith("Outputs."):
            output = self.output_map[attribute_name[len("Outputs.") :]]
            if output is not None:
                return output.value
        raise UnformattedGetAttTemplateException()

    # moto creates resources inside the CreateStack request: in Stack.__init__ and the backend's export
    # checks (resources the outputs reference) and in create_resources. An error there answered HTTP 500
    # and left no stack, or one whose lazy resource map retried the failed resource on every later
    # DescribeStacks (HTTP 500 again). AWS accepts the request and fails the stack instead, which is what
    # pcluster's describe_cluster and fmcluster's progress view expect to see.
    from moto.cloudformation import parsing
    from moto.cloudformation.models import CloudFormationBackend
    from moto.cloudformation.responses import CloudFormationResponse
    from moto.core.responses import EmptyResult
    from moto.core.utils import utcnow

    original_parse_and_create = parsing.parse_and_create_resource

    def parse_and_create_resource(logical_id, resource_json, resources_map, account_id, region_name):
        try:
            return original_parse_and_create(logical_id, resource_json, resources_map, account_id, region_name)
        except Exception as err:
            if _failed_resource(err) is None:  # innermost resource: the one that failed
                err._fmcluster_resource = (logical_id, resource_json.get("Type"))
            raise

    original_init = Stack.__init__

    def __init__(self, *args, **kwargs) -> None:
        try:
            original_init(self, *args, **kwargs)
        except Exception as err:
            if _failed_resource(err) is None or not hasattr(self, "resource_map"):
                raise  # a template or parameter error: AWS rejects the request too (ValidationError)
            self.output_map = parsing.OutputMap(self.resource_map, {}, self.stack_id)
            self.custom_resources = {}
            self.creation_time = utcnow()
            self.status = "CREATE_PENDING"
            self._fmcluster_failure = err  # create_resources fails the stack with it
        request = getattr(_request_context, "create_stack", None)
        self.on_failure = request[1] if request and request[0] == self.name else "ROLLBACK"
        self.disable_rollback = self.on_failure == "DO_NOTHING"

    original_backend_create = CloudFormationBackend.create_stack

    def backend_create_stack(self, name, *args, **kwargs):
        try:
            return original_backend_create(self, name, *args, **kwargs)
        except Exception as err:
            stack = next((st for st in self.stacks.values() if st.name == name), None)
            if _failed_resource(err) is None or stack is None or stack.status != "CREATE_PENDING":
                raise
            stack._add_stack_event("CREATE_IN_PROGRESS", resource_status_reason="User Initiated")
            stack.status = "CREATE_IN_PROGRESS"
            _fail_stack(stack, err)
            return stack

    original_create = Stack.create_resources

    def create_resources(self) -> None:
        failure = getattr(self, "_fmcluster_failure", None)
        if failure is not None:
            self.status = "CREATE_IN_PROGRESS"
            _fail_stack(self, failure)
            return
        try:
            original_create(self)
            if self.status == "CREATE_COMPLETE":
                _headnode_bootstrapped(self)
        except Exception as err:
            _fail_stack(self, err)

    # CreateStack's DisableRollback/OnFailure (moto ignores both): what a failed creation does next.
    original_create_stack = CloudFormationResponse.create_stack

    def create_stack(self):
        on_failure = self._get_param("OnFailure")
        if not on_failure:
            on_failure = "DO_NOTHING" if self._get_bool_param("DisableRollback", False) else "ROLLBACK"
        _request_context.create_stack = (self._get_param("StackName"), on_failure)
        try:
            return original_create_stack(self)
        finally:
            _request_context.create_stack = None

    # A failed stack's resource map must not create what it lacks on the next read (DescribeStacks,
    # DescribeStackResources): it holds what was created, as on AWS.
    original_getitem = parsing.ResourceMap.__getitem__
    original_iter = parsing.ResourceMap.__iter__

    def getitem(self, key):
        if getattr(self, "_fmcluster_frozen", False) and key not in self._parsed_resources:
            raise KeyError(key)
        return original_getitem(self, key)

    def iterate(self):
        if getattr(self, "_fmcluster_frozen", False):
            return iter([key for key in self.resources if key in self._parsed_resources])
        return original_iter(self)

    parsing.parse_and_create_resource = parse_and_create_resource
    parsing.ResourceMap.__getitem__ = getitem
    parsing.ResourceMap.__iter__ = iterate
    Stack.__init__ = __init__
    CloudFormationBackend.create_stack = backend_create_stack
    CloudFormationResponse.create_stack = create_stack

    # DeleteStack on AWS answers at once and the stack shows DELETE_IN_PROGRESS until its resources are
    # gone; pcluster's delete_cluster describes the stack right after DeleteStack and treats "does not
    # exist" as an error. moto deletes synchronously, so run the deletion shortly after the request.
    # Only the API call is deferred: nested stacks (deleted or replaced by their parent) go at once.
    def delete_stack(self):
        backend = self.cloudformation_backend
        name_or_id = self._get_param("StackName")
        stack = next((st for st in backend.stacks.values() if name_or_id in (st.stack_id, st.name)), None)
        if stack is None or stack.status == "DELETE_IN_PROGRESS":
            return EmptyResult()
        stack.status = "DELETE_IN_PROGRESS"

        def run() -> None:
            try:
                backend.delete_stack(stack.stack_id)
            except Exception as err:
                logger.warning("sandbox stack %s failed to delete: %r", stack.name, err)
                backend.stacks[stack.stack_id] = stack
                stack.status = "DELETE_FAILED"
                stack._add_stack_event("DELETE_FAILED", resource_status_reason=str(err))

        _later(run, STACK_DELETE_SECONDS)
        return EmptyResult()

    CloudFormationResponse.delete_stack = delete_stack
    Stack.get_cfn_attribute = get_cfn_attribute
    Stack.create_resources = create_resources
    Stack._fmcluster = True


def _failed_resource(err: BaseException) -> tuple[str, str] | None:
    """(logical id, type) of the template resource whose creation raised ``err``, if it was one."""
    return getattr(err, "_fmcluster_resource", None)


def _error_message(err: BaseException) -> str:
    return str(getattr(err, "message", None) or err or type(err).__name__)


def _fail_stack(stack, err: BaseException) -> None:
    """Fail a stack being created the way CloudFormation does, given what its CreateStack asked for."""
    from moto.cloudformation.models import Event
    from moto.cloudformation.parsing import OutputMap

    logger.warning("sandbox stack %s failed: %r", stack.name, err)
    failed = _failed_resource(err)
    if failed is not None:
        logical_id, resource_type = failed
        if isinstance(err, cfn_models.WaitConditionFailed):
            reason = str(err)
        else:
            reason = f'Resource handler returned message: "{_error_message(err)}"'
        event = Event(
            stack_id=stack.stack_id,
            stack_name=stack.name,
            logical_resource_id=logical_id,
            physical_resource_id=getattr(err, "physical_resource_id", "") or "",
            resource_type=resource_type,
            resource_status="CREATE_FAILED",
            resource_status_reason=reason,
            resource_properties=None,
        )
        stack.events.append(event)
        stack_reason = f"The following resource(s) failed to create: [{logical_id}]. "
    else:
        stack_reason = f"Stack creation failed: {_error_message(err)}. "
    # What failed is gone from the template's point of view: no outputs, no more lazy creation.
    stack.resource_map._fmcluster_frozen = True
    stack.output_map = OutputMap(stack.resource_map, {}, stack.stack_id)
    on_failure = getattr(stack, "on_failure", "ROLLBACK")
    if on_failure == "DO_NOTHING":
        stack.status = "CREATE_FAILED"
        stack.stack_status_reason = stack_reason
        stack._add_stack_event("CREATE_FAILED", resource_status_reason=stack_reason)
        return
    stack_reason += "Rollback requested by user."
    stack.status = "ROLLBACK_IN_PROGRESS"
    stack.stack_status_reason = stack_reason
    stack._add_stack_event("ROLLBACK_IN_PROGRESS", resource_status_reason=stack_reason)
    _later(lambda: _roll_back(stack, on_failure), STACK_ROLLBACK_SECONDS)


def _roll_back(stack, on_failure: str) -> None:
    """Delete what a failed creation made; then ROLLBACK_COMPLETE (and, for OnFailure=DELETE, delete)."""
    from moto.cloudformation.models import cloudformation_backends

    if stack.status != "ROLLBACK_IN_PROGRESS":  # deleted meanwhile
        return
    try:
        stack.resource_map.delete()
    except Exception as err:
        logger.warning("sandbox stack %s failed to roll back: %r", stack.name, err)
        stack.status = "ROLLBACK_FAILED"
        stack._add_stack_event("ROLLBACK_FAILED", resource_status_reason=_error_message(err))
        return
    stack.status = "ROLLBACK_COMPLETE"
    stack._add_stack_event("ROLLBACK_COMPLETE")
    if on_failure == "DELETE":
        cloudformation_backends[stack.account_id][stack.region_name].delete_stack(stack.stack_id)


def _stack_must_fail(stack_name: str) -> bool:
    forced = getattr(_faults, "forced_status", None)
    return forced is not None and forced(STACK_FAULT_KIND, stack_name) == "CREATE_FAILED"


def set_faults(faults) -> None:
    """Consult ``faults`` (the sandbox's Faults; None for none) for ParallelCluster stack faults."""
    global _faults
    _faults = faults
    cfn_models.set_head_node_failure_check(_stack_must_fail if faults is not None else None)


# The head node's clustermgtd moves the compute fleet from X_REQUESTED through X-ING to the final state
# within a minute or so; the sandbox's stand-in takes this many seconds per step.
FLEET_TRANSITION_SECONDS = 1.0
# How long a deleted stack stays DELETE_IN_PROGRESS before its resources are removed.
STACK_DELETE_SECONDS = 1.0
# How long a failed stack stays ROLLBACK_IN_PROGRESS before its resources are removed.
STACK_ROLLBACK_SECONDS = 1.0
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


def _headnode_bootstrapped(stack) -> None:
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


def _emulate_clustermgtd() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    original = DynamoDBBackend.update_item
    if getattr(original, "_fmcluster", False):
        return

    def advance(backend, table: str, requested: str) -> None:
        in_progress, final = _FLEET_TRANSITIONS[requested]
        if _set_fleet_status(backend, table, in_progress, expected=requested):
            if requested == "STOP_REQUESTED":
                cfn_models.terminate_compute_nodes(backend.account_id, backend.region_name, table.split("-", 1)[1])
            _later(lambda: _set_fleet_status(backend, table, final, expected=in_progress))

    def update_item(self, table_name, key, *args, **kwargs):
        item = original(self, table_name, key, *args, **kwargs)
        if table_name.startswith(_fleet_table("")) and key == _FLEET_KEY:
            status = item.attrs.get("Data")
            status = status.value.get("status").value if status is not None and status.type == "M" else None
            if status in _FLEET_TRANSITIONS:
                _later(lambda: advance(self, table_name, status))
        return item

    update_item._fmcluster = True
    DynamoDBBackend.update_item = update_item


def _later(action, delay: float | None = None) -> None:
    timer = threading.Timer(FLEET_TRANSITION_SECONDS if delay is None else delay, action)
    timer.daemon = True
    timer.start()


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

    ``faults`` (the sandbox's :class:`~fmcluster.sandbox.faults.Faults`) is consulted for
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
        _extend_cloudformation_stacks()
        _emulate_clustermgtd()
        _default_key_type()
        _installed = True
