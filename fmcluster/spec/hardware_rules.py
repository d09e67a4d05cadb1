"""Rules about the machines themselves: images and UltraServers (each backend checks architectures, see
:mod:`fmcluster.spec.backend_rules`).

Each rule mirrors what AWS refuses, or what cannot work, and points at the field it is about.
"""

from __future__ import annotations

from collections.abc import Callable

from fmcluster import catalog
from fmcluster.catalog.hardware import hardware
from fmcluster.spec.backend_rules import backend_rules
from fmcluster.spec.decisions import NEURON_OS as NEURON_PACKAGE_OS
from fmcluster.spec.decisions import needs_neuron, operating_system, ultraserver_shape
from fmcluster.spec.models import Spec, max_nodes
from fmcluster.spec.positions import Path_

Report = Callable[[Path_, str], None]


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
    return backend_rules(spec.backend).build_advice(family, source)


def images(spec: Spec, error: Report, warn: Report) -> None:
    """image: exactly one of ami and family, and only the families the backend can boot as published."""
    image = spec.image
    if image is not None:
        if (image.ami is None) == (image.family is None):
            error(("image",), "give exactly one of image.ami (your own AMI) or image.family (an image AWS "
                              "publishes: pcs-sample)")
            return
        refused = backend_rules(spec.backend).family_problem(image.family or "")
        if refused:
            error(("image", "family"), refused)
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
    image = backend_rules(spec.backend).stock_images
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


HARDWARE_RULES = (images, ultraservers)
