"""From a cluster name to an ssh target: the recorded spec, then the backend's login node (or ``--host``)."""

from __future__ import annotations

from fmcluster.connect.login import NodeNotFound, SshTarget, target_for_host, target_for_node
from fmcluster.spec.models import Spec


def resolve(name: str, host: str | None = None, user: str | None = None,
            identity: str | None = None) -> tuple[Spec, SshTarget]:
    """The cluster's spec and how to reach it. ``host`` (HOST[:PORT]) skips the AWS look-up: a node reached
    through a VPN or a bastion, or any Slurm login host."""
    from fmcluster import aws
    from fmcluster.lifecycle import Session, load_record, spec_of
    from fmcluster.state import StateStore

    store = StateStore()
    record = load_record(store, name, aws.target().region)
    spec = spec_of(record)
    if host:
        return spec, target_for_host(spec, host, user, identity)
    session = Session.open(spec, record.spec_path or "spec.yaml", store)
    node = session.backend.login_node(session)
    if node is None:
        where = "login node (PCS compute node group 'login')" if spec.backend == "pcs" else "head node"
        raise NodeNotFound(f"cluster {name} has no running {where} in {session.region}; "
                           f"`fmcluster status {name}` shows what exists")
    return spec, target_for_node(spec, session.region, node, aws.target().profile, user, identity)
