"""Which custom Slurm settings PCS takes: PCS allows a list per level ("AWS PCS implements an allow-list
approach"), the PCS user guide's "Custom Slurm settings for AWS PCS clusters" and "Custom Slurm settings for AWS PCS
queues" pages (https://docs.aws.amazon.com/pcs/latest/userguide/slurm-custom-settings.html). fmcluster keeps its own
copy (the sandbox keeps another, read from the same pages), so a setting is refused at load time with its position
instead of at AWS.
"""

from __future__ import annotations

PCS_CLUSTER = frozenset("""
AccountingStorageEnforce AccountingStorageTRES AccountingStoreFlags AuthAltParameters CliFilterParameters
CliFilterPlugins CommunicationParameters DefMemPerCPU Epilog EnforcePartLimits FairShareDampeningFactor FirstJobId
HealthCheckInterval HealthCheckNodeState HealthCheckProgram JobRequeue LaunchParameters Licenses MetricsType
MinJobAge OverTimeLimit PreemptExemptTime PreemptMode PreemptParameters PreemptType PriorityCalcPeriod
PriorityDecayHalfLife PriorityFavorSmall PriorityFlags PriorityMaxAge PriorityUsageResetPeriod PriorityWeightAge
PriorityWeightAssoc PriorityWeightFairshare PriorityWeightJobSize PriorityWeightPartition PriorityWeightQOS
PriorityWeightTRES Prolog PrologFlags RequeueExit RequeueExitHold SchedulerParameters SelectTypeParameters
SrunPortRange TaskEpilog TaskPluginParam TaskProlog TrackWCKey UnkillableStepProgram UnkillableStepTimeout
""".split())
PCS_QUEUE = frozenset("""
AllowAccounts AllowQos Default DefaultTime DenyAccounts DenyQos ExclusiveUser GraceTime MaxTime OverSubscribe
OverTimeLimit PowerDownOnIdle PreemptMode PriorityJobFactor PriorityTier QOS TRESBillingWeights
""".split())
PCS_ALLOWED = {"cluster": PCS_CLUSTER, "queue": PCS_QUEUE}
PCS_PAGES = {"cluster": "Custom Slurm settings for AWS PCS clusters",
             "queue": "Custom Slurm settings for AWS PCS queues"}


def pcs_problem(name: str, level: str, slurm_version: str) -> str | None:
    if name in PCS_ALLOWED[level]:
        return None
    near = next((allowed for allowed in PCS_ALLOWED[level] if allowed.lower() == name.lower()), None)
    hint = f" (did you mean {near}?)" if near else ""
    return (f"not supported on pcs: {name} is not among the {level} settings PCS allows (PCS user guide, "
            f"'{PCS_PAGES[level]}'){hint}; use the parallelcluster backend for it")
