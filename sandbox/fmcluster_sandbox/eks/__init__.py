"""Amazon EKS emulator of the sandbox (moto serves only part of EKS, and makes everything ACTIVE at once).

The sandbox server hands it every request whose SigV4 credential scope names service ``eks`` (REST-JSON);
:class:`EksEmulator` answers it. References (subnets, security groups, launch templates, IAM roles) are
looked up in moto's in-process backends, and node group instances launch through the sandbox's EC2 rules.
"""

from fmcluster_sandbox.eks.emulator import EksEmulator
from fmcluster_sandbox.eks.nodes import CLUSTER_TAG, NODEGROUP_TAG

__all__ = ["CLUSTER_TAG", "NODEGROUP_TAG", "EksEmulator"]
