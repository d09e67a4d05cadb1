"""Rules about the machines themselves: architectures, images and UltraServers.

Each rule mirrors what AWS refuses, or what cannot work, and points at the field it is about.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fmcluster import catalog
from fmcluster.catalog.hardware import hardware
from fmcluster.spec.decisions import NEURON_OS as NEURON_PACKAGE_OS
from fmcluster.spec.decisions import PCS_IMEX_PROLOG, needs_imex, needs_neuron, operating_system, ultraserver_shape
from fmcluster.spec.models import Spec, max_nodes
from fmcluster.spec.positions import Path_

Report = Callable[[Path_, str], None]
_FAMILY = re.compile(r"^(?P<letters>[a-z]+)(?P<generation>\d+)[a-z-]*\.(?P<size>.+)$")


def _counterpart(instance_type: str, architecture: str) -> str | None:
    """The same family and size on the other architecture (m7i.2xlarge <-> m7g.2xlarge), as a hint only."""
    match = _FAMILY.match(instance_type)
    if not match or match["letters"] not in ("m", "c", "r"):
        return None
    suffix = "g" if architecture == "arm64" else "i"
    return f"{match['letters']}{match['generation']}{suffix}.{match['size']}"


def architectures(spec: Spec, error: Report, warn: Report) -> None:
    """ParallelCluster runs one OS image on the head node and every compute node: its
    InstanceArchitectureCompatibilityValidator (pcluster/validators/cluster_validators.py) fails a cluster whose
    compute types do not support the head node's architecture. PCS gives every node group its own AMI
    (CreateComputeNodeGroup amiId), so x86_64 and arm64 node groups live in one cluster; one image.ami for all
    of them cannot, because an AMI has one architecture (DescribeImages Architecture)."""
    head = hardware(spec.head_node.instance_type)
    if spec.backend == "parallelcluster":
        for index, queue in enumerate(spec.queues):
            compute = hardware(queue.instance_type)
            if None in (head.architecture, compute.architecture) or compute.architecture == head.architecture:
                continue
            hint = _counterpart(spec.head_node.instance_type, compute.architecture or "")
            fix = f"set head_node.instance_type to an {compute.architecture} type" + (
                f" such as {hint}" if hint else "")
            error(("queues", index, "instance_type"),
                  f"{queue.instance_type} is {compute.architecture} but the head node ({spec.head_node.instance_type}) "
                  f"is {head.architecture}: ParallelCluster boots one image on every node and refuses compute types "
                  f"of another architecture than the head node's; {fix}, or use the pcs backend")
        return
    if spec.image is None or spec.image.ami is None:
        return
    for index, queue in enumerate(spec.queues):
        compute = hardware(queue.instance_type)
        if None in (head.architecture, compute.architecture) or compute.architecture == head.architecture:
            continue
        error(("queues", index, "instance_type"),
              f"{queue.instance_type} is {compute.architecture} but the login node ({spec.head_node.instance_type}) "
              f"is {head.architecture}, and image.ami is one AMI for every node group (an AMI has one "
              "architecture): use an image.family that AWS publishes for both, or a login type of the same "
              "architecture")



# The SSM public parameters AWS publishes for its deep-learning images:
# DLAMI Developer Guide, "Find the DLAMI ID" (find-dlami-id.html):
#   /aws/service/deeplearning/ami/{x86_64|arm64}/base-oss-nvidia-driver-gpu-{ubuntu-22.04|ubuntu-24.04|
#   amazon-linux-2023}/latest/ami-id
# Neuron documentation, "Neuron DLAMI User Guide", "Using SSM parameters to find DLAMI id" (x86_64 only):
#   /aws/service/neuron/dlami/multi-framework/{ubuntu-22.04|amazon-linux-2023}/latest/image_id
DLAMI_OS = {"ubuntu2204": "ubuntu-22.04", "ubuntu2404": "ubuntu-24.04", "alinux2023": "amazon-linux-2023"}
NEURON_OS = {"ubuntu2204": "ubuntu-22.04", "alinux2023": "amazon-linux-2023"}


def dlami_parameter(architecture: str, os: str) -> str | None:
    part = DLAMI_OS.get(os)
    return f"/aws/service/deeplearning/ami/{architecture}/base-oss-nvidia-driver-gpu-{part}/latest/ami-id" \
        if part else None


def neuron_parameter(os: str) -> str | None:
    part = NEURON_OS.get(os)
    return f"/aws/service/neuron/dlami/multi-framework/{part}/latest/image_id" if part else None


def _build_advice(spec: Spec, family: str) -> str:
    os = operating_system(spec)
    arch = hardware(spec.queues[0].instance_type).architecture or "x86_64"
    parameter = dlami_parameter(arch, os) if family == "dlami" else neuron_parameter(os)
    source = f" (AWS publishes it as the SSM parameter {parameter})" if parameter else ""
    if spec.backend == "parallelcluster":
        return (f"ParallelCluster boots only images that carry its cookbook: build one with `pcluster build-image` "
                f"whose Build.ParentImage is the {family} image{source}, then set image.ami to it")
    return (f"PCS nodes need the PCS agent and Slurm installed (PCS user guide, 'Custom Amazon Machine Images for "
            f"AWS PCS'): build an AMI from the {family} image{source} with them, then set image.ami to it")


def images(spec: Spec, error: Report, warn: Report) -> None:
    """image: exactly one of ami and family, and only the families the backend can boot as published."""
    image = spec.image
    if image is not None:
        if (image.ami is None) == (image.family is None):
            error(("image",), "give exactly one of image.ami (your own AMI) or image.family (an image AWS "
                              "publishes: pcs-sample)")
            return
        if image.family == "pcs-sample" and spec.backend == "parallelcluster":
            error(("image", "family"), "AWS's PCS sample AMIs carry the PCS agent, not ParallelCluster's cookbook; "
                                       "ParallelCluster boots its own official AMIs for `os` (remove image)")
        elif image.family in ("dlami", "neuron"):
            name = "Deep Learning AMI" if image.family == "dlami" else "Neuron DLAMI"
            error(("image", "family"), f"AWS's {name} cannot boot {spec.backend} nodes as published: "
                                       f"{_build_advice(spec, image.family)}")
    if image is not None and image.ami is not None:
        return
    _neuron(spec, error, warn)


def _neuron(spec: Spec, error: Report, warn: Report) -> None:
    """Neither backend's default image has the Neuron driver: fmcluster installs it at boot where AWS publishes
    its packages (fmcluster/scripts/neuron.sh), and says so."""
    queues = [(index, queue) for index, queue in enumerate(spec.queues) if needs_neuron(queue)]
    if not queues:
        return
    index, queue = queues[0]
    os = operating_system(spec)
    image = "AWS's PCS sample AMIs" if spec.backend == "pcs" else "ParallelCluster's official AMIs"
    if os not in NEURON_PACKAGE_OS:
        error(("os",), f"{queue.instance_type} needs the Neuron driver, which {image} do not carry and AWS publishes "
                       f"only for {', '.join(NEURON_PACKAGE_OS)}: choose one of those, or set image.ami to an image "
                       "with Neuron installed")
        return
    parameter = neuron_parameter(os)
    warn(("queues", index, "instance_type"),
         f"{image} carry no Neuron driver: fmcluster installs it from AWS's Neuron repositories as each "
         f"{queue.instance_type} node starts (fmcluster/scripts/neuron.sh; a few minutes per node). For faster starts "
         f"set image.ami to your own image built from the Neuron DLAMI (SSM parameter {parameter})")


def ultraservers(spec: Spec, error: Report, warn: Report) -> None:
    """An UltraServer Capacity Block is bought, and launched, in whole UltraServers of one instance type
    (DescribeCapacityBlockOfferings UltraserverType/UltraserverCount; sizes from the catalog's UltraServer facts)."""
    for index, queue in enumerate(spec.queues):
        name = queue.capacity.ultraserver
        path = ("queues", index, "capacity", "ultraserver")
        if name is None:
            facts = catalog.instance(queue.instance_type)
            if facts is not None and facts.is_ultraserver_only and facts.ultraserver is not None:
                sizes = ", ".join(f"{n} ({t.instances} instances)" for n, t in facts.ultraserver.types.items())
                warn(("queues", index, "instance_type"),
                     f"{queue.instance_type} is sold only in EC2 UltraServers ({sizes}): set capacity.ultraserver to "
                     "size the queue in whole UltraServers and see its NVLink / NeuronLink domains in plan")
            continue
        if queue.capacity.type != "capacity-block":
            error(path, f"UltraServers are sold only as Capacity Blocks: set capacity.type: capacity-block, not "
                        f"'{queue.capacity.type}'")
            continue
        shape = ultraserver_shape(name)
        if shape is None or shape.instance_type != queue.instance_type:
            member = f"{shape.instance_type} instances" if shape else "other instances"
            error(path, f"{name} is made of {member}, not {queue.instance_type}")
            continue
        nodes = max_nodes(queue)
        if nodes % shape.instances:
            below, above = nodes // shape.instances * shape.instances, -(-nodes // shape.instances) * shape.instances
            hint = f"{below} or {above}" if below else f"{above}"
            error(("queues", index, "nodes"), f"{nodes} nodes is not a whole number of {name} UltraServers "
                                              f"({shape.instances} {shape.instance_type} each): use {hint}")


def imex(spec: Spec, error: Report, warn: Report) -> None:
    """GB200 UltraServer queues get fmcluster's IMEX prolog (fmcluster/scripts/imex_prolog.sh): on ParallelCluster
    in its shared prolog.d, on PCS as the cluster's one Slurm Prolog, which then cannot be the user's too."""
    queues = [(index, queue) for index, queue in enumerate(spec.queues) if needs_imex(queue)]
    if not queues or spec.backend != "pcs":
        return
    names = ", ".join(queue.name for _, queue in queues)
    if "Prolog" in spec.slurm.custom_settings:
        error(("slurm", "custom_settings", "Prolog"),
              f"not supported on pcs with queue {names}: PCS takes one cluster Prolog, and NVLink across the "
              f"UltraServer's instances needs fmcluster's IMEX prolog there ({PCS_IMEX_PROLOG}); run your prolog's "
              "work from a bootstrap script, or use the parallelcluster backend (its prolog.d runs several)")
    if spec.slurm.version < "25.05":
        error(("slurm", "version"), f"queue {names} needs IMEX configured per job, which AWS PCS supports from "
                                    "Slurm 25.05 (PCS user guide, 'Configure UltraServer instances'): use 25.05 or "
                                    "later")
    index, _ = queues[0]
    warn(("queues", index, "instance_type"),
         "fmcluster makes its IMEX prolog the cluster's Slurm Prolog; the image must carry the NVIDIA driver, CUDA "
         "and an enabled nvidia-imex service (PCS user guide, 'Configure UltraServer instances'). A node without "
         "them runs jobs without NVLink across instances and says so in /var/log/fmcluster-imex-prolog.log")


HARDWARE_RULES = (architectures, images, ultraservers, imex)
