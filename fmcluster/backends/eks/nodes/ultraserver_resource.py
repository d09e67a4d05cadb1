"""The UltraServer labels of a queue's nodes as an engine resource, so that `fmcluster create` writes them in its
converge pass, after the queue's node group (the reference to the node group's ARN is the graph's edge), and
`diff`/`create` show what would change, node by node (:mod:`.ultraserver_labels` does the pass).

The resource is labels on nodes EKS makes and replaces, not an object of its own: reading it runs the pass without
writing (which nodes lack or have a wrong UltraServer label), creating or updating it writes them, and deleting it
does nothing (the labels go with their nodes, and the nodes with the node group). A node that joins later (a
replacement, a node group scaling up) has no label until the next `fmcluster create`, which sees it as an update.
"""

from __future__ import annotations

from typing import Any

from fmcluster.backends.eks.nodes import ultraserver_labels
from fmcluster.backends.eks.nodes.ultraserver_labels import LabelPass
from fmcluster.engine import AttributeChange, Context, Observed, Resource
from fmcluster.render.documents import Document


class UltraServerLabels(Resource):
    kind = "ultraserver_labels"
    teardown_rank = 5  # nothing to delete: first, and at once
    settles_before_delete = False

    def __init__(self, key: str, document: Document | None, cluster: str, per_ultraserver: int = 0):
        self.key = key
        self.document = document
        self.cluster = cluster
        self.per_ultraserver = per_ultraserver
        self._wanted: dict[str, str] | None = None

    def _api(self, ctx: Context) -> Any:
        from fmcluster.backends.eks.kubernetes.access import KubeApi

        return KubeApi.of(ctx, self.cluster)

    def _observed(self, ctx: Context, found: LabelPass, labels: dict[str, str]) -> Observed:
        expected = (ctx.resolve(self.document.body, partial=True) or {}).get("nodes") if self.document else None
        seen = len(found.labelled) + len(found.kept) + len(found.waiting) + sum(map(len, found.too_many.values()))
        lines = found.lines()
        if isinstance(expected, int) and seen < expected:
            lines.append(f"{self.key}: {seen} of {expected} nodes registered with Kubernetes; the others are labelled "
                         "by the next `fmcluster create`")
        # the status is what the walk's last line shows: who still waits is said there, not only in the detail
        unlabelled = len(found.waiting) + (expected - seen if isinstance(expected, int) and seen < expected else 0)
        status = f"WAITING ({unlabelled} node(s) without their UltraServer yet)" if unlabelled else "LABELLED"
        return Observed(f"{self.cluster}/{self.key}", status, "ready", detail="; ".join(lines),
                        attributes={"labels": labels})

    def _pass(self, ctx: Context, write: bool) -> tuple[LabelPass, dict[str, str]] | None:
        api = self._api(ctx)
        if api is None:
            return None
        found = ultraserver_labels.label_queue(api, ctx.client("ec2"), self.key, self.per_ultraserver, write=write)
        wanted = {**found.kept, **found.labelled}
        self._wanted = wanted
        # what the nodes carry now: after a write, what was written; before it, what they had
        return found, wanted if write else found.current

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        done = self._pass(ctx, write=False)
        return None if done is None else self._observed(ctx, *done)  # None: no cluster API yet

    def desired(self, ctx: Context) -> dict[str, Any]:
        return {"labels": self._wanted} if self._wanted is not None else {}

    def changes(self, ctx: Context, observed: Observed) -> list[AttributeChange]:
        live, wanted = observed.attributes.get("labels") or {}, self._wanted or {}
        return [AttributeChange(f"labels.{node}", live.get(node), value)
                for node, value in sorted(wanted.items()) if live.get(node) != value]

    def _write(self, ctx: Context) -> Observed:
        done = self._pass(ctx, write=True)
        if done is None:
            return Observed(None, "WAITING", "ready", detail=f"{self.key}: the cluster has no Kubernetes API yet")
        return self._observed(ctx, *done)

    def create(self, ctx: Context, token: str) -> Observed:
        return self._write(ctx)

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        return self._write(ctx)

    def delete(self, ctx: Context, observed: Observed) -> None:
        """Nothing: the labels go with their nodes."""


def resources(spec: Any) -> list[Resource]:
    """One per UltraServer queue, after its node group (the reference to its ARN), knowing its size."""
    made: list[Resource] = []
    for queue, per_ultraserver in ultraserver_labels.ultraserver_queues(spec).items():
        body = {"nodegroup": f"${{eks_nodegroup.{queue}.arn}}", "nodes": f"${{eks_nodegroup.{queue}.desired}}",
                "label": ultraserver_labels.ULTRASERVER_LABEL}
        document = Document(f"ultraserver-labels-{queue}.yaml", UltraServerLabels.kind, queue, "kubernetes",
                            {"": "patch"}, "", body)
        made.append(UltraServerLabels(queue, document, spec.name, per_ultraserver))
    return made
