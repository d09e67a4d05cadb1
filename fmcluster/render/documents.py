"""Rendered backend documents. The ``${kind.key.attribute}`` references inside them are
:mod:`fmcluster.engine.references`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Placeholder for a subnet the spec leaves to create time (the default VPC's subnet in a suitable AZ).
SUBNET_TO_RESOLVE = "subnet-00000000000000000"


@dataclass
class Document:
    """One request document: what it is for, the AWS call it feeds, its text and its parsed body."""

    filename: str
    kind: str  # the resource kind: cluster, compute_node_group, queue, launch_template, …
    key: str  # unique within its kind (queue name, node group name, …)
    service: str  # botocore service name: pcs, ec2, iam, fsx; "pcluster" for a ParallelCluster config
    operations: dict[str, str]  # section of the body (or "" for the whole body) -> botocore operation
    text: str
    body: Any


@dataclass
class RenderedDocuments:
    backend: str
    documents: list[Document] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Ready-to-copy files for the user's jobs (``render`` prints and writes them); never applied or validated.
    examples: list[Document] = field(default_factory=list)

    def by_kind(self, kind: str) -> list[Document]:
        return [d for d in self.documents if d.kind == kind]

    def one(self, kind: str, key: str = "") -> Document:
        for document in self.documents:
            if document.kind == kind and (not key or document.key == key):
                return document
        raise KeyError(f"{kind}:{key}")
