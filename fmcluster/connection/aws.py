"""One boto3 session per command, pointed at AWS or at the sandbox, with an API-call counter.

ParallelCluster's Python API builds its own boto3 clients from the environment, so the target is also
exported to the process environment (``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ``AWS_DEFAULT_REGION``).
"""

from __future__ import annotations

import collections
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from fmcluster.connection.regions import region_problem
from fmcluster.errors import AwsError, UsageError

_lock = threading.Lock()
_making = threading.Lock()  # held while a client is made (client)
api_calls: collections.Counter[str] = collections.Counter()

# Called as listener(operation, error_code, next_attempt, max_attempts) when botocore is about to retry a
# throttled call; a progress view subscribes so that a long backoff is not silence.
RetryListener = Callable[[str, str, int, "int | None"], None]
_retry_listeners: list[RetryListener] = []
# botocore/retries/standard.py ThrottledRetryableChecker._THROTTLED_ERROR_CODES (the codes it retries as throttling)
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
    "TooManyRequestsException", "ProvisionedThroughputExceededException", "TransactionInProgressException",
    "RequestLimitExceeded", "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled", "SlowDown",
    "PriorRequestNotComplete", "EC2ThrottledException",
})


@dataclass(frozen=True)
class Target:
    profile: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    # --sandbox: when the local sandbox serving this command started (its port and its state change with
    # every start, so a cluster record keeps this, not the URL).
    sandbox: str = ""


_target = Target()
_sessions: dict[str | None, Any] = {}
# Clients by (region, service, patience), made once per command: making one loads the service's model (EC2's is
# megabytes of JSON) and opens its own connections, and botocore's clients are safe to share between threads.
_clients: dict[tuple[str, str, Patience], Any] = {}
_ca_bundle_checked = False


def configure(profile: str | None, region: str | None, endpoint_url: str | None, sandbox: str = "") -> Target:
    """Set where every AWS call of this command goes."""
    global _target
    endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
    if endpoint_url and urlparse(endpoint_url).scheme not in ("http", "https"):
        raise UsageError(f"--endpoint-url {endpoint_url!r} is not an http(s) URL")
    if region is not None:
        problem = region_problem(region)
        if problem:
            raise UsageError(f"--region {region}: {problem}")
    _target = Target(profile=profile, region=region, endpoint_url=endpoint_url, sandbox=sandbox)
    if endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = endpoint_url
    if profile:
        os.environ["AWS_PROFILE"] = profile
    _sessions.clear()
    _clients.clear()
    return _target


def target() -> Target:
    return _target


def target_label() -> str:
    """Where this command's calls go, as a cluster record keeps it: "sandbox:<started>", an endpoint URL, or
    "aws"."""
    if _target.sandbox:
        return f"sandbox:{_target.sandbox}"
    return _target.endpoint_url or "aws"


def command_hint(command: str, where: str) -> str:
    """``fmcluster …`` with ``--sandbox`` when ``where`` (a record's :func:`target_label`) is the sandbox. An
    endpoint URL is left to the environment it came from (AWS_ENDPOINT_URL), which the user's shell keeps."""
    if where.startswith("sandbox:"):
        return f"fmcluster --sandbox {command.removeprefix('fmcluster ')}"
    return command


def region_for(spec_region: str | None) -> str:
    """--region beats the spec, which beats the environment."""
    return _target.region or spec_region or os.environ.get("AWS_REGION") or os.environ.get(
        "AWS_DEFAULT_REGION") or "us-east-1"


def check_ca_bundle() -> None:
    """Refuse an ``AWS_CA_BUNDLE`` that names no file, once per process, before the first AWS call: botocore
    would fail every HTTPS call later with a TLS error that does not name the variable."""
    global _ca_bundle_checked
    if _ca_bundle_checked:
        return
    path = os.environ.get("AWS_CA_BUNDLE")
    if path and not os.path.isfile(path):
        raise UsageError(f"AWS_CA_BUNDLE names {path}, which is not a file: point it at a CA bundle, or unset it")
    _ca_bundle_checked = True


