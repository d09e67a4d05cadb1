"""Reaching one EKS cluster's Kubernetes API: where it is (DescribeCluster), how to trust it (the cluster's own CA),
how to authenticate (a fresh EKS token per minute), and what its API serves (discovery), with the API's refusals
turned into fmcluster errors.

Every request goes through :class:`_EksTransport`, which adds the bearer token and asks for strict field validation
on writes (the API server's own default is ``Warn``: an unknown field would be dropped with a warning, and
fmcluster's manifests would silently not be what it applied).
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2
from botocore.exceptions import ClientError
from lightkube import ApiError, Client, KubeConfig
from lightkube.config.models import Cluster, User
from lightkube.generic_resource import GenericGlobalResource, GenericNamespacedResource, create_api_info

from fmcluster.aws.ec2 import error_code
from fmcluster.backends.eks.kubernetes.token import TOKEN_LIFETIME_SECONDS, eks_token
from fmcluster.connection.aws import describe_error
from fmcluster.engine import Context, reads
from fmcluster.errors import FmclusterError

# A token is good for TOKEN_LIFETIME_SECONDS from when it was signed: make a new one well before, so a request
# sent at the edge (or a clock a few seconds off) is not refused.
REFRESH_AFTER_SECONDS = TOKEN_LIFETIME_SECONDS - 10
# Attempts to connect again after the first fails (httpcore waits 0 s, 0.5 s, 1 s before them).
CONNECT_RETRIES = 3
# What a cluster must be for its Kubernetes API to answer (DescribeCluster status).
SERVING = ("ACTIVE", "UPDATING")
_WRITES = ("POST", "PUT", "PATCH")
T = TypeVar("T")


class KubeApiError(FmclusterError):
    """The Kubernetes API refused a request: names the object, the HTTP status, the API's reason and message."""

    exit_code = 1

    def __init__(self, what: str, code: int, reason: str, message: str, hint: str = ""):
        self.what, self.code, self.reason, self.api_message, self.hint = what, code, reason, message, hint
        text = f"{what}: the Kubernetes API said {code} {reason}: {message}"
        if hint:
            text += f"\n  → {hint}"
        super().__init__(text)


class _EksTransport(httpx2.BaseTransport):
    """HTTPS to the cluster's endpoint, trusting only the cluster's CA, with a bearer token made when the last one
    is near its end (awscli's ``eks get-token`` makes one per kubectl call; here one serves about 50 s of calls)."""

    def __init__(self, cluster: str, region: str, ca_pem: str):
        self._cluster, self._region = cluster, region
        # A connection that fails before the request goes out (refused, reset, a TLS handshake cut short by a busy
        # endpoint) is tried again, as botocore does for AWS's APIs; nothing was sent, so any verb may retry.
        self._inner = httpx2.HTTPTransport(verify=ssl.create_default_context(cadata=ca_pem),
                                           retries=CONNECT_RETRIES)
        self._token = ""
        self._made = 0.0
        self._lock = threading.Lock()

    def _bearer(self) -> str:
        with self._lock:
            if not self._token or time.monotonic() - self._made > REFRESH_AFTER_SECONDS:
                try:
                    self._token = eks_token(self._cluster, self._region)
                except Exception as exc:  # no credentials, a broken profile: say so, not a traceback
                    raise describe_error(f"EKS cluster {self._cluster} (token)", exc) from None
                self._made = time.monotonic()
            return self._token

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Authorization"] = f"Bearer {self._bearer()}"
        if request.method in _WRITES and "fieldValidation" not in request.url.params:
            request.url = request.url.copy_add_param("fieldValidation", "Strict")
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


@dataclass(frozen=True)
class KubeAccess:
    """Where one EKS cluster's Kubernetes API is and the CA that signs its certificate (base64 PEM, as
    DescribeCluster's ``certificateAuthority.data`` gives it)."""

    cluster: str
    region: str
    endpoint: str
    ca_data: str

    @property
    def ca_pem(self) -> str:
        import base64

        return base64.b64decode(self.ca_data).decode()

    def token(self) -> str:
        """A fresh bearer token for this cluster (kubectl's exec credential)."""
        return eks_token(self.cluster, self.region)

    def transport(self) -> httpx2.BaseTransport:
        return _EksTransport(self.cluster, self.region, self.ca_pem)

    def client(self, transport: httpx2.BaseTransport | None = None) -> Client:
        """A lightkube client for this cluster; ``transport`` (from :meth:`transport`) shares a token with others."""
        config = KubeConfig.from_one(cluster=Cluster(server=self.endpoint, certificate_auth_data=self.ca_data),
                                     user=User(), context_name=self.cluster)
        # trust_env=False: a proxy taken from the environment would get its own transport, without the token.
        return Client(config=config, field_manager="fmcluster", trust_env=False,
                      transport=transport or self.transport(), timeout=httpx2.Timeout(30.0))

    @classmethod
    def of(cls, ctx: Context, cluster: str) -> KubeAccess | None:
        """The cluster's API as DescribeCluster tells it, once per command; None while it has none (no such
        cluster, not ACTIVE or UPDATING, no endpoint yet)."""
        cache = _cache(ctx)
        with _cache_lock:
            if cluster in cache:
                return cache[cluster].access
        def fetch() -> dict[str, Any] | None:
            try:
                return ctx.client("eks").describe_cluster(name=cluster)["cluster"]
            except ClientError as exc:
                if error_code(exc) == "ResourceNotFoundException":
                    return None
                raise

        # In a read-only pass (status), the backend's DescribeCluster of this command (fmcluster.engine.reads).
        item = reads.once(ctx, "eks.Cluster", cluster, fetch)
        if item is None:
            return None
        endpoint = item.get("endpoint")
        ca_data = (item.get("certificateAuthority") or {}).get("data")
        if item.get("status") not in SERVING or not endpoint or not ca_data:
            return None  # not cached: it will have one later in this command
        access = cls(cluster, ctx.region, endpoint, ca_data)
        api = KubeApi(access)
        with _cache_lock:
            kept = cache.setdefault(cluster, api)
        if kept is not api:  # another worker thread got there first
            api.close()
        return kept.access


