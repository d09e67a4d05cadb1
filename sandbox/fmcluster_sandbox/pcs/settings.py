"""PCS's allow-lists of custom Slurm settings: "AWS PCS implements an allow-list approach" and answers a
setting outside it with a ``ValidationException`` ("Configuring custom Slurm settings in AWS PCS").

The lists are the PCS user guide's: "Custom Slurm settings for AWS PCS clusters", "… compute node groups",
"… queues", "Configuring custom SlurmDBD settings in AWS PCS" and "Configuring custom cgroup settings in
AWS PCS". Settings the guide limits to a Slurm version carry that minimum.
"""

from __future__ import annotations

from fmcluster_sandbox.pcs.errors import field_error

CLUSTER_SLURM = frozenset("""
AccountingStorageEnforce AccountingStorageTRES AccountingStoreFlags AuthAltParameters CliFilterParameters
CliFilterPlugins CommunicationParameters DefMemPerCPU Epilog EnforcePartLimits FairShareDampeningFactor FirstJobId
HealthCheckInterval HealthCheckNodeState HealthCheckProgram JobRequeue LaunchParameters Licenses MetricsType
MinJobAge OverTimeLimit PreemptExemptTime PreemptMode PreemptParameters PreemptType PriorityCalcPeriod
PriorityDecayHalfLife PriorityFavorSmall PriorityFlags PriorityMaxAge PriorityUsageResetPeriod PriorityWeightAge
PriorityWeightAssoc PriorityWeightFairshare PriorityWeightJobSize PriorityWeightPartition PriorityWeightQOS
PriorityWeightTRES Prolog PrologFlags RequeueExit RequeueExitHold SchedulerParameters SelectTypeParameters
SrunPortRange TaskEpilog TaskPluginParam TaskProlog TrackWCKey UnkillableStepProgram UnkillableStepTimeout
""".split())
NODE_GROUP_SLURM = frozenset("CpuSpecList Features Gres MemSpecLimit Parameters RealMemory Sockets Weight".split())
QUEUE_SLURM = frozenset("""
AllowAccounts AllowQos Default DefaultTime DenyAccounts DenyQos ExclusiveUser GraceTime MaxTime OverSubscribe
OverTimeLimit PowerDownOnIdle PreemptMode PriorityJobFactor PriorityTier QOS TRESBillingWeights
""".split())
CLUSTER_SLURMDBD = frozenset("""
AllowNoDefAcct AllResourcesAbsolute CommitDelay DefaultQOS MaxQueryTimeRange Parameters PrivateData PurgeEventAfter
PurgeJobAfter PurgeResvAfter PurgeStepAfter PurgeSuspendAfter PurgeTXNAfter PurgeUsageAfter TrackWCKey
""".split())
CLUSTER_CGROUP = frozenset("""
AllowedRAMSpace AllowedSwapSpace ConstrainCores ConstrainDevices ConstrainRAMSpace ConstrainSwapSpace IgnoreSystemd
MaxRAMPercent MaxSwapPercent MinRAMSpace SignalChildrenProcesses
""".split())
# "AWS PCS supports `Parameters` / `Sockets` on Slurm version 25.11 and later" (compute node groups).
NODE_GROUP_MIN_VERSION = {"Parameters": "25.11", "Sockets": "25.11"}
MIN_JOB_AGE_SECONDS = 5  # "AWS PCS supports a minimum value of 5 seconds for MinJobAge."


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _check(items: list[dict] | None, allowed: frozenset[str], field: str, where: str, slurm_version: str,
           minimum: dict[str, str] | None = None) -> None:
    for index, item in enumerate(items or []):
        name = item.get("parameterName", "")
        path = f"{field}[{index}].parameterName"
        if name not in allowed:
            raise field_error(path, f"{name} is not a custom setting PCS supports for {where}")
        needed = (minimum or {}).get(name)
        if needed and _version(slurm_version) < _version(needed):
            raise field_error(path, f"{name} needs Slurm {needed} or later; the cluster runs {slurm_version}")


def check_cluster(slurm: dict, slurm_version: str) -> None:
    _check(slurm.get("slurmCustomSettings"), CLUSTER_SLURM, "slurmConfiguration.slurmCustomSettings",
           "clusters", slurm_version)
    _check(slurm.get("slurmdbdCustomSettings"), CLUSTER_SLURMDBD, "slurmConfiguration.slurmdbdCustomSettings",
           "clusters (slurmdbd.conf)", slurm_version)
    _check(slurm.get("cgroupCustomSettings"), CLUSTER_CGROUP, "slurmConfiguration.cgroupCustomSettings",
           "clusters (cgroup.conf)", slurm_version)
    for index, item in enumerate(slurm.get("slurmCustomSettings") or []):
        if item.get("parameterName") == "MinJobAge":
            try:
                age = int(item.get("parameterValue", ""))
            except ValueError:
                age = -1
            if age < MIN_JOB_AGE_SECONDS:
                raise field_error(f"slurmConfiguration.slurmCustomSettings[{index}].parameterValue",
                                  f"MinJobAge must be at least {MIN_JOB_AGE_SECONDS} seconds")


def check_node_group(slurm: dict | None, slurm_version: str) -> None:
    _check((slurm or {}).get("slurmCustomSettings"), NODE_GROUP_SLURM, "slurmConfiguration.slurmCustomSettings",
           "compute node groups", slurm_version, NODE_GROUP_MIN_VERSION)


def check_queue(slurm: dict | None, slurm_version: str) -> None:
    _check((slurm or {}).get("slurmCustomSettings"), QUEUE_SLURM, "slurmConfiguration.slurmCustomSettings",
           "queues", slurm_version)