def session(region: str) -> Any:
    import boto3

    check_ca_bundle()
    with _lock:
        if region not in _sessions:
            new = boto3.Session(profile_name=_target.profile, region_name=region)
            new.events.register("before-call.*.*", _count_call)
            new.events.register("needs-retry", _note_throttled_retry)
            _sessions[region] = new
        return _sessions[region]


@dataclass(frozen=True)
class Patience:
    """How long one AWS call may take before fmcluster gives up on it: botocore's retries (after the first
    attempt) and its connect and read timeouts.

    ``unanswered_retries`` bounds the retries of an attempt that got no answer at all (see
    :class:`GiveUpUnanswered`) below ``retries``, which then bounds only the answers that ask to retry
    (throttling, a 5xx): a dead endpoint and a busy one are different failures."""

    name: str
    retries: int
    connect_timeout: float
    read_timeout: float
    unanswered_retries: int | None = None

    def config(self) -> Any:
        from botocore.config import Config

        return Config(retries={"mode": "adaptive", "max_attempts": self.retries}, user_agent_extra="fmcluster",
                      connect_timeout=self.connect_timeout, read_timeout=self.read_timeout)

    def limit(self, events: Any) -> None:
        """Apply ``unanswered_retries`` to the calls of ``events``: a client's event emitter, or a botocore
        session's (the clients it makes from now on copy its handlers)."""
        if self.unanswered_retries is not None:
            events.register_first("needs-retry.*.*", GiveUpUnanswered(self.unanswered_retries),
                                  unique_id=GiveUpUnanswered.unique_id)


class GiveUpUnanswered:
    """botocore ``needs-retry`` handler: no more than ``retries`` retries of an attempt that got no answer.

    botocore's standard and adaptive modes retry everything transient up to one ``max_attempts``: a throttled
    answer and a refused connection alike. A read must wait out throttling (a large account is throttled every
    day, and a status that fails there is worse than a slow one) but must say within seconds that nothing
    answers. So the reads keep a high ``max_attempts`` with the adaptive back-off, and this handler stops the
    retries of an attempt that did not reach a live endpoint: botocore's ``ConnectionError`` family (connection
    refused, DNS failure, connect timeout, TLS or proxy failure: ``EndpointConnectionError``,
    ``ConnectTimeoutError``, …) and ``ReadTimeoutError`` (connected, and nothing said within the read timeout).
    Throttling, 5xx answers and a connection closed mid-answer stay botocore's to retry.

    Registered on ``needs-retry.*.*``: botocore's own retry handler sits on ``needs-retry.<service>``
    (``unique_id`` ``retry-config-<service>``, botocore/retries/standard.py), and the emitter calls the more
    specific event's handlers first, so this one answers first; ``_needs_retry`` in botocore/endpoint.py takes
    the first answer that is not None, and ``False`` there means "do not retry" (botocore 1.44.8, the floor,
    and later). botocore's handler still runs, so its retry quota and the adaptive rate limiter see the failure
    as they would have."""

    unique_id = "fmcluster-give-up-unanswered"

    def __init__(self, retries: int):
        self.retries = retries

    def __call__(self, attempts: int | None = None, caught_exception: BaseException | None = None,
                 **_: Any) -> bool | None:
        from botocore.exceptions import ConnectionError as NotConnected
        from botocore.exceptions import ReadTimeoutError

        if attempts is not None and attempts > self.retries and isinstance(caught_exception,
                                                                             (NotConnected, ReadTimeoutError)):
            return False  # attempts counts the one just made: `retries` retries are done
        return None


# create / scale / destroy: a write worth finishing rides out a slow or throttling endpoint.
WRITING = Patience("writing", retries=10, connect_timeout=10, read_timeout=60)
# status / logs / ssh / list, and lookups that are only a courtesy: a person is waiting on the answer.
# Throttling is waited out with the adaptive back-off (10 attempts: a call throttled at 20 % fails all of
# them with p = 0.2**10 ≈ 1e-7, so a status of a few hundred calls survives a sustained 20 % throttle);
# a dead endpoint is said within seconds (two attempts, a 2 s connect), not after a minute of retries.
READING = Patience("reading", retries=9, connect_timeout=2, read_timeout=20, unanswered_retries=1)

