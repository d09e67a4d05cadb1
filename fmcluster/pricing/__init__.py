"""What a cluster costs, and the prices it is computed from: instance rates by capacity type (``rates``),
Capacity Block offerings (``capacity_blocks``), the created network's NAT gateway and public IPv4 address
(``network``), and the one cost model that ``plan``, ``create``, ``status`` and ``destroy`` share (``model``)."""
