"""The sandbox's network layout: where each instance (and each Capacity Reservation's capacity) hangs in the AWS
network, as EC2 topology describes it.

AWS publishes the shape, not the wiring ("How Amazon EC2 topology works", EC2 user guide): the network is a
hierarchy of layers, an instance's topology is "a set of nodes, with one node in each layer", listed top-down with
"the bottom node connected to an instance", and "more than one instance can connect to the same node". Which
instance types have a topology, and how many layers it has, is the prerequisites page's list
("Prerequisites for Amazon EC2 topology", "Instance types"): :data:`THREE_LAYER_TYPES` return 3 network nodes,
:data:`FOUR_LAYER_TYPES` 4 (the UltraServer types p6e-gb200 and trn2u are in the 3-node list). The network nodes
"are hashed based on your account" (EC2 API reference, InstanceTopology ``NetworkNodes``): ids are ``nn-`` and 17
hex digits of a hash of the account, the zone and the node's place, like the EKS guide's example
``nn-e50490a237cb0f01a``.

The wiring is the sandbox's choice, fixed so tests can predict it. Per account and zone, capacity fills *slots* in
order: :data:`INSTANCES_PER_LEAF` slots per bottom (layer-3) node, :data:`LEAVES_PER_MIDDLE` of those under each
middle (layer-2) node, :data:`MIDDLES_PER_SPINE` middles under each spine (layer-1), so a spine holds
:data:`SLOTS_PER_SPINE` instances and a 16-node p5 queue launched into a zone spans two spines. A 4-layer type hangs
off its own layer-4 node under its slot's leaf. Slots are taken at launch by instances of the topology types
(others take none) and never reused: a replaced instance lands on the next free slot. A Capacity Reservation (ODCR or
Capacity Block) of a topology type takes its slots the first time its topology is asked for or an instance launches
into it; instances launched into it then take the reservation's slots, which is what "the relative proximity of
your capacity ... before it is launched" (DescribeCapacityReservationTopology) promises.

The fault ``topology_move`` (:class:`fmcluster_sandbox.faults.Faults`) moves a running instance to another bottom
node of its zone, as if AWS had re-homed it.
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field
from typing import Any

# "Prerequisites for Amazon EC2 topology", Instance types: "Returns 3* network nodes in the response".
THREE_LAYER_TYPES = frozenset({
    "g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge",
    "g6e.48xlarge", "g7e.2xlarge", "g7e.4xlarge", "g7e.8xlarge", "g7e.12xlarge", "g7e.24xlarge", "g7e.48xlarge",
    "hpc6a.48xlarge", "hpc6id.32xlarge", "hpc7g.4xlarge", "hpc7g.8xlarge", "hpc7g.16xlarge", "hpc7a.12xlarge",
    "hpc7a.24xlarge", "hpc7a.48xlarge", "hpc7a.96xlarge", "hpc8a.96xlarge",
    "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "p6e-gb200.36xlarge",
    "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge",
})
# Same page: "Returns 4* network nodes in the response".
FOUR_LAYER_TYPES = frozenset({"p6-b200.48xlarge", "p6-b300.48xlarge"})
# EC2 API reference, CapacityReservationTopology NetworkNodes: empty "if the Capacity Reservation is in a state other
# than active or pending".
RESERVATION_STATES = ("active", "pending")

INSTANCES_PER_LEAF = 2
LEAVES_PER_MIDDLE = 2
MIDDLES_PER_SPINE = 2
SLOTS_PER_SPINE = INSTANCES_PER_LEAF * LEAVES_PER_MIDDLE * MIDDLES_PER_SPINE

NODE_ID = re.compile(r"nn-[0-9a-f]{17}")


def layers(instance_type: str) -> int:
    """How many network nodes DescribeInstanceTopology gives an instance of this type; 0 when it gives none."""
    return 4 if instance_type in FOUR_LAYER_TYPES else 3 if instance_type in THREE_LAYER_TYPES else 0


def _node(account: str, zone: str, *place: int) -> str:
    digest = hashlib.sha256(f"{account}|{zone}|{'.'.join(map(str, place))}".encode()).hexdigest()
    return "nn-" + digest[:17]


def path(account: str, zone: str, slot: int, depth: int) -> list[str]:
    """The network nodes, top-down, of ``slot`` in ``zone`` for a type with ``depth`` layers."""
    leaf = slot // INSTANCES_PER_LEAF
    middle = leaf // LEAVES_PER_MIDDLE
    spine = middle // MIDDLES_PER_SPINE
    nodes = [_node(account, zone, spine), _node(account, zone, spine, middle),
             _node(account, zone, spine, middle, leaf)]
    if depth == 4:
        nodes.append(_node(account, zone, spine, middle, leaf, slot))
    return nodes


@dataclass
class _Zone:
    filled: int = 0  # slots handed out so far
    slots: dict[str, int] = field(default_factory=dict)  # instance id -> slot
    depth: dict[str, int] = field(default_factory=dict)  # instance id -> layers of its type
    reserved: dict[str, list[int]] = field(default_factory=dict)  # reservation id -> its slots
    bottoms: dict[str, list[str]] = field(default_factory=dict)  # bottom node id -> its path

    def take(self, account: str, zone: str, count: int) -> list[int]:
        taken = list(range(self.filled, self.filled + count))
        self.filled += count
        for slot in taken:  # every bottom node of the spines in use, so a move can name an empty one
            first = slot // SLOTS_PER_SPINE * SLOTS_PER_SPINE
            for other in range(first, first + SLOTS_PER_SPINE):
                for depth in (3, 4):
                    nodes = path(account, zone, other, depth)
                    self.bottoms.setdefault(nodes[-1], nodes)
        return taken


class Layout:
    """Slots per (account, zone); thread-safe."""

    def __init__(self) -> None:
        self._zones: dict[tuple[str, str], _Zone] = {}
        self._lock = threading.RLock()

    def reset(self) -> None:
        with self._lock:
            self._zones.clear()

    def _zone(self, account: str, zone: str) -> _Zone:
        return self._zones.setdefault((account, zone), _Zone())

    def reservation_slots(self, account: str, zone: str, reservation_id: str, count: int) -> list[int]:
        """The slots of a reservation's capacity, taken the first time they are needed."""
        with self._lock:
            place = self._zone(account, zone)
            if reservation_id not in place.reserved:
                place.reserved[reservation_id] = place.take(account, zone, count)
            return list(place.reserved[reservation_id])

    def place(self, account: str, zone: str, instance_id: str, instance_type: str,
              reservation: tuple[str, int] | None) -> None:
        """Give a newly launched instance of a topology type its slot: the next free one of its reservation
        (``(id, size)``), else the zone's next."""
        depth = layers(instance_type)
        if not depth:
            return
        with self._lock:
            place = self._zone(account, zone)
            slot = None
            if reservation is not None:
                used = set(place.slots.values())
                slot = next((s for s in self.reservation_slots(account, zone, *reservation) if s not in used), None)
            place.slots[instance_id] = slot if slot is not None else place.take(account, zone, 1)[0]
            place.depth[instance_id] = depth

    def nodes(self, account: str, zone: str, instance_id: str, moved_to: str | None = None) -> list[str]:
        """The instance's network nodes, top-down; [] when it has no slot (not a topology type)."""
        with self._lock:
            place = self._zones.get((account, zone))
            if place is None or instance_id not in place.slots:
                return []
            depth = place.depth[instance_id]
            if moved_to and len(place.bottoms.get(moved_to, ())) == depth:
                return list(place.bottoms[moved_to])
            return path(account, zone, place.slots[instance_id], depth)

    def check_move(self, instance_id: str, target: str) -> None:
        """ValueError unless ``instance_id`` has a slot and ``target`` is a bottom node of its zone at its depth."""
        if not NODE_ID.fullmatch(str(target)):
            raise ValueError(f"topology_move {instance_id}: {target!r} is not a network node id (nn- and 17 hex)")
        with self._lock:
            for (_account, zone), place in self._zones.items():
                if instance_id in place.slots:
                    if len(place.bottoms.get(target, ())) != place.depth[instance_id]:
                        raise ValueError(f"topology_move {instance_id}: {target} is not a bottom-layer network node "
                                         f"of {zone} for its instance type")
                    return
        raise ValueError(f"topology_move: {instance_id} is not an instance with a topology")


