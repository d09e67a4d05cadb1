"""Which custom Slurm settings ParallelCluster takes: it denies a few per level, ``SLURM_SETTINGS_DENY_LIST`` in
pcluster/validators/slurm_settings_validator.py (3.16.1), compared case-insensitively. fmcluster keeps its own copy,
so a setting is refused at load time with its position instead of at ParallelCluster's validators.
"""

from __future__ import annotations

PCLUSTER_DENIED = {
    "cluster": frozenset("""
epilog grestypes launchparameters prolog reconfigflags resumefailprogram resumeprogram resumetimeout slurmctldhost
slurmctldlogfile slurmctldparameters slurmdlogfile slurmuser suspendexcnodes suspendprogram suspendtime taskplugin
treewidth accountingstoragetype accountingstoragehost accountingstorageport accountingstorageuser jobacctgathertype
""".split()),
    "queue": frozenset("nodes partitionname resumetimeout state suspendtime oversubscribe".split()),
}


def parallelcluster_problem(name: str, level: str) -> str | None:
    if name.lower() not in PCLUSTER_DENIED[level]:
        return None
    instead = " Use job_exclusive instead" if name.lower() == "oversubscribe" else ""
    return (f"not supported on parallelcluster: ParallelCluster manages {name} itself and refuses it at {level} "
            f"level.{instead}")
