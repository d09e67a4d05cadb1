"""Rules for storage, health checks, node software and per-queue scheduling: what each backend can honour, and
a refusal with the reason (and what to do instead) where it cannot.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

from fmcluster import catalog
from fmcluster.spec import slurm_settings
from fmcluster.spec.models import Queue, Spec
from fmcluster.spec.positions import Path_

Report = Callable[[Path_, str], None]

# PCS instanceHealthChecks need Slurm 26.05 or later (botocore's PCS model, CreateComputeNodeGroup).
PCS_HEALTH_CHECKS_MIN_VERSION = (26, 5)
# ParallelCluster refuses these mount points for shared storage (pcluster/validators: SharedStorageMountDir).
RESERVED_MOUNTS = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/sbin", "/sys", "/usr", "/var")


def check(spec: Spec, error: Report, warn: Report, spec_file: str | None = None) -> None:
    _home(spec, error)
    _lustre_existing(spec, error)
    _health_checks(spec, error, warn)
    _queues(spec, error)
    _slurm_settings(spec, error)
    _bootstrap(spec, error, spec_file)


def _home(spec: Spec, error: Report) -> None:
    home = spec.storage.home
    if home is None:
        return
    path = ("storage", "home")
    if home.existing_id is not None:
        wanted = "fsvol-" if home.type == "openzfs" else "fs-"
        if not home.existing_id.startswith(wanted):
            what = ("an FSx for OpenZFS volume id (fsvol-…)" if home.type == "openzfs"
                    else "an EFS file system id (fs-…)")
            error((*path, "existing_id"), f"type {home.type} takes {what}, not '{home.existing_id}'; set type to "
                                          f"{'efs' if home.type == 'openzfs' else 'openzfs'} if that is what it is")
        if "capacity_gib" in home.model_fields_set:
            error((*path, "capacity_gib"), "capacity_gib sizes a file system fmcluster creates; an existing one "
                                           "keeps its size: remove capacity_gib")
    elif home.type == "efs" and "capacity_gib" in home.model_fields_set:
        error((*path, "capacity_gib"), "EFS grows with its data and takes no size: remove capacity_gib, or use "
                                       "type openzfs")
    if home.mount in RESERVED_MOUNTS:
        error((*path, "mount"), f"{home.mount} is a system directory; pick another mount point")


def _lustre_existing(spec: Spec, error: Report) -> None:
    lustre = spec.storage.lustre
    if lustre is None or lustre.existing_id is None:
        return
    for name in ("capacity_gib", "throughput_per_tib", "deployment_type", "metadata_iops"):
        if name in lustre.model_fields_set:
            error(("storage", "lustre", name), f"{name} shapes a file system fmcluster creates; the existing "
                                               f"{lustre.existing_id} keeps its own: remove {name}")


def _nvidia(queue: Queue) -> bool:
    facts = catalog.instance(queue.instance_type)
    return bool(facts and facts.accelerator and facts.accelerator.vendor == "nvidia")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def pcs_health_checks_supported(spec: Spec) -> bool:
    return _version(spec.slurm.version) >= PCS_HEALTH_CHECKS_MIN_VERSION


def _health_checks(spec: Spec, error: Report, warn: Report) -> None:
    if spec.backend != "pcs":
        for index, queue in enumerate(spec.queues):
            facts = catalog.instance(queue.instance_type)
            if queue.gpu_health_checks and "gpu_health_checks" in queue.model_fields_set and facts is not None \
                    and facts.accelerator.kind != "gpu":
                error(("queues", index, "gpu_health_checks"),
                      f"not supported on parallelcluster: its GPU health check runs on GPU instances, and "
                      f"{queue.instance_type} has none. Remove gpu_health_checks")
        return
    unsupported = []
    for index, queue in enumerate(spec.queues):
        explicit = "gpu_health_checks" in queue.model_fields_set
        if not queue.gpu_health_checks:
            continue
        if not _nvidia(queue):
            if explicit:
                error(("queues", index, "gpu_health_checks"),
                      f"not supported on pcs: PCS's deep health checks run NVIDIA DCGM and need NVIDIA GPUs; "
                      f"{queue.instance_type} has none. Remove gpu_health_checks")
            continue
        if pcs_health_checks_supported(spec):
            continue
        if explicit:
            error(("queues", index, "gpu_health_checks"),
                  f"not supported on pcs with Slurm {spec.slurm.version}: PCS instance health checks need Slurm "
                  "26.05 or later. Set slurm.version to 26.05, or gpu_health_checks: false")
        else:
            unsupported.append(queue.name)
    if unsupported:
        # The default must not make every 25.11 spec fail: it is off, and said so.
        warn(("slurm", "version"), f"PCS instance health checks need Slurm 26.05; on {spec.slurm.version} the GPU "
                                   f"queues {', '.join(unsupported)} run without them (use 26.05 to get them, or "
                                   "write gpu_health_checks: false to silence this)")


def _queues(spec: Spec, error: Report) -> None:
    for index, queue in enumerate(spec.queues):
        facts = catalog.instance(queue.instance_type)
        if queue.scratch_mount is not None and facts is not None and not facts.nvme_gb:
            error(("queues", index, "scratch_mount"), f"{queue.instance_type} has no instance-store NVMe to mount "
                                                      "as scratch: remove scratch_mount")
        if queue.scratch_mount in RESERVED_MOUNTS:
            error(("queues", index, "scratch_mount"), f"{queue.scratch_mount} is a system directory")


def _slurm_settings(spec: Spec, error: Report) -> None:
    if spec.backend == "pcs":
        for name in spec.slurm.custom_settings:
            problem = slurm_settings.pcs_problem(name, "cluster", spec.slurm.version)
            if problem:
                error(("slurm", "custom_settings", name), problem)
        for index, queue in enumerate(spec.queues):
            for name in queue.slurm_settings:
                problem = slurm_settings.pcs_problem(name, "queue", spec.slurm.version)
                if problem:
                    error(("queues", index, "slurm_settings", name), problem)
            if "OverSubscribe" in queue.slurm_settings and "job_exclusive" in queue.model_fields_set:
                error(("queues", index, "slurm_settings", "OverSubscribe"),
                      "job_exclusive already sets OverSubscribe: keep one of them")
    else:
        for name in spec.slurm.custom_settings:
            problem = slurm_settings.parallelcluster_problem(name, "cluster")
            if problem:
                error(("slurm", "custom_settings", name), problem)
        for index, queue in enumerate(spec.queues):
            for name in queue.slurm_settings:
                problem = slurm_settings.parallelcluster_problem(name, "queue")
                if problem:
                    error(("queues", index, "slurm_settings", name), problem)


def bootstrap_path(run: str, spec_file: str | None) -> Path:
    """A local bootstrap script, relative to the spec file's directory."""
    path = Path(run).expanduser()
    if not path.is_absolute() and spec_file:
        path = Path(spec_file).resolve().parent / path
    return path


def _bootstrap(spec: Spec, error: Report, spec_file: str | None) -> None:
    for index, script in enumerate(spec.bootstrap):
        for number, arg in enumerate(script.args):
            if "${" in arg:  # fmcluster's documents use ${…} for values AWS issues at create time
                error(("bootstrap", index, "args", number), "'${' is reserved in fmcluster's documents; write $NAME "
                                                            "without braces, or pass the value literally")
        path = ("bootstrap", index, "run")
        if script.run.startswith("s3://"):
            bucket, _, key = script.run[len("s3://"):].partition("/")
            if not bucket or not key or key.endswith("/"):
                error(path, f"'{script.run}' names no object: write s3://bucket/path/script.sh")
            continue
        if "://" in script.run:
            error(path, f"'{script.run}': give a local path or an s3:// URL (fmcluster uploads local files)")
            continue
        if PurePosixPath(script.run).name in ("", ".", ".."):
            error(path, f"'{script.run}' is not a file name")
            continue
        if not spec_file or not Path(spec_file).is_file():
            continue  # a recorded spec (state file): its scripts were checked when it was loaded from its file
        local = bootstrap_path(script.run, spec_file)
        if not local.is_file():
            error(path, f"{local}: no such file (local paths are relative to the spec file)")