_patience = WRITING


@contextmanager
def read_only() -> Iterator[None]:
    """Every AWS call inside, fmcluster's and ParallelCluster's own clients alike, uses :data:`READING`."""
    global _patience
    previous = _patience
    _patience = READING
    _give_default_clients(READING)
    try:
        yield
    finally:
        _patience = previous
        _give_default_clients(previous)  # writers after us need clients with their own patience


def patient_default_clients() -> None:
    """Give the clients boto3's default session makes (a backend's own library, ParallelCluster's Python API, makes
    its clients there) the command's patience, before it makes them. Without it, a write's calls through that library
    would get botocore's defaults (3 attempts in its standard mode) and a create's config validation would fail under
    a throttle that fmcluster's own calls ride out ("Invalid cluster configuration: Request limit exceeded")."""
    with _lock:  # the engine's workers may each be the first to call the library
        if _default_patience is not _patience:
            _give_default_clients(_patience)


# How to drop the clients a backend's own library made from boto3's default session and keeps (by the backend's
# name; registered by the registry): called whenever their config changes, so the next ones get the new one.
_default_client_keepers: dict[str, Callable[[], None]] = {}


def keep_default_clients(name: str, forget: Callable[[], None]) -> None:
    """Call ``forget`` whenever the config of the clients boto3's default session makes changes."""
    _default_client_keepers[name] = forget


def stop_keeping_default_clients(name: str) -> None:
    _default_client_keepers.pop(name, None)


_default_patience: Patience | None = None  # what boto3's default session gives its clients (None: botocore's)


def _give_default_clients(patience: Patience) -> None:
    global _default_patience
    default = _default_botocore_session()
    default.set_default_client_config(patience.config())
    events = default.get_component("event_emitter")
    events.unregister("needs-retry.*.*", unique_id=GiveUpUnanswered.unique_id)
    patience.limit(events)
    _default_patience = patience
    for forget in list(_default_client_keepers.values()):  # their kept clients carry the previous config
        forget()


def _default_botocore_session() -> Any:
    """The session behind ``boto3.client(...)``, which a backend's own library (ParallelCluster's Python API) uses for
    its clients."""
    import boto3

    return boto3._get_default_session()._session


def client(service: str, region: str, patience: Patience | None = None) -> Any:
    """A client for ``service`` with ``patience`` (by default the command's: :data:`READING` inside
    :func:`read_only`, else :data:`WRITING`)."""
    patience = patience or _patience
    key = (region, service, patience)
    made = _clients.get(key)
    if made is None:
        # One client made at a time: "Session objects are not thread safe" (boto3 guide, Session), and making
        # clients of one Session at once from threads raises KeyError in botocore (boto/boto3#801, #1592); the
        # reads of one command make their first clients side by side. Made clients are safe to share.
        with _making:
            made = _clients.get(key)
            if made is None:
                made = session(region).client(service, endpoint_url=_target.endpoint_url, config=patience.config())
                patience.limit(made.meta.events)
                with _lock:
                    _clients[key] = made
    return made


def _count_call(model: Any = None, **_: Any) -> None:
    if model is not None:
        with _lock:
            api_calls[f"{model.service_model.service_name}.{model.name}"] += 1


def on_throttled_retry(listener: RetryListener) -> Callable[[], None]:
    """Call ``listener`` whenever a throttled call is about to be retried; returns the unsubscribe function."""
    with _lock:
        _retry_listeners.append(listener)

    def unsubscribe() -> None:
        with _lock:
            if listener in _retry_listeners:
                _retry_listeners.remove(listener)

    return unsubscribe


