"""CloudFormation stacks that behave like CloudFormation where moto's do not, for ParallelCluster's stack.

* a resource that cannot be created fails the stack (``CREATE_FAILED``, or ``ROLLBACK_IN_PROGRESS`` →
  ``ROLLBACK_COMPLETE`` as ``DisableRollback``/``OnFailure`` ask) with a ``CREATE_FAILED`` event for that
  resource, instead of an HTTP 500 and no stack;
* ``Fn::GetAtt [Nested, Outputs.<Name>]`` reads a nested stack's outputs;
* DeleteStack answers at once and the stack shows ``DELETE_IN_PROGRESS`` until its resources are gone.
"""

from __future__ import annotations

import logging
import threading

from fmcluster_sandbox import cfn_models

logger = logging.getLogger(__name__)
_request_context = threading.local()
# How long a deleted stack stays DELETE_IN_PROGRESS before its resources are removed.
STACK_DELETE_SECONDS = 1.0
# How long a failed stack stays ROLLBACK_IN_PROGRESS before its resources are removed.
STACK_ROLLBACK_SECONDS = 1.0


def later(action, delay: float) -> None:
    timer = threading.Timer(delay, action)
    timer.daemon = True
    timer.start()


def install() -> None:
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
                from fmcluster_sandbox.pcluster_fleet import headnode_bootstrapped

                headnode_bootstrapped(self)
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

        later(run, STACK_DELETE_SECONDS)
        return EmptyResult()

    CloudFormationResponse.delete_stack = delete_stack
    _gone_counts_as_deleted()
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
    later(lambda: _roll_back(stack, on_failure), STACK_ROLLBACK_SECONDS)


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


def _gone_counts_as_deleted() -> None:
    """A stack's resource that no longer exists is deleted, not a failure: CloudFormation treats a delete
    handler's NotFound as success (CloudFormation CLI, "Resource type handler contract": delete handlers).
    moto keeps the stale physical id of a resource its stack update replaced, and then fails the whole
    DeleteStack on it (for example InvalidGroup.NotFound)."""
    from moto.cloudformation.parsing import ResourceMap

    original = ResourceMap._delete_resource
    if getattr(original, "_fmcluster", False):
        return

    def _delete_resource(self, parsed_resource, resource_json):
        try:
            original(self, parsed_resource, resource_json)
        except Exception as err:  # moto's own error types, each with its AWS code
            code = str(getattr(err, "error_type", "") or getattr(err, "code", ""))
            if not (code.endswith("NotFound") or code in ("NoSuchEntity", "NoSuchBucket")):
                raise

    _delete_resource._fmcluster = True
    ResourceMap._delete_resource = _delete_resource
