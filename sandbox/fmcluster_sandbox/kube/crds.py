"""The scheduler CRDs shipped in ``data/crds/`` (sources in its README), as manifests to create on a cluster."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

SHIPPED = {
    "resourceflavors.kueue.x-k8s.io": "kueue.x-k8s.io_resourceflavors.yaml",
    "clusterqueues.kueue.x-k8s.io": "kueue.x-k8s.io_clusterqueues.yaml",
    "localqueues.kueue.x-k8s.io": "kueue.x-k8s.io_localqueues.yaml",
    "queues.scheduling.volcano.sh": "scheduling.volcano.sh_queues.yaml",
    "queues.scheduling.run.ai": "scheduling.run.ai_queues.yaml",
}


def load(name: str) -> dict[str, Any]:
    """The CustomResourceDefinition ``name`` (e.g. ``clusterqueues.kueue.x-k8s.io``) as published."""
    text = resources.files("fmcluster_sandbox.kube").joinpath("data", "crds", SHIPPED[name]).read_text()
    return yaml.safe_load(text)
