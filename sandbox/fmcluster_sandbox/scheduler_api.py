"""EventBridge Scheduler's request rules, in front of moto's ``scheduler`` backend (which stores what passes).

moto 5.2.5 stores schedules and groups but checks little: it accepts any expression and target, answers a schedule
in a missing group with a 500, replaces an existing group on CreateScheduleGroup (losing its schedules) and drops
``ActionAfterCompletion`` on UpdateSchedule. Here, each request is first checked against botocore's model
(:mod:`fmcluster_sandbox.model_check`), then against the rules AWS documents:

* ``at(yyyy-mm-ddThh:mm:ss)`` one-time expressions, read in ``ScheduleExpressionTimezone`` (an IANA zone, default
  UTC): API reference, CreateSchedule ``ScheduleExpression``; user guide "Schedule types in EventBridge Scheduler";
* a universal target ``arn:aws:scheduler:::aws-sdk:<service>:<apiAction>`` may not name a read-only action (the
  prefixes below): user guide "Using universal targets", "Unsupported actions";
* a schedule's group must exist (``ResourceNotFoundException``), a group name is taken once (``ConflictException``):
  API reference CreateSchedule, CreateScheduleGroup.

Recurring ``rate()``/``cron()`` expressions are stored as AWS stores them, but the sandbox never runs them
(:mod:`fmcluster_sandbox.scheduler_runs` runs one-time schedules only).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import zoneinfo
from typing import Any
from urllib.parse import parse_qs, unquote

from fmcluster_sandbox import model_check

Answer = tuple[int, dict[str, str], bytes]

AT_EXPRESSION = re.compile(r"^at\((\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\)$")
UNIVERSAL_PREFIX = "arn:aws:scheduler:::aws-sdk:"
#: "EventBridge Scheduler does not support read-only API actions ... that begin with the following list of
#: prefixes" (user guide, "Using universal targets", Unsupported actions), as published.
READ_ONLY_PREFIXES = ("get", "describe", "list", "poll", "receive", "search", "scan", "query", "select", "read",
                      "lookup", "discover", "validate", "batchGet", "batchDescribe", "batchRead", "transactGet",
                      "adminGet", "adminList", "testMigration", "retrieve", "testConnection", "translateDocument",
                      "isAuthorized", "invokeModel")
_STATUS = {"ValidationException": 400, "ResourceNotFoundException": 404, "ConflictException": 409}


class SchedulerError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message

    def response(self) -> Answer:
        body = json.dumps({"Message": self.message}).encode()
        return _STATUS.get(self.code, 400), {"Content-Type": "application/json", "x-amzn-ErrorType": self.code}, body


def at_time(expression: str, timezone: str | None) -> _dt.datetime | None:
    """The UTC instant of a one-time expression, None for a recurring one; ValueError when malformed."""
    if not expression.startswith("at("):
        return None
    found = AT_EXPRESSION.match(expression)
    if not found:
        raise ValueError(f"Invalid Schedule Expression {expression}: expected at(yyyy-mm-ddThh:mm:ss)")
    try:
        # UTC needs no time zone database (a host without tzdata still reads the default zone)
        zone: _dt.tzinfo = _dt.timezone.utc if timezone in (None, "UTC") else zoneinfo.ZoneInfo(str(timezone))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"Invalid ScheduleExpressionTimezone {timezone}") from None
    try:
        year, month, day, hour, minute, second = (int(part) for part in found.groups())
        local = _dt.datetime(year, month, day, hour, minute, second, tzinfo=zone)
    except ValueError as exc:
        raise ValueError(f"Invalid Schedule Expression {expression}: {exc}") from None
    return local.astimezone(_dt.timezone.utc)


def universal_target(arn: str) -> tuple[str, str] | None:
    """``(service, apiAction)`` of a universal target ARN, None for any other target."""
    if not arn.startswith(UNIVERSAL_PREFIX):
        return None
    service, _, action = arn[len(UNIVERSAL_PREFIX):].partition(":")
    return service, action


def is_read_only(action: str) -> bool:
    # The prefixes are words of a lowerCamel name: "listTags" starts with "list", "listen…" would not.
    return any(action.startswith(prefix) and (len(action) == len(prefix) or not action[len(prefix)].islower())
               for prefix in READ_ONLY_PREFIXES)


def _check_schedule(document: dict[str, Any]) -> None:
    expression = document.get("ScheduleExpression", "")
    if not re.match(r"^(at|rate|cron)\(.*\)$", expression):
        raise SchedulerError("ValidationException", f"Invalid Schedule Expression {expression}.")
    try:
        at_time(expression, document.get("ScheduleExpressionTimezone"))
    except ValueError as exc:
        raise SchedulerError("ValidationException", str(exc)) from None
    zone = document.get("ScheduleExpressionTimezone")
    if zone and not expression.startswith("at("):
        try:
            zoneinfo.ZoneInfo(zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise SchedulerError("ValidationException", f"Invalid ScheduleExpressionTimezone {zone}") from None
    target = universal_target(document["Target"]["Arn"])
    if target is not None:
        service, action = target
        if not service or not action:
            raise SchedulerError("ValidationException", f"Invalid target ARN {document['Target']['Arn']}: expected "
                                 f"{UNIVERSAL_PREFIX}<service>:<apiAction>")
        if is_read_only(action):
            raise SchedulerError("ValidationException", f"Target {document['Target']['Arn']} is not supported: "
                                 "EventBridge Scheduler does not support read-only API actions as universal targets")


def _route(method: str, path: str) -> tuple[str, str | None] | None:
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if parts[0] == "schedules":
        names = {"POST": "CreateSchedule", "PUT": "UpdateSchedule", "GET": "GetSchedule", "DELETE": "DeleteSchedule"}
        return (names.get(method, ""), parts[1]) if len(parts) == 2 else ("ListSchedules", None)
    if parts[0] == "schedule-groups":
        names = {"POST": "CreateScheduleGroup", "GET": "GetScheduleGroup", "DELETE": "DeleteScheduleGroup"}
        return (names.get(method, ""), parts[1]) if len(parts) == 2 else ("ListScheduleGroups", None)
    return None


def handle(method: str, path: str, query: str, body: bytes, region: str, account: str) -> Answer | None:
    """An error answer for a request AWS would refuse, an answer the sandbox gives itself, or None: moto answers."""
    from moto.scheduler.models import scheduler_backends

    route = _route(method, path)
    if route is None or not route[0] or route[1] is None:
        return None
    operation, name = route[0], route[1]
    backend = scheduler_backends[account][region]
    group_name = parse_qs(query).get("groupName", [None])[0]
    try:
        if operation in ("CreateSchedule", "UpdateSchedule", "CreateScheduleGroup"):
            try:
                document = json.loads(body or b"{}")
            except ValueError as exc:
                raise SchedulerError("ValidationException", f"Cannot parse request body: {exc}") from None
            if not isinstance(document, dict):
                raise SchedulerError("ValidationException", "The request body must be a JSON object")
            document["Name"] = name
            problems = model_check.check("scheduler", operation, document)
            if problems:
                text = "; ".join(f"{field}: {message}" for field, message in problems)
                raise SchedulerError("ValidationException", f"{len(problems)} validation error(s) detected: {text}")
            if operation == "CreateScheduleGroup":
                if name in backend.schedule_groups:
                    raise SchedulerError("ConflictException", f"Schedule group {name} already exists.")
                return None
            _check_schedule(document)
            group_name = document.get("GroupName")
        if (group_name or "default") not in backend.schedule_groups:
            raise SchedulerError("ResourceNotFoundException", f"Schedule group {group_name} does not exist.")
        if operation == "DeleteScheduleGroup" and name not in backend.schedule_groups:
            raise SchedulerError("ResourceNotFoundException", f"Schedule group {name} does not exist.")
        if operation == "UpdateSchedule":
            return _update(backend, name, document)
    except SchedulerError as err:
        return err.response()
    return None


def _update(backend: Any, name: str, document: dict[str, Any]) -> Answer:
    """UpdateSchedule replaces every setting ("any values you do not specify are set to their defaults": API
    reference, UpdateSchedule), ActionAfterCompletion included, which moto keeps from before."""
    from moto.scheduler.exceptions import ScheduleNotFound

    try:
        schedule = backend.update_schedule(
            description=document.get("Description"), end_date=document.get("EndDate"),
            flexible_time_window=document["FlexibleTimeWindow"], group_name=document.get("GroupName"),
            kms_key_arn=document.get("KmsKeyArn"), name=name, schedule_expression=document["ScheduleExpression"],
            schedule_expression_timezone=document.get("ScheduleExpressionTimezone"),
            start_date=document.get("StartDate"), state=document.get("State") or "ENABLED",
            target=document["Target"])
    except ScheduleNotFound:
        return SchedulerError("ResourceNotFoundException", f"Schedule {name} does not exist.").response()
    schedule.action_after_completion = document.get("ActionAfterCompletion") or "NONE"
    return 200, {"Content-Type": "application/json"}, json.dumps({"ScheduleArn": schedule.arn}).encode()
