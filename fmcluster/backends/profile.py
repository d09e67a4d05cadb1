"""What generic code must know about a backend by name, without loading it: a light record (no boto3, no
pcluster) that ``status``, ``connect`` and the spec can read for any backend, installed extra or not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BackendProfile:
    name: str  # the spec's ``backend:`` value
    display: str  # how messages name it ("PCS", "ParallelCluster")
    # Where users log in, as messages say it ("head node", "login node"), and how to describe a missing one.
    login_role: str
    login_where: str
    # The backend's raw statuses (its cluster's, or its stack's) in the one vocabulary of ``status``.
    status: Mapping[str, str] = field(default_factory=dict)
    # The resource kind of the cluster's anchor (what its id and tags hang on): a teardown keeps nothing
    # for it when it keeps storage.
    anchor_kind: str = "cluster"
    # The kind of the backend's own CloudFormation stack, when it runs one (ParallelCluster's): the stack copies its
    # tags, ``fmcluster:resource`` naming the stack, onto what it makes, which discovery must tell apart.
    stack_kind: str | None = None
    # The tag, besides fmcluster:cluster, by which what the backend's own stack launches names the cluster
    # (ParallelCluster's launch templates): ``capacity list`` reads a Capacity Block's users from it.
    cluster_name_tag: str | None = None
    # The pip extra the backend's lifecycle needs (None: boto3 alone).
    extra: str | None = None
    # The backend's own resource kinds that bill by the hour while they exist, whatever their state (EKS's control
    # plane): ``status`` names them in a cluster's "still billing" line beside the kinds every backend shares.
    billing_kinds: frozenset[str] = frozenset()
    # Well-formed values for what AWS issues at create time for the backend's own kinds, by (kind, attribute):
    # ``validate`` fills the references (``${kind.key.attribute}``) of documents with them before those exist.
    stand_ins: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # What it does that not every backend does is not here: ``Backend.capabilities`` (protocol.Capability).

    def common_status(self, raw: str) -> str:
        """``raw`` in the common vocabulary; a status the map does not know is in progress."""
        return self.status.get(raw, "UPDATING")

    def overall_status(self, cluster: str, members: list[str]) -> str:
        """The cluster's status from its own and its members' (node groups, queues, add-ons): a member that failed
        or is still changing shows through an ACTIVE cluster."""
        status = self.common_status(cluster)
        if status != "ACTIVE":
            return status
        mapped = {self.common_status(m) for m in members}
        for candidate in ("FAILED", "CREATING", "DELETING", "UPDATING"):
            if candidate in mapped:
                return "UPDATING" if candidate == "DELETING" else candidate
        return "ACTIVE"
