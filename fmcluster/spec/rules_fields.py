"""Rules for storage, health checks, node software and per-queue scheduling: what each backend can honour, and
a refusal with the reason (and what to do instead) where it cannot.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

from fmcluster import catalog
from fmcluster.catalog.hardware import hardware
from fmcluster.spec import auto_repair
from fmcluster.spec.models import Queue, Spec
from fmcluster.spec.positions import Path_

Report = Callable[[Path_, str], None]

# ParallelCluster refuses these mount points for shared storage (pcluster/validators: SharedStorageMountDir).
RESERVED_MOUNTS = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/sbin", "/sys", "/usr", "/var")


def check(spec: Spec, error: Report, warn: Report, spec_file: str | None = None) -> None:
    _home(spec, error)
    _lustre_existing(spec, error)
    _queues(spec, error)
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


def nvidia_gpus(queue: Queue) -> bool:
    """Whether the queue's instances carry NVIDIA GPUs, as the catalog knows them."""
    facts = catalog.instance(queue.instance_type)
    return bool(facts and facts.accelerator and facts.accelerator.vendor == "nvidia")


def gpu_instance(queue: Queue) -> bool | None:
    """Whether the queue's instances carry GPUs; None for a type the catalog does not know."""
    facts = catalog.instance(queue.instance_type)
    return None if facts is None else facts.accelerator.kind == "gpu"


def _queues(spec: Spec, error: Report) -> None:
    for index, queue in enumerate(spec.queues):
        facts = catalog.instance(queue.instance_type)
        # The catalog's facts, else EC2's (shipped or read): a type known to have no instance store is refused.
        described = hardware(queue.instance_type) if facts is None else None
        no_nvme = (facts is not None and not facts.nvme_gb) or \
            (described is not None and described.source != "name" and not described.nvme_gb)
        if queue.scratch_mount is not None and no_nvme:
            error(("queues", index, "scratch_mount"), f"{queue.instance_type} has no instance-store NVMe to mount "
                                                      "as scratch: remove scratch_mount")
        if queue.scratch_mount in RESERVED_MOUNTS:
            error(("queues", index, "scratch_mount"), f"{queue.scratch_mount} is a system directory")
        both = auto_repair.contradiction(queue)
        if both:
            error(("queues", index, "auto_repair"), both)


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
