"""How many network layers EC2 topology (DescribeInstanceTopology, DescribeCapacityReservationTopology) returns for
an instance type: 0 for a type AWS gives no topology.

Hand-typed from the EC2 user guide, "Prerequisites for Amazon EC2 topology", Instance types: the types listed under
"Returns 3* network nodes in the response" and under "Returns 4* network nodes in the response" (the UltraServer
types p6e-gb200 and trn2u are in the 3-node list). Each network node is one layer, top-down; EKS labels a node of
such a type ``topology.k8s.aws/network-node-layer-1`` .. ``-N`` (EKS user guide, "Place distributed AI/ML workloads
with network topology labels").

Public API::

    network_layers("p5.48xlarge")      -> 3
    network_layers("p6-b200.48xlarge") -> 4
    network_layers("m7i.large")        -> 0
"""

from __future__ import annotations

SOURCE = 'EC2 user guide, "Prerequisites for Amazon EC2 topology", Instance types'

# "Returns 3* network nodes in the response".
THREE_LAYER_TYPES = frozenset({
    "g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge",
    "g6e.48xlarge", "g7e.2xlarge", "g7e.4xlarge", "g7e.8xlarge", "g7e.12xlarge", "g7e.24xlarge", "g7e.48xlarge",
    "hpc6a.48xlarge", "hpc6id.32xlarge", "hpc7g.4xlarge", "hpc7g.8xlarge", "hpc7g.16xlarge", "hpc7a.12xlarge",
    "hpc7a.24xlarge", "hpc7a.48xlarge", "hpc7a.96xlarge", "hpc8a.96xlarge",
    "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "p6e-gb200.36xlarge",
    "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge",
})
# "Returns 4* network nodes in the response".
FOUR_LAYER_TYPES = frozenset({"p6-b200.48xlarge", "p6-b300.48xlarge"})


def network_layers(instance_type: str) -> int:
    """The number of network nodes EC2 topology returns for an instance of ``instance_type`` (0: none)."""
    if instance_type in FOUR_LAYER_TYPES:
        return 4
    return 3 if instance_type in THREE_LAYER_TYPES else 0