#: The sandbox's one layout: RunInstances (through :func:`install`), the topology APIs and EKS nodes share it.
LAYOUT = Layout()


def labels(account: str, zone: str, instance_id: str, moved_to: str | None = None) -> dict[str, str]:
    """``topology.k8s.aws/network-node-layer-N`` for each of the instance's network nodes (EKS user guide, "Place
    distributed AI/ML workloads with network topology labels"); {} for a type without topology."""
    nodes = LAYOUT.nodes(account, zone, instance_id, moved_to)
    return {f"topology.k8s.aws/network-node-layer-{n}": node for n, node in enumerate(nodes, start=1)}


_installed = False


def install() -> None:
    """Give every launched instance its slot (idempotent; after the other RunInstances wrappers, so that the
    instances are already counted against their reservation)."""
    global _installed
    if _installed:
        return
    from moto.ec2.models.instances import InstanceBackend

    from fmcluster_sandbox import capacity_reservations

    inner = InstanceBackend.run_instances

    def run_instances(self: Any, image_id, count, user_data, security_group_names, **kwargs):
        reservation = inner(self, image_id, count, user_data, security_group_names, **kwargs)
        for instance in reservation.instances:
            held = capacity_reservations.REGISTRY.holding(instance.id)
            LAYOUT.place(self.account_id, instance.placement.zone, instance.id, instance.instance_type,
                         (held.reservation_id, held.total) if held is not None else None)
        return reservation

    InstanceBackend.run_instances = run_instances
    _installed = True
