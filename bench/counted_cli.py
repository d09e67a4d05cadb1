"""Run the fmcluster CLI in this process and, at exit, write what it asked of AWS to a JSON file.

    python bench/counted_cli.py OUT.json fmcluster-args...

Nothing is added to fmcluster: this wrapper replaces ``fmcluster.connection.aws._count_call`` (the handler each new
boto3 session registers for ``before-call``) with one that also records a timestamp, and registers three
more botocore handlers on every session it creates: ``before-send`` (every HTTP attempt, retries included),
``needs-retry`` (to count throttling answers) and ``before-parameter-build`` (each call's parameters, kept when
the call is made: a presigned URL, such as an EKS token, builds parameters and makes no call); it also
records every engine event the progress view gets (same monotonic clock). ParallelCluster's Python API makes
its own clients on boto3's default session, which fmcluster's counter does not see: the calls made there are
counted apart (``pcluster_api_calls``, ``pcluster_params``). The file holds::

    {"api_calls": {"service.Op": n}, "calls": [[t, "service.Op"]], "attempts": [[t, "service.Op"]],
     "params": [["service.Op", {its parameters}]] (each call's, in call order: which resource it read),
     "pcluster_api_calls": {"service.Op": n}, "pcluster_params": [...] (the calls ParallelCluster's clients made),
     "events": [[t, resource, kind, status]], "throttled": n, "t0": monotonic at start,
     "error_answers": n (4xx/5xx answers seen, a 404 on a read included),
     "graph": {resource: [what it depends on]} (each ``Engine.apply`` walk's resources)}
"""

from __future__ import annotations

import atexit
import json
import sys
import threading
import time

THROTTLE_CODES = {"Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
                  "TooManyRequestsException", "RequestThrottled", "SlowDown", "RequestThrottledException"}


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    from fmcluster.connection import aws

    lock = threading.Lock()
    record: dict = {"calls": [], "params": [], "pcluster_params": [], "attempts": [], "events": [], "throttled": 0,
                    "error_answers": 0, "t0": time.monotonic()}
    original_count = aws._count_call
    original_session = aws.session

    building = threading.local()  # the parameters of the call this thread is about to make

    def made(model, into: str) -> None:
        name = f"{model.service_model.service_name}.{model.name}"
        params = getattr(building, "params", None)
        with lock:
            record[into].append([name, params[1] if params is not None and params[0] == name else None])
        building.params = None

    def count_call(model=None, **kwargs):
        original_count(model=model, **kwargs)
        if model is not None:
            with lock:
                record["calls"].append([time.monotonic(), f"{model.service_model.service_name}.{model.name}"])
            made(model, "params")

    def before_send(request=None, event_name="", **_):
        parts = event_name.split(".")
        with lock:
            record["attempts"].append([time.monotonic(), ".".join(parts[1:3])])

    def needs_retry(response=None, **_):
        if response is None:
            return None
        parsed = response[1] if isinstance(response, tuple) and len(response) > 1 else {}
        code = (parsed or {}).get("Error", {}).get("Code", "")
        with lock:
            if code in THROTTLE_CODES:
                record["throttled"] += 1
            http = response[0] if isinstance(response, tuple) else None
            if http is not None and getattr(http, "status_code", 200) >= 400:
                record["error_answers"] += 1
        return None

    def parameters(params=None, model=None, **_):
        if model is not None:
            building.params = (f"{model.service_model.service_name}.{model.name}", dict(params or {}))

    registered: set[int] = set()

    def session(region):
        new = original_session(region)
        with lock:
            if id(new) not in registered:
                registered.add(id(new))
                new.events.register("before-send.*.*", before_send)
                new.events.register("needs-retry.*.*", needs_retry)
                new.events.register("before-parameter-build.*.*", parameters)
        return new

    aws._count_call = count_call
    aws.session = session

    import boto3

    pcluster_calls: dict[str, int] = {}
    record["pcluster_api_calls"] = pcluster_calls
    original_default = boto3.setup_default_session

    def count_pcluster_call(model=None, **_):
        if model is not None:
            name = f"{model.service_model.service_name}.{model.name}"
            with lock:
                pcluster_calls[name] = pcluster_calls.get(name, 0) + 1
            made(model, "pcluster_params")

    def setup_default_session(**kwargs):
        original_default(**kwargs)
        default = boto3.DEFAULT_SESSION.events
        default.register("before-call.*.*", count_pcluster_call)
        default.register("before-parameter-build.*.*", parameters)

    boto3.setup_default_session = setup_default_session

    from fmcluster.engine import walk as engine
    from fmcluster.output import progress

    original_apply = engine.Engine.apply

    def apply(self, resources, *args, **kwargs):
        # the dependency graph the engine walks (the printed plan does not show it)
        with lock:
            record.setdefault("graph", {}).update({r.name: list(r.depends_on) for r in resources})
        return original_apply(self, resources, *args, **kwargs)

    engine.Engine.apply = apply

    original_handle = progress.ProgressView.handle

    def handle(self, event):
        with lock:
            record["events"].append([event.at, event.resource, event.kind, event.status])
        return original_handle(self, event)

    progress.ProgressView.handle = handle

    def dump() -> None:
        with lock:
            data = {**record, "api_calls": dict(aws.api_calls)}
        with open(out, "w") as fh:
            json.dump(data, fh, default=str)

    atexit.register(dump)
    sys.argv = ["fmcluster", *args]
    from fmcluster.cli.app import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
