"""The scheduler CRDs fmcluster installs, pinned per scheduler (the files next to this module; see README.md)."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class SchedulerRelease:
    """One scheduler at the release fmcluster pins: its CRD files, in the folder named for the version."""

    name: str
    version: str
    folder: str
    crd_files: tuple[str, ...]
    display: str
    # How the project documents installing its controller at this version (fmcluster installs only the CRDs and
    # the queue objects: the controller's release manifests are not among what fmcluster ships).
    install: str


SCHEDULERS: dict[str, SchedulerRelease] = {
    "kueue": SchedulerRelease("kueue", "v0.19.2", "kueue-v0.19.2", (
        "kueue.x-k8s.io_resourceflavors.yaml", "kueue.x-k8s.io_clusterqueues.yaml",
        "kueue.x-k8s.io_localqueues.yaml"), "Kueue",
        "kueue.sigs.k8s.io, 'Installation': the release manifests of v0.19.2"),
    "volcano": SchedulerRelease("volcano", "v1.15.1", "volcano-v1.15.1", (
        "scheduling.volcano.sh_queues.yaml", "scheduling.volcano.sh_podgroups.yaml"), "Volcano",
        "volcano.sh, 'Installation': the Helm chart or installer manifests of v1.15.1"),
    "kai": SchedulerRelease("kai", "v0.13.0", "kai-scheduler-v0.13.0", (
        "scheduling.run.ai_queues.yaml", "scheduling.run.ai_podgroups.yaml"), "the NVIDIA KAI Scheduler",
        "NVIDIA/KAI-Scheduler README, 'Installation': the Helm chart of v0.13.0"),
}


@functools.cache
def _load(folder: str, file: str) -> dict[str, Any]:
    text = resources.files(__name__).joinpath(folder, file).read_text(encoding="utf-8")
    return yaml.safe_load(text)


def crds(scheduler: str) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of ``scheduler`` as published (fresh copies: callers label them)."""
    release = SCHEDULERS[scheduler]
    return [copy.deepcopy(_load(release.folder, file)) for file in release.crd_files]


def all_crds() -> list[dict[str, Any]]:
    """Every shipped CRD, of every scheduler (what offline validation knows custom resources by)."""
    return [crd for name in SCHEDULERS for crd in crds(name)]
