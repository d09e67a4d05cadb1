"""What runs on the nodes besides the scheduler: fmcluster's shipped scripts (``fmcluster/scripts/``: storage
mounts, NVMe scratch, Enroot + Pyxis, exporters, the Neuron driver on Trainium, the IMEX prolog of GB200
UltraServers) and the user's ``bootstrap`` scripts, for both backends.

ParallelCluster runs them as ``CustomActions.OnNodeConfigured`` from the cluster's S3 bucket, where fmcluster
uploads them (``bucket:scripts``). PCS runs them from the launch template's MIME user data: each script is
carried gzip'd and base64'd (user data is capped at 16 KB, and its text must hold no ``${…}`` other than
fmcluster's references), written under /opt/fmcluster and run with its arguments.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from fmcluster.engine.references import references
from fmcluster.errors import UsageError
from fmcluster.render.templates import render_text
from fmcluster.spec import decisions
from fmcluster.spec.models import Queue, Spec
from fmcluster.spec.rules_fields import bootstrap_path

SCRIPTS_DIR = Path(__file__).resolve().parents[2] / "scripts"  # fmcluster/scripts
# EC2 user data: 16 KB before base64 (EC2 user guide, "Run commands when you launch an EC2 instance").
USER_DATA_LIMIT = 16 * 1024
# The key prefix of everything fmcluster puts in the cluster's bucket.
BUCKET_PREFIX = "fmcluster/scripts"
SCRIPTS_BUCKET = "fmcluster-${fmcluster.cluster_id}"
# How documents name the bucket once it exists (the reference also orders the cluster after it).
BUCKET_REFERENCE = "${bucket.scripts.name}"


@dataclass(frozen=True)
class Step:
    """One script run on a node: where it comes from, the name it has there, and its arguments."""

    name: str  # file name on the node and in the bucket
    source: Path | None  # a local file (shipped or the user's); None for an s3:// script used as is
    args: tuple[str, ...] = ()
    s3_url: str | None = None
    # ParallelCluster's CustomActions event; PCS runs every step from user data, in order.
    event: str = "OnNodeConfigured"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(_read(self.source)).hexdigest() if self.source else ""

    def url(self) -> str:
        return self.s3_url or f"s3://{BUCKET_REFERENCE}/{BUCKET_PREFIX}/{self.name}"


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


@dataclass(frozen=True)
class NodeLayout:
    """Where a backend's nodes take what fmcluster installs at boot (each backend's renderer has one)."""

    backend: str  # the shipped scripts' backend argument
    # Where Slurm reads the IMEX prolog from: ParallelCluster's shared prolog.d is the head node's; PCS runs the
    # cluster's one Prolog on every compute node.
    imex_prolog_on_head: bool
    # Whether fmcluster formats and mounts the NVMe scratch (ParallelCluster mounts its EphemeralVolume itself).
    mounts_scratch: bool
    # Whether the head node keeps Slurm's topology.conf from EC2 topology (slurm_topology.py): ParallelCluster's
    # head node runs slurmctld; PCS runs it itself, out of reach.
    keeps_slurm_topology: bool = False


def head_steps(spec: Spec, spec_file: str, layout: NodeLayout) -> list[Step]:
    """The head node (ParallelCluster) or login node group (PCS)."""
    steps = []
    if layout.imex_prolog_on_head and decisions.imex_prolog(spec):
        steps.append(Step("imex_prolog.sh", shipped("imex_prolog.sh"), ("install", layout.backend)))
    if spec.software.containers:
        steps.append(Step("containers.sh", shipped("containers.sh"), (layout.backend,)))
    if spec.software.monitoring:
        steps.append(Step("monitoring.sh", shipped("monitoring.sh")))
    if layout.keeps_slurm_topology:
        # On every such head node, whatever the queues: ParallelCluster cannot change a head node's OnNodeStart or
        # OnNodeConfigured on a running cluster (update policy UNSUPPORTED: a new cluster), while TopologyPlugin
        # (CustomSlurmSettings) and the head node's policies change in place; the step acts only while Slurm runs
        # topology/tree. slurmctld starts during the bootstrap, before OnNodeConfigured, and topology/tree needs a
        # topology.conf to start with: an empty one first (OnNodeStart), the real one after.
        script = shipped("slurm_topology.py")
        steps.append(Step("slurm_topology.py", script, ("placeholder",), event="OnNodeStart"))
        steps.append(Step("slurm_topology.py", script, ("install", spec.name, spec.region)))
    return steps + _user_steps(spec, spec_file, ("head", "login"))


def compute_steps(spec: Spec, queue: Queue, spec_file: str, layout: NodeLayout) -> list[Step]:
    steps = []
    # A Prolog run on every compute node is installed on every one, first: a node that takes a job before the
    # file exists would be drained.
    if not layout.imex_prolog_on_head and decisions.imex_prolog(spec):
        steps.append(Step("imex_prolog.sh", shipped("imex_prolog.sh"), ("install", layout.backend)))
    if decisions.needs_neuron(queue):  # before anything that may use the accelerators
        steps.append(Step("neuron.sh", shipped("neuron.sh")))
    scratch = decisions.scratch_mount(queue)
    if layout.mounts_scratch and scratch:
        steps.append(Step("scratch.sh", shipped("scratch.sh"), (scratch,)))
    if spec.software.containers:
        steps.append(Step("containers.sh", shipped("containers.sh"), (layout.backend,)))
    if spec.software.monitoring:
        steps.append(Step("monitoring.sh", shipped("monitoring.sh")))
    return steps + _user_steps(spec, spec_file, ("compute",))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"bootstrap script {path}: {exc.strerror or exc} (local paths are relative to the spec "
                         "file)") from None


def packed(path: Path) -> str:
    """A script as gzip + base64: compact, and free of ``${`` (which the engine would read as a reference)."""
    return base64.b64encode(gzip.compress(_read(path), mtime=0)).decode()


def custom_actions(steps: list[Step]) -> dict | None:
    """ParallelCluster ``CustomActions`` for these steps (None when there are none)."""
    if not steps:
        return None
    actions: dict[str, dict] = {}
    for s in steps:
        actions.setdefault(s.event, {"Sequence": []})["Sequence"].append(
            {"Script": s.url(), **({"Args": list(s.args)} if s.args else {})})
    return actions


def bucket_objects(spec: Spec, spec_file: str, layout: NodeLayout) -> list[Step]:
    """Every local script the cluster's nodes run, once each: what goes into the bucket they fetch them from."""
    seen: dict[str, Step] = {}
    for step in head_steps(spec, spec_file, layout) + [
            s for q in spec.queues for s in compute_steps(spec, q, spec_file, layout)]:
        if step.source is not None:
            seen.setdefault(step.name, step)
    return list(seen.values())


def pcs_user_data(cluster: str, node_group: str, mounts: list[dict[str, str]], steps: list[Step]) -> str:
    """The MIME user data of one PCS node group: mount the shared storage, then run ``steps`` in order."""
    import shlex

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
        raise UsageError(f"the user data of PCS node group {node_group} is {len(text.encode()):,} bytes; EC2 takes "
                         f"{USER_DATA_LIMIT:,}. Move large bootstrap scripts to S3 (run: s3://…)")
    return text


def without_bucket(config: dict) -> dict:
    """``config`` without what names the bucket fmcluster makes at create time (CustomS3Bucket, the S3Access to
    it, the CustomActions run from it): what ParallelCluster's validators can judge before it exists."""
    import copy

    bucket_ref = BUCKET_REFERENCE[2:-1]
    config = copy.deepcopy(config)
    config.pop("CustomS3Bucket", None)
    for node in [config.get("HeadNode") or {}, *((config.get("Scheduling") or {}).get("SlurmQueues") or [])]:
        iam = node.get("Iam") or {}
        if "S3Access" in iam:
            iam["S3Access"] = [a for a in iam["S3Access"] if bucket_ref not in references(a)]
            if not iam["S3Access"]:
                del iam["S3Access"]
            if not iam:
                node.pop("Iam", None)
        actions = node.get("CustomActions") or {}
        for event in list(actions):
            sequence = [s for s in actions[event].get("Sequence", []) if bucket_ref not in references(s)]
            if sequence:
                actions[event]["Sequence"] = sequence
            else:
                del actions[event]
        if "CustomActions" in node and not actions:
            del node["CustomActions"]
    return config
