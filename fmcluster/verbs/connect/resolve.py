"""From a cluster name to an ssh target: the recorded spec, then the backend's login node (or ``--host``)."""

from __future__ import annotations

from fmcluster.aws.login import NodeNotFound, SshTarget, target_for_host, target_for_node
from fmcluster.backends import registry
from fmcluster.backends.protocol import Capability
from fmcluster.connection import aws
from fmcluster.spec.models import Spec
from fmcluster.spec.stored import stored_spec_problem
from fmcluster.state.store import StateStore
from fmcluster.verbs.lifecycle.common import open_cluster
from fmcluster.verbs.session import Session


def recorded(name: str) -> tuple[Session, Spec]:
    """The recorded cluster ``name`` and its spec (which must still load: it says what the nodes should have)."""
    session = open_cluster(StateStore(readonly=True), name)
    spec = session.spec
    if spec is None:
        why = stored_spec_problem(session.record.spec) or "see status"
        raise NodeNotFound(f"the recorded spec of {name} no longer loads ({why}); `fmcluster status {name}` shows "
                           "what exists")
    return session, spec


@aws.read_only()
def resolve(name: str, host: str | None = None, user: str | None = None,
            identity: str | None = None) -> tuple[Spec, SshTarget]:
    """The cluster's spec and how to reach it. ``host`` (HOST[:PORT]) skips the AWS look-up: a node reached
    through a VPN or a bastion, or any Slurm login host."""
    session = open_cluster(StateStore(readonly=True), name)
    spec = session.spec
    if spec is None:
        why = stored_spec_problem(session.record.spec) or "see status"
        raise NodeNotFound(f"the recorded spec of {name} no longer loads ({why}); use --host, or "
                           f"`fmcluster status {name}` for what exists")
    profile = registry.profile(spec.backend)
    if Capability.KUBERNETES_API in registry.get(spec.backend).capabilities:
        raise NodeNotFound(f"{name} is an {profile.display} cluster: it has no node to ssh to; "
                           f"`fmcluster kubeconfig {name}` writes the kubeconfig that reaches its Kubernetes API")
    if host:
        return spec, target_for_host(spec, host, user, identity)
    node = session.backend.login_node(session.context)
    if node is None:
        where = profile.login_where
        raise NodeNotFound(f"cluster {name} has no running {where} in {session.region}; "
                           f"`fmcluster status {name}` shows what exists")
    return spec, target_for_node(spec, session.region, node, aws.target().profile, user, identity)
