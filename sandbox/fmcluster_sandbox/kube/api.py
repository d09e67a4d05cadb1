"""The emulated Kubernetes API server of one sandbox EKS cluster: ``KubeApi.handle(cluster, environ)``.

The sandbox server routes ``/k8s/<cluster name>/<Kubernetes API path>`` here. Each request is authenticated as EKS
does (:mod:`.auth`: the ``aws eks get-token`` bearer token, then the cluster's access entries through the
``principal_allowed`` callback), then routed: discovery (``/api``, ``/apis``, ``/api/v1``,
``/apis/<group>[/<version>]``: :mod:`.discovery`; ``/version``) or a resource path, namespaced or cluster-scoped,
of a built-in kind (:mod:`.resources`) or a custom resource of an established CRD, whose verbs :mod:`.verbs`
serves from the cluster's store (:mod:`.store`). ``docs/sandbox-fidelity.md`` ("Kubernetes API") lists
each rule with its Kubernetes documentation page and what is not emulated.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from fmcluster_sandbox.kube import auth, discovery, mpi_operator, node_writes
from fmcluster_sandbox.kube.status import JSON, KubeError, no_route, unauthorized
from fmcluster_sandbox.kube.store import ClusterStore
from fmcluster_sandbox.kube.verbs import NodeSource, Request

log = logging.getLogger(__name__)
PrincipalAllowed = Callable[[str, str, str], bool]  # (cluster name, region, principal ARN) -> allowed
VersionSource = Callable[[str, str], str | None]  # (cluster name, region) -> Kubernetes version "1.33"
# (cluster name, region, principal ARN) -> the access entry's associated policies, or None when not known
PolicySource = Callable[[str, str, str], list[dict[str, Any]] | None]
# (cluster name, the token's STS Region) -> the Region of the cluster the endpoint names, or None when not known
RegionSource = Callable[[str, str], str | None]
DEFAULT_VERSION = "1.33"
HEALTH_PATHS = ("healthz", "livez", "readyz")
AUTH_REASON_HEADER = "X-Fmcluster-Sandbox-Auth"  # why a token was refused (the Status says only "Unauthorized")


class KubeApi:
    """Kubernetes API endpoints of the sandbox's EKS clusters, one store per (region, cluster name)."""

    def __init__(self, principal_allowed: PrincipalAllowed, nodes: NodeSource, *,
                 cluster_version: VersionSource | None = None, access_policies: PolicySource | None = None,
                 cluster_region: RegionSource | None = None, clock: Callable[[], _dt.datetime] | None = None,
                 faults: Any = None):
        self.faults = faults  # the sandbox's Faults: node health for the MPI Operator's runs (:mod:`.node_health`)
        self.principal_allowed = principal_allowed
        self.cluster_region = cluster_region or (lambda cluster, region: None)
        self.access_policies = access_policies or (lambda cluster, region, principal: None)
        self.nodes = nodes
        self.cluster_version = cluster_version or (lambda cluster, region: DEFAULT_VERSION)
        self.clock = clock or (lambda: _dt.datetime.now(_dt.timezone.utc))
        self._stores: dict[tuple[str, str], ClusterStore] = {}
        self._lock = threading.RLock()

    # -- lifecycle ---------------------------------------------------------------------------------
    # Both without the request lock: a request holds it while it calls the EKS emulator (nodes, policies), and the
    # EKS emulator may call forget() while holding its own lock; one dict operation is atomic on its own.
    def forget(self, cluster: str, region: str) -> None:
        """Drop a cluster's objects (call when EKS deletes the cluster)."""
        self._stores.pop((region, cluster), None)

    def reset(self) -> None:
        self._stores.clear()
        node_writes.reset()
        mpi_operator.stop_all()

    # -- entry point ---------------------------------------------------------------------------------
    def handle(self, cluster: str, environ: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        """Answer one request to ``/k8s/<cluster>/...``: ``(status, headers, body)``."""
        path = environ.get("PATH_INFO", "")
        if path.rstrip("/") in (f"/k8s/{cluster}/{p}" for p in HEALTH_PATHS):
            # EKS keeps anonymous access only for the health endpoints (EKS guide, release notes of Kubernetes
            # 1.32: anonymous authentication is restricted to /healthz, /livez and /readyz).
            return 200, {"Content-Type": "text/plain"}, b"ok"
        try:
            identity = self._authenticate(cluster, environ)
            with self._lock:
                status, headers, body = self._serve(cluster, identity, environ)
        except KubeError as err:
            return err.response()
        except Exception as exc:  # noqa: BLE001 - a bug in the emulator: answer as the API server's 500
            log.exception("Kubernetes API emulator failure on %s", environ.get("PATH_INFO"))
            return KubeError(500, "InternalError", f"Internal error occurred: {type(exc).__name__}: {exc}").response()
        if isinstance(body, (bytes, str)):
            return status, headers, body.encode() if isinstance(body, str) else body
        return status, {**JSON, **headers}, json.dumps(body).encode()

    def _authenticate(self, cluster: str, environ: dict[str, Any]) -> auth.Identity:
        header = environ.get("HTTP_AUTHORIZATION", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _unauthorized("no bearer token")
        try:
            identity = auth.verify(token.strip(), cluster, self.clock())
        except auth.TokenRejected as exc:
            raise _unauthorized(str(exc)) from None
        # The endpoint names the cluster; the token's STS Region (the global endpoint signs as us-east-1) need not
        # be the cluster's. From here the identity's region is the cluster's.
        region = self.cluster_region(cluster, identity.region)
        if region and region != identity.region:
            identity = dataclasses.replace(identity, region=region)
        if not self.principal_allowed(cluster, identity.region, identity.arn):
            # No access entry (with an access policy) for the principal: EKS cannot map it to a user.
            raise _unauthorized(f"no access entry for {identity.arn} on cluster {cluster}")
        return identity

    def _store(self, cluster: str, region: str) -> ClusterStore:
        store = self._stores.get((region, cluster))
        return store if store is not None else self._stores.setdefault((region, cluster), ClusterStore())

    # -- routing -------------------------------------------------------------------------------------
    def _serve(self, cluster: str, identity: auth.Identity, environ: dict[str, Any]) -> tuple[int, dict, Any]:
        prefix = f"/k8s/{cluster}"
        path = environ.get("PATH_INFO", "")
        path = path[len(prefix):] if path.startswith(prefix) else path
        parts = [p for p in path.split("/") if p]
        method = environ.get("REQUEST_METHOD", "GET").upper()
        query = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()}
        store = self._store(cluster, identity.region)
        version = self.cluster_version(cluster, identity.region) or DEFAULT_VERSION
        store.kubernetes_version = version
        policies = self.access_policies(cluster, identity.region, identity.arn)
        request = Request(self.nodes, cluster, identity, store, version, environ, method, query, policies)
        request.faults = self.faults

        if parts == ["version"]:
            major, minor = version.split(".")[:2]
            # version.Info: every field is always present
            return 200, {}, {"major": major, "minor": minor, "gitVersion": f"v{major}.{minor}.0-eks-sandbox",
                             "gitCommit": "0" * 40, "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
                             "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"}
        if parts == ["api"]:
            return 200, {}, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": environ.get("HTTP_HOST", "")}]}
        if parts == ["apis"]:
            return 200, {}, {"kind": "APIGroupList", "apiVersion": "v1", "groups": discovery.groups(store)}
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, gv, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 2:
            if len(parts) == 2:
                found = [g for g in discovery.groups(store) if g["name"] == parts[1]]
                if not found:
                    raise no_route(path)
                return 200, {}, {"kind": "APIGroup", "apiVersion": "v1", **found[0]}
            group, gv, rest = parts[1], parts[2], parts[3:]
        else:
            raise no_route(path)
        types = discovery.types(store, group, gv)
        if not types:
            raise no_route(path)
        if not rest:
            return 200, {}, {"kind": "APIResourceList", "apiVersion": "v1",
                             "groupVersion": f"{group}/{gv}" if group else gv,
                             "resources": [t.discovery() for t in types.values()]}
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        plural, name, sub = rest[0], (rest[1] if len(rest) > 1 else None), (rest[2] if len(rest) > 2 else None)
        if plural not in types or len(rest) > 3 or (sub is not None and sub != "status" and
                                                     (plural, sub, method) != ("pods", "log", "GET")):
            raise no_route(path)
        rtype = types[plural]
        if namespace is not None and not rtype.namespaced:
            raise no_route(path)
        return request.dispatch(rtype, namespace, name, sub)


def _unauthorized(reason: str) -> KubeError:
    err = unauthorized()
    original = err.response

    def response() -> tuple[int, dict[str, str], bytes]:
        status, headers, body = original()
        return status, {**headers, AUTH_REASON_HEADER: reason.replace("\n", " ")[:500]}, body

    err.response = response  # type: ignore[method-assign]
    return err
