"""What runs on the nodes besides the scheduler: fmcluster's shipped scripts (``fmcluster/scripts/``: storage
mounts, NVMe scratch, Enroot + Pyxis, exporters) and the user's ``bootstrap`` scripts, for both backends.

ParallelCluster runs them as ``CustomActions.OnNodeConfigured`` from the cluster's S3 bucket, where fmcluster
uploads them (``s3_bucket:scripts``). PCS runs them from the launch template's MIME user data: each script is
carried gzip'd and base64'd (user data is capped at 16 KB, and its text must hold no ``${…}`` other than
fmcluster's references), written under /opt/fmcluster and run with its arguments.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from fmcluster.spec import decisions
from fmcluster.spec.models import Queue, Spec
from fmcluster.spec.rules_fields import bootstrap_path

SCRIPTS_DIR = Path(__file__).resolve().parent.parent / "scripts"
# EC2 user data: 16 KB before base64 (EC2 user guide, "Run commands when you launch an EC2 instance").
USER_DATA_LIMIT = 16 * 1024
# The key prefix of everything fmcluster puts in the cluster's bucket.
BUCKET_PREFIX = "fmcluster/scripts"
SCRIPTS_BUCKET = "fmcluster-${fmcluster.cluster_id}"


@dataclass(frozen=True)
class Step:
    """One script run on a node: where it comes from, the name it has there, and its arguments."""

    name: str  # file name on the node and in the bucket
    source: Path | None  # a local file (shipped or the user's); None for an s3:// script used as is
    args: tuple[str, ...] = ()
    s3_url: str | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.read_bytes()).hexdigest() if self.source else ""

    def url(self) -> str:
        return self.s3_url or f"s3://{SCRIPTS_BUCKET}/{BUCKET_PREFIX}/{self.name}"


@dataclass
class NodeSteps:
    steps: list[Step] = field(default_factory=list)


def shipped(name: str) -> Path:
    return SCRIPTS_DIR / name


def _user_steps(spec: Spec, spec_file: str, targets: tuple[str, ...]) -> list[Step]:
    steps = []
    for index, script in enumerate(spec.bootstrap):
        if script.on not in targets:
            continue
        if script.run.startswith("s3://"):
            steps.append(Step(f"bootstrap-{index}", None, tuple(script.args), s3_url=script.run))
        else:
            path = bootstrap_path(script.run, spec_file)
            steps.append(Step(f"bootstrap-{index}-{path.name}", path, tuple(script.args)))
    return steps


def head_steps(spec: Spec, spec_file: str, backend: str) -> list[Step]:
    """The head node (ParallelCluster) or login node group (PCS)."""
    steps = []
    if spec.software.containers:
        steps.append(Step("containers.sh", shipped("containers.sh"), (backend,)))
    if spec.software.monitoring:
        steps.append(Step("monitoring.sh", shipped("monitoring.sh")))
    return steps + _user_steps(spec, spec_file, ("head", "login"))


def compute_steps(spec: Spec, queue: Queue, spec_file: str, backend: str) -> list[Step]:
    steps = []
    scratch = decisions.scratch_mount(queue)
    if backend == "pcs" and scratch:  # ParallelCluster mounts its EphemeralVolume itself
        steps.append(Step("scratch.sh", shipped("scratch.sh"), (scratch,)))
    if spec.software.containers:
        steps.append(Step("containers.sh", shipped("containers.sh"), (backend,)))
    if spec.software.monitoring:
        steps.append(Step("monitoring.sh", shipped("monitoring.sh")))
    return steps + _user_steps(spec, spec_file, ("compute",))


@functools.cache
def _packed(path: Path, mtime: float) -> str:
    return base64.b64encode(gzip.compress(path.read_bytes(), mtime=0)).decode()


def packed(path: Path) -> str:
    """A script as gzip + base64: compact, and free of ``${`` (which the engine would read as a reference)."""
    return _packed(path, path.stat().st_mtime)


def custom_actions(steps: list[Step]) -> dict | None:
    """ParallelCluster ``CustomActions`` for these steps (None when there are none)."""
    if not steps:
        return None
    return {"OnNodeConfigured": {"Sequence": [{"Script": s.url(), **({"Args": list(s.args)} if s.args else {})}
                                              for s in steps]}}


def bucket_objects(spec: Spec, spec_file: str) -> list[Step]:
    """Every local script a ParallelCluster cluster runs, once each: what goes into the bucket."""
    seen: dict[str, Step] = {}
    for step in head_steps(spec, spec_file, "parallelcluster") + [
            s for q in spec.queues for s in compute_steps(spec, q, spec_file, "parallelcluster")]:
        if step.source is not None:
            seen.setdefault(step.name, step)
    return list(seen.values())


def pcs_user_data(cluster: str, node_group: str, mounts: list[dict[str, str]], steps: list[Step]) -> str:
    """The MIME user data of one PCS node group: mount the shared storage, then run ``steps`` in order."""
    import shlex

    from fmcluster.render.templates import render_text

    scripts = []
    if mounts:
        scripts.append({"name": "mount_storage.sh", "packed": packed(shipped("mount_storage.sh"))})
    commands = []
    for step in steps:
        if step.source is not None:
            scripts.append({"name": step.name, "packed": packed(step.source)})
        else:
            commands.append(f"aws s3 cp {shlex.quote(step.s3_url or '')} /opt/fmcluster/{step.name}")
            commands.append(f"chmod 0755 /opt/fmcluster/{step.name}")
        commands.append(" ".join([f"/opt/fmcluster/{step.name}", *(shlex.quote(a) for a in step.args)]))
    text = render_text("pcs/user_data.mime.j2", cluster=cluster, node_group=node_group, scripts=scripts,
                       mounts=mounts, commands=commands)
    if len(text.encode()) > USER_DATA_LIMIT:
        from fmcluster.errors import UsageError

        raise UsageError(f"the user data of PCS node group {node_group} is {len(text.encode()):,} bytes; EC2 takes "
                         f"{USER_DATA_LIMIT:,}. Move large bootstrap scripts to S3 (run: s3://…)")
    return text
