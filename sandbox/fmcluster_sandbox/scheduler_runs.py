"""One-time schedules that come due on the sandbox clock call their universal target as their execution role.

When sandbox time (:mod:`fmcluster_sandbox.clock`) reaches an ENABLED schedule's ``at()`` time, the schedule runs
once: its target ``arn:aws:scheduler:::aws-sdk:<service>:<apiAction>`` is mapped to botocore's service and
operation, its ``Input`` is checked against that operation's input shape, its ``RoleArn`` must exist and trust
``scheduler.amazonaws.com``, the role's identity policies (inline and attached) must allow ``<prefix>:<Operation>``
on the ARN of the resource the call acts on (Service Authorization Reference), and then the sandbox makes the call
into itself with the role's credentials. A refused or failed run changes nothing. With ActionAfterCompletion DELETE
the schedule is deleted after it runs, whatever the outcome.

Differences from AWS, on purpose: a run happens at the ``at()`` time itself (AWS: within that minute, or within a
FLEXIBLE window after it); a failed run is not retried (AWS retries per RetryPolicy, then sends to the DLQ); AWS
shows runs only as CloudWatch metrics and DLQ messages, the sandbox lists them at ``GET /_fmcluster/schedule-runs``.
StartDate and EndDate are not consulted: "EventBridge Scheduler ignores StartDate/EndDate for one-time schedules"
(API reference, CreateSchedule).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

from fmcluster_sandbox import iam_eval, model_check, scheduler_api
from fmcluster_sandbox.clock import SandboxClock

SCHEDULER_PRINCIPAL = "scheduler.amazonaws.com"


def botocore_operation(service_id: str, api_action: str) -> tuple[str, str] | None:
    """The botocore (service, Operation) a universal target names. The ARN's service is "the AWS SDK service
    identifier" (``cognitoidentityprovider``, not ``cognito-idp``: "Using universal targets"); actions are
    lowerCamel (``getQueueURL`` for GetQueueUrl), matched without case."""
    import botocore.session

    session = botocore.session.get_session()
    names = session.get_available_services()
    service = service_id if service_id in names else next(
        (n for n in names if n.replace("-", "") == service_id.lower()), None)
    if service is None:
        return None
    operations = {op.lower(): op for op in model_check.service_model(service).operation_names}
    found = operations.get(api_action.lower())
    return (service, found) if found else None


class Runs:
    """Runs due schedules and remembers what ran (``GET /_fmcluster/schedule-runs``)."""

    def __init__(self, clock: SandboxClock, endpoint: Callable[[], str | None], ca_bundle: Callable[[], str | None]):
        self.clock = clock
        self._endpoint, self._ca_bundle = endpoint, ca_bundle
        self._lock = threading.Lock()
        self._fired: set[tuple[str, str, str, Any]] = set()
        self.records: list[dict[str, Any]] = []

    def reset(self) -> None:
        with self._lock:
            self._fired.clear()
            self.records.clear()

    # -- finding due schedules ---------------------------------------------------------------------
    def run_due(self) -> list[dict[str, Any]]:
        """Run every schedule due at the current sandbox time that has not run; return the new records."""
        from moto.scheduler.models import scheduler_backends

        now = self.clock.now()
        with self._lock:
            new: list[dict[str, Any]] = []
            for account, regions in list(scheduler_backends.items()):
                for region, backend in list(regions.items()):
                    for group in list(backend.schedule_groups.values()):
                        for schedule in list(group.schedules.values()):
                            key = (schedule.arn, schedule.schedule_expression,
                                   schedule.schedule_expression_timezone, schedule.creation_date)
                            if key in self._fired or schedule.state != "ENABLED":
                                continue
                            try:
                                due = scheduler_api.at_time(schedule.schedule_expression,
                                                            schedule.schedule_expression_timezone)
                            except ValueError:
                                continue
                            if due is None or due > now:
                                continue
                            self._fired.add(key)
                            record = self._run(schedule, account, region, due)
                            new.append(record)
                            self.records.append(record)
                            if schedule.action_after_completion == "DELETE":
                                group.schedules.pop(schedule.name, None)
            return new

    # -- one run ------------------------------------------------------------------------------------
    def _run(self, schedule: Any, account: str, region: str, due: Any) -> dict[str, Any]:
        target = schedule.target or {}
        record: dict[str, Any] = {
            "schedule": schedule.name, "group": schedule.group_name,
            "at": due.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "fired_at": self.clock.now().isoformat(timespec="seconds").replace("+00:00", "Z"),
            "target": target.get("Arn"), "outcome": "failed", "message": ""}
        try:
            record["outcome"], record["message"] = self._invoke(schedule, target, account, region)
        except Exception as exc:  # noqa: BLE001 - a run that breaks is a failed run, never a dead sandbox
            record["message"] = f"{type(exc).__name__}: {exc}"
        return record

    def _invoke(self, schedule: Any, target: dict[str, Any], account: str, region: str) -> tuple[str, str]:
        universal = scheduler_api.universal_target(target.get("Arn", ""))
        if universal is None:
            return "failed", "the sandbox runs universal targets (arn:aws:scheduler:::aws-sdk:...) only"
        resolved = botocore_operation(*universal)
        if resolved is None:
            return "failed", f"no AWS SDK operation {universal[1]} in service {universal[0]}"
        service, operation = resolved
        try:
            params = json.loads(target.get("Input") or "{}")
        except ValueError as exc:
            return "failed", f"Input is not JSON: {exc}"
        problems = model_check.check(service, operation, params)
        if problems:
            return "failed", "Input does not match " + operation + ": " + "; ".join(f"{f}: {m}" for f, m in problems)
        role = _role(account, target.get("RoleArn", ""))
        if role is None:
            return "failed", f"execution role {target.get('RoleArn')} does not exist"
        source = {"aws:SourceAccount": account, "aws:SourceArn": schedule.arn}
        if not iam_eval.trusts_service(role.assume_role_policy_document, SCHEDULER_PRINCIPAL, source):
            return "failed", f"role {role.arn} does not trust {SCHEDULER_PRINCIPAL} to assume it"
        client = self._client(service, region, role.arn)
        from fmcluster_sandbox.scheduler_targets import resource_of

        resource, tags = resource_of(client, service, operation, params)
        action = f"{_iam_prefix(service)}:{operation}"
        context = {f"aws:ResourceTag/{k}": v for k, v in tags.items()}
        context.update({"aws:PrincipalAccount": account, "aws:RequestedRegion": region})
        allowed, why = iam_eval.evaluate(_identity_policies(role), action, resource, context)
        if not allowed:
            return "denied", f"AccessDeniedException: {role.arn} is not authorized to perform {action} on " \
                             f"{resource}: {why}"
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            client._make_api_call(operation, params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            return "failed", f"{error.get('Code')}: {error.get('Message')}"
        except BotoCoreError as exc:
            return "failed", str(exc)
        return "succeeded", f"{action} on {resource}"

    def _client(self, service: str, region: str, role_arn: str) -> Any:
        import boto3
        from botocore.config import Config

        endpoint = self._endpoint()
        if not endpoint:
            raise RuntimeError("the sandbox is not serving: no endpoint to call")
        session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                        region_name=region)
        verify: Any = self._ca_bundle() or False
        credentials = session.client("sts", endpoint_url=endpoint, verify=verify).assume_role(
            RoleArn=role_arn, RoleSessionName=f"scheduler-{uuid.uuid4().hex[:12]}")["Credentials"]
        return session.client(service, endpoint_url=endpoint, verify=verify, region_name=region,
                              aws_access_key_id=credentials["AccessKeyId"],
                              aws_secret_access_key=credentials["SecretAccessKey"],
                              aws_session_token=credentials["SessionToken"],
                              config=Config(retries={"mode": "standard", "max_attempts": 1}))


def _iam_prefix(service: str) -> str:
    metadata = model_check.service_model(service).metadata
    return str(metadata.get("signingName") or metadata.get("endpointPrefix") or service)


def _role(account: str, role_arn: str) -> Any:
    from moto.iam.models import iam_backends

    try:
        return iam_backends[account]["aws"].get_role_by_arn(role_arn)
    except Exception:  # noqa: BLE001 - moto's IAMNotFoundException and friends
        return None


def _identity_policies(role: Any) -> list[Any]:
    """The role's inline policies and the default version of each attached managed policy."""
    documents: list[Any] = list(role.policies.values())
    for policy in role.managed_policies.values():
        default = next((v for v in policy.versions if v.is_default), None)
        documents.append(default.document if default is not None else getattr(policy, "document", "{}"))
    return documents


class Ticker:
    """Runs due schedules as real time passes (the clock POST runs them at once)."""

    def __init__(self, runs: Runs, interval: float = 2.0):
        self.runs, self.interval = runs, interval
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._loop, name="scheduler-tick", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.runs.run_due()
            except Exception as exc:  # noqa: BLE001 - the tick must outlive one bad pass
                import sys

                print(f"fmcluster sandbox: scheduler tick failed: {exc!r}", file=sys.stderr)


def control(runs: Runs, method: str, path: str, payload: dict[str, Any]) -> tuple[int, Any] | None:
    """The clock and schedule-run control routes (see the server's docstring); None for any other path."""
    if path == "/_fmcluster/clock":
        if method == "POST":
            if payload.get("reset"):
                runs.clock.reset()
            else:
                runs.clock.advance(payload.get("advance_seconds", 0))
            ran = runs.run_due()  # synchronously: the caller sees every effect once the POST returns
            return 200, {**runs.clock.to_json(), "ran": ran}
        return 200, runs.clock.to_json()
    if path == "/_fmcluster/schedule-runs" and method == "GET":
        return 200, list(runs.records)
    return None
