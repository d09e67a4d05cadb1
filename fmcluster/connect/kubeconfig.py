"""``fmcluster kubeconfig``: a kubeconfig for a cluster's Kubernetes API, whose user runs ``fmcluster kubeconfig NAME
--token`` for each fresh bearer token (as ``aws eks update-kubeconfig`` writes ``aws eks get-token``), so it needs
nothing but fmcluster and the credentials that made the cluster."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fmcluster import aws
from fmcluster.backends import registry
from fmcluster.backends.base import KubeEndpoint
from fmcluster.errors import UsageError
from fmcluster.lifecycle.common import open_cluster
from fmcluster.state import StateStore

EXEC_API = "client.authentication.k8s.io/v1beta1"
# EKS tokens are presigned for 60 seconds (awscli get_token.py URL_TIMEOUT); kubectl asks again after this.
TOKEN_LIFETIME = dt.timedelta(seconds=60)


def _access(name: str) -> tuple[KubeEndpoint, str]:
    session = open_cluster(StateStore(readonly=True), name)
    access = session.backend.kube_access(session)
    if access is None:
        profile = registry.profile(session.backend.name)
        if not profile.kubernetes_api:
            raise UsageError(f"{name} is a {profile.display} cluster: it has no Kubernetes API (`fmcluster ssh "
                             f"{name}` reaches its {profile.login_role})")
        raise UsageError(f"the Kubernetes API of {name} is not up in {session.region}; `fmcluster status {name}` "
                         "shows what exists")
    return access, session.record.endpoint_url if session.record else aws.target_label()


@aws.read_only()
def kubeconfig(name: str) -> dict[str, Any]:
    """The kubeconfig document for cluster ``name``."""
    access, where = _access(name)
    args = ["kubeconfig", name, "--token", "--region", access.region]
    env = []
    if where.startswith("sandbox:"):
        args = ["--sandbox", *args]
    elif where != "aws":
        env.append({"name": "AWS_ENDPOINT_URL", "value": where})
    if aws.target().profile:
        env.append({"name": "AWS_PROFILE", "value": aws.target().profile})
    context = f"fmcluster-{name}"
    user: dict[str, Any] = {"apiVersion": EXEC_API, "command": "fmcluster", "args": args,
                            "interactiveMode": "Never", "provideClusterInfo": False}
    if env:
        user["env"] = env
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": context, "preferences": {},
        "clusters": [{"name": context, "cluster": {"server": access.server,
                                                   "certificate-authority-data": access.certificate_authority}}],
        "users": [{"name": context, "user": {"exec": user}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
    }


@aws.read_only()
def exec_credential(name: str) -> dict[str, Any]:
    """What kubectl's exec plugin protocol asks for: a fresh token, and when it expires."""
    access, _ = _access(name)
    expires = dt.datetime.now(dt.timezone.utc) + TOKEN_LIFETIME
    return {"kind": "ExecCredential", "apiVersion": EXEC_API, "spec": {},
            "status": {"expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "token": access.token()}}
