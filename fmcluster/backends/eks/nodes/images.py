"""Which EKS-optimized image a queue's nodes boot: the node group's ``amiType``, and the public SSM parameter AWS
publishes its AMI under (EKS guide, "Retrieve recommended Amazon Linux AMI IDs"). Only Amazon Linux 2023 images
carry the NVIDIA driver for GB200 on ARM, and AL2 images end with Kubernetes 1.32, so every node is AL2023."""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster.catalog.hardware import hardware
from fmcluster.spec import decisions
from fmcluster.spec.models import Queue
from fmcluster.spec.rules_fields import gpu_instance

# EKS guide, "Use EKS-optimized accelerated AMIs for GPU instances": the instance families each accelerated AL2023
# variant supports.
ACCELERATED_FAMILIES = {
    ("x86_64", "nvidia"): ("p6-b300", "p6-b200", "p5", "p5e", "p5en", "p4d", "p4de", "p3", "p3dn", "g7e", "gr6", "g6",
                           "g6e", "g6f", "gr6f", "g5", "g4dn"),
    ("arm64", "nvidia"): ("p6e-gb200", "p6e-gb300", "g5g"),
    ("x86_64", "neuron"): ("inf1", "inf2", "trn1", "trn2"),
}
GUIDE_PAGE = "EKS guide, 'Use EKS-optimized accelerated AMIs for GPU instances'"


@dataclass(frozen=True)
class NodeImage:
    ami_type: str  # CreateNodegroup amiType
    architecture: str  # the SSM parameter's path segment: x86_64 or arm64
    variant: str  # standard, nvidia or neuron

    def ssm_parameter(self, kubernetes_version: str) -> str:
        return (f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/{self.architecture}/"
                f"{self.variant}/recommended/image_id")

    def describe(self) -> str:
        return f"the EKS-optimized AL2023 {self.architecture} {self.variant} image ({self.ami_type})"

    def serves(self, instance_type: str) -> bool:
        """Whether AWS lists ``instance_type``'s family for this image (a standard image serves every family)."""
        families = ACCELERATED_FAMILIES.get((self.architecture, self.variant))
        return families is None or instance_type.split(".")[0] in families


def node_image(queue: Queue) -> NodeImage:
    """The image for the queue's instance type: NVIDIA where it has NVIDIA GPUs, Neuron on Trainium and Inferentia
    (x86_64 only: AWS publishes no ARM Neuron image), standard otherwise."""
    facts = hardware(queue.instance_type)
    arm = facts.architecture == "arm64"
    if decisions.needs_neuron(queue):
        return NodeImage("AL2023_x86_64_NEURON", "x86_64", "neuron")
    nvidia = gpu_instance(queue) is True or (facts.has_gpus and "nvidia" in (facts.accelerator_model or "").lower())
    if nvidia:
        return NodeImage("AL2023_ARM_64_NVIDIA", "arm64", "nvidia") if arm else \
            NodeImage("AL2023_x86_64_NVIDIA", "x86_64", "nvidia")
    return standard_image(facts.architecture or "x86_64")


def standard_image(architecture: str) -> NodeImage:
    """The EKS-optimized AL2023 standard image (no accelerator drivers) of ``architecture`` (x86_64 or arm64)."""
    return NodeImage("AL2023_ARM_64_STANDARD", "arm64", "standard") if architecture == "arm64" else \
        NodeImage("AL2023_x86_64_STANDARD", "x86_64", "standard")
