"""An FSx for OpenZFS /home as both Slurm backends make it (PCS through its own request, ParallelCluster before
its stack, which can only mount a volume): the same deployment type, throughput and NFS exports."""

from __future__ import annotations

from fmcluster.spec.models import Spec, max_nodes

# SINGLE_AZ_2: the current single-AZ generation (160-10240 MB/s, NVMe read cache), in the compute subnet's AZ.
OPENZFS_DEPLOYMENT_TYPE = "SINGLE_AZ_2"
# What AWS accepts for SINGLE_AZ_2 / MULTI_AZ_1 (botocore's CreateFileSystemOpenZFSConfiguration docs).
OPENZFS_THROUGHPUT_STEPS = (160, 320, 640, 1280, 2560, 3840, 5120, 7680, 10240)
OPENZFS_NFS_EXPORT_OPTIONS = ["rw", "crossmnt", "no_root_squash"]


def openzfs_throughput_mbps(spec: Spec) -> int:
    """/home holds code, environments and small files (checkpoints go to Lustre): the smallest step serves a
    small cluster; many nodes starting jobs at once (imports, venvs) get the next."""
    nodes = sum(max_nodes(queue) for queue in spec.queues)
    return OPENZFS_THROUGHPUT_STEPS[0] if nodes < 32 else OPENZFS_THROUGHPUT_STEPS[1]