def _note_throttled_retry(response: Any = None, attempts: int | None = None, operation: Any = None,
                          request_dict: dict | None = None, **_: Any) -> None:
    """botocore's ``needs-retry`` event, observed only: always returns None, so botocore's own retry handler
    alone decides (its first non-None answer is the delay). A throttled answer with attempts left is retried
    by botocore's standard and adaptive modes."""
    with _lock:
        listeners = list(_retry_listeners)
    if not listeners or not response or attempts is None or operation is None:
        return None
    error = (response[1] or {}).get("Error", {}) if len(response) > 1 and isinstance(response[1], dict) else {}
    code = error.get("Code")
    if code not in THROTTLING_CODES:
        return None
    maximum = ((request_dict or {}).get("context") or {}).get("retries", {}).get("max")
    if maximum is not None and attempts >= maximum:
        return None  # botocore gives up: the error itself reaches the command
    name = f"{operation.service_model.service_name}.{operation.name}"
    for listener in listeners:
        try:
            listener(name, code, attempts + 1, maximum)
        except Exception:  # noqa: BLE001 - showing progress must never break an AWS call
            pass
    return None


def has_credentials(region: str) -> bool:
    check_ca_bundle()  # a usage error, not "no credentials"
    try:
        return session(region).get_credentials() is not None
    except Exception:  # a broken profile counts as no credentials here; the real call will explain
        return False


def describe_error(resource: str, exc: BaseException, hint: str = "") -> AwsError:
    """Turn a botocore exception into one clear :class:`AwsError`."""
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "Unknown")
        message = error.get("Message", str(exc))
        return AwsError(resource, code, message, hint or _hint_for(code))
    if isinstance(exc, BotoCoreError):
        return unreachable(resource, str(exc)) or AwsError(resource, type(exc).__name__, str(exc),
                                                           hint or _hint_for(type(exc).__name__))
    return AwsError(resource, type(exc).__name__, str(exc), hint)


class Unreachable(AwsError):
    """Nothing answered at the endpoint: one line naming it and what to check."""

    def __str__(self) -> str:
        return f"{self.resource}: {self.aws_message}; {self.hint}"


# botocore's EndpointConnectionError, ConnectTimeoutError and ReadTimeoutError, as ParallelCluster passes on
# their text alone.
_UNREACHABLE = re.compile(r'(?:Could not connect to the endpoint URL|Connect timeout on endpoint URL|'
                          r'Read timeout on endpoint URL): "(?P<url>[^"]*)"')


def unreachable(resource: str, text: str) -> Unreachable | None:
    """An :class:`Unreachable` when ``text`` is botocore's "could not connect" or timeout message, else None."""
    found = _UNREACHABLE.search(text)
    if found is None:
        return None
    parsed = urlparse(found.group("url"))
    endpoint = f"{parsed.scheme}://{parsed.netloc}" if parsed.netloc else found.group("url")
    timed_out = "timeout" in found.group(0).lower()
    message = f"{endpoint} {'did not answer in time' if timed_out else 'is unreachable'}"
    return Unreachable(resource, "Timeout" if timed_out else "EndpointConnectionError", message,
                       _reach_hint())


def _reach_hint() -> str:
    """What to check, for where this command's calls go."""
    if _target.sandbox:
        return "the local sandbox is not answering: `fmcluster sandbox start`, then re-run"
    if _target.endpoint_url:
        host = urlparse(_target.endpoint_url).hostname or ""
        local = host in ("127.0.0.1", "localhost", "::1")
        return ("check --endpoint-url / AWS_ENDPOINT_URL" +
                (", or start the local sandbox with `fmcluster sandbox start`" if local else ""))
    return "check the network connection to AWS (proxy, VPN, firewall)"


_HINTS = {
    "NoCredentialsError": "configure credentials (aws configure, AWS_PROFILE) or use --sandbox for the local sandbox",
    "UnauthorizedOperation": "the credentials lack this permission; ask your AWS admin for it",
    "AccessDeniedException": "the credentials lack this permission; ask your AWS admin for it",
    "InsufficientInstanceCapacity": "AWS has no capacity for this type in this AZ now: try another AZ, retry "
                                    "later, or reserve capacity with an EC2 Capacity Block",
    "ServiceQuotaExceededException": "request a quota increase in the Service Quotas console, or wait for the "
                                     "other operation to finish",
    "ThrottlingException": "AWS is rate-limiting this account; re-run the same command to resume",
    "RequestLimitExceeded": "AWS is rate-limiting this account; re-run the same command to resume",
}


def _hint_for(code: str) -> str:
    return _HINTS.get(code, "")