class KubeApi:
    """One cluster's API for one command: a lightkube client, a plain HTTP client for discovery (both through one
    transport, so one token), and what discovery found."""

    def __init__(self, access: KubeAccess):
        self.access = access
        self._transport = access.transport()
        self.client = access.client(self._transport)
        self._http = httpx2.Client(base_url=access.endpoint, transport=self._transport, trust_env=False,
                                   timeout=httpx2.Timeout(30.0))
        self._served: dict[str, dict[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, ctx: Context, cluster: str) -> KubeApi | None:
        if KubeAccess.of(ctx, cluster) is None:
            return None
        with _cache_lock:
            return _cache(ctx)[cluster]

    def resource_type(self, api_version: str, kind: str, what: str = "") -> type | None:
        """A lightkube generic resource class for ``kind`` as this API serves it; None when it serves no such kind
        (a custom resource whose CRD is absent). ``what`` names the object an error is about."""
        what = what or f"EKS cluster {self.access.cluster} API discovery ({api_version})"
        served = self._kinds(api_version, what)
        if kind not in served:
            served = self._kinds(api_version, what, fresh=True)  # a CRD made earlier in this command
        entry = served.get(kind)
        if entry is None:
            return None
        group, _, version = api_version.rpartition("/")
        base = GenericNamespacedResource if entry["namespaced"] else GenericGlobalResource
        # Not registered in lightkube's global registry: built-in kinds there map to typed models, and one process
        # may talk to clusters serving different versions of a CRD.
        return type(kind, (base,), {"_api_info": create_api_info(group, version, kind, entry["name"])})

    def _kinds(self, api_version: str, what: str, fresh: bool = False) -> dict[str, dict[str, Any]]:
        with self._lock:
            if not fresh and api_version in self._served:
                return self._served[api_version]
        path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        with translated(what, self.access):
            response = self._http.get(path)
            if response.status_code == 404:
                return {}  # the group/version is not served (yet): nothing is cached, a CRD may add it
            if response.status_code >= 400:
                raise _api_error(what, response, self.access)
        kinds = {r["kind"]: r for r in response.json().get("resources", []) if "/" not in r["name"]}
        with self._lock:
            self._served[api_version] = kinds
        return kinds

    def close(self) -> None:
        self._http.close()
        self.client.close()

    def call(self, what: str, request: Callable[[], T]) -> T:
        with translated(what, self.access):
            return request()


_cache_lock = threading.RLock()


def _cache(ctx: Context) -> dict[str, KubeApi]:
    """The command's Kubernetes API clients, by cluster name, kept on the command's Context."""
    with _cache_lock:
        return vars(ctx).setdefault("_kube_apis", {})


@contextlib.contextmanager
def translated(what: str, access: KubeAccess) -> Iterator[None]:
    """Turn the API's refusals and an unreachable endpoint into fmcluster errors naming ``what``."""
    try:
        yield
    except ApiError as exc:
        raise _api_error(what, exc.response, access, exc.status) from None
    except httpx2.HTTPStatusError as exc:  # an error answer that is not a JSON Status (a proxy, a load balancer)
        raise _api_error(what, exc.response, access) from None
    except httpx2.TransportError as exc:
        raise FmclusterError(f"{what}: the Kubernetes API at {access.endpoint} did not answer: "
                             f"{type(exc).__name__}: {exc}") from None


def _api_error(what: str, response: httpx2.Response | None, access: KubeAccess,
               status: Any = None) -> KubeApiError:
    code = getattr(status, "code", None) or (response.status_code if response is not None else 0)
    reason = getattr(status, "reason", None) or ""
    message = getattr(status, "message", None) or ""
    if status is None and response is not None:
        with contextlib.suppress(ValueError):
            body = response.json()
            reason, message = body.get("reason", ""), body.get("message", "")
        message = message or response.text[:300]
    hint = ""
    if code == 401:
        hint = _unauthorized_hint(access, response)
    elif code == 403:
        hint = ("this command's AWS identity has an access entry, but its access policy does not allow this; "
                "associate AmazonEKSClusterAdminPolicy with it (aws eks associate-access-policy)")
    return KubeApiError(what, code, reason or "Failure", message, hint)


def _unauthorized_hint(access: KubeAccess, response: httpx2.Response | None) -> str:
    from fmcluster.connection import aws

    who = "this command's AWS identity"
    with contextlib.suppress(Exception):  # naming the caller is a courtesy; the error stands without it
        who = aws.client("sts", access.region, aws.READING).get_caller_identity()["Arn"]
    # The sandbox says why it refused a token; real EKS answers only "Unauthorized".
    why = response.headers.get("X-Fmcluster-Sandbox-Auth", "") if response is not None else ""
    return (f"EKS did not accept {who} for cluster {access.cluster}" + (f" ({why})" if why else "") +
            ": it needs an access entry with an access policy (aws eks create-access-entry --cluster-name "
            f"{access.cluster} --principal-arn <its IAM ARN>, then aws eks associate-access-policy with "
            "AmazonEKSClusterAdminPolicy), or credentials of the principal that has one")
