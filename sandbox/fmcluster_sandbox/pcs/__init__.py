"""AWS Parallel Computing Service emulator of the sandbox (moto has no PCS).

The sandbox server hands it every request whose ``X-Amz-Target`` is ``AWSParallelComputingService.<Op>``
(awsJson1_0); :class:`PcsEmulator` answers it. References (subnets, security groups, launch templates,
instance profiles, capacity reservations) are looked up in moto's in-process backends and the sandbox's
own EC2 stores, and nodes launch through the sandbox's EC2 rules.
"""

from fmcluster_sandbox.pcs.emulator import PcsEmulator
from fmcluster_sandbox.pcs.nodes import CLUSTER_TAG, NODE_GROUP_TAG

__all__ = ["CLUSTER_TAG", "NODE_GROUP_TAG", "PcsEmulator"]
