"""Fault model of the sandbox: latencies, throttling, missing capacity and forced failed statuses.

One ``Faults`` instance per sandbox process, shared by the HTTP server (per-call delays, throttling of
every service) and the PCS emulator (transition latencies, capacity, forced statuses).
"""

from __future__ import annotations

import json
import random
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fmcluster_sandbox.kube.fake_tools import DCGM_TESTS

LATENCY_KINDS = ("pcs.cluster", "pcs.compute_node_group", "pcs.queue", "eks.cluster", "eks.nodegroup", "eks.addon")
FAIL_KINDS = ("cluster", "compute_node_group", "queue", "pcluster_stack", "eks_cluster", "eks_nodegroup", "eks_addon")
# Kinds whose only possible forced status is a failed creation (ParallelCluster's stack, by cluster name; an EKS
# cluster, whose failed state is FAILED).
CREATE_ONLY_KINDS = ("pcluster_stack", "eks_cluster")
# EKS node groups and add-ons fail a create or a delete (their statuses CREATE_FAILED, DELETE_FAILED).
CREATE_OR_DELETE_KINDS = ("eks_nodegroup", "eks_addon")
FAILABLE_STATUSES = (
    "CREATE_FAILED",
    "UPDATE_FAILED",
    "DELETE_FAILED",
    "SUSPENDING",
    "SUSPENDED",
)


def _default_latency() -> dict[str, float]:
    return {kind: 0.0 for kind in LATENCY_KINDS}


@dataclass
class Faults:
    """Injected behaviour of the sandbox.

    - ``latency``: seconds a PCS or EKS resource stays CREATING/UPDATING/DELETING (keys ``pcs.cluster``,
      ``pcs.compute_node_group``, ``pcs.queue``, ``eks.cluster``, ``eks.nodegroup``, ``eks.addon``) and
      per-call delays ``call.<service>.<Operation>``
      (``call.<service>.*`` applies to every operation of a service).
    - ``throttle_rate``: service name (or ``*``) -> probability 0..1 that a call is throttled.
    - ``insufficient_capacity``: EC2 instance types without capacity.
    - ``fail_status``: ``"<kind>:<name or id>"`` -> status forced at the end of the matching transition
      (``CREATE_FAILED`` ends a create, ``UPDATE_FAILED`` an update, ``DELETE_FAILED`` a delete; any
      other status replaces ``ACTIVE`` at the end of a create). PCS kinds: ``cluster``,
      ``compute_node_group``, ``queue``. ``"pcluster_stack:<cluster name>": "CREATE_FAILED"`` (the only
      status for that kind) makes ParallelCluster's stack for that cluster fail as a head-node bootstrap
      failure does: its wait condition receives a FAILURE signal, then the stack goes ``CREATE_FAILED`` or
      rolls back, as the CreateStack asked (see :mod:`fmcluster_sandbox.pcluster_support`).
      EKS kinds, by name: ``eks_cluster`` (``CREATE_FAILED`` only: the cluster ends its create ``FAILED``),
      ``eks_nodegroup`` and ``eks_addon`` (``CREATE_FAILED`` or ``DELETE_FAILED``).
    - ``capacity_block_health``: a Capacity Block's id (``cb-…``) or its reservation's (``cr-…``) ->
      ``{"interconnect_status": "ok" | "impaired" | "insufficient-data", "unavailable": N}``, what
      DescribeCapacityBlockStatus then answers for it (:mod:`fmcluster_sandbox.capacity_block_status`).
    - ``topology_move``: an instance id (``i-…``) -> a bottom-layer network node id (``nn-…``) of its zone: the
      instance then hangs off that node in DescribeInstanceTopology and its EKS node's
      ``topology.k8s.aws/network-node-layer-*`` labels (:mod:`fmcluster_sandbox.topology`), as if AWS had moved
      it; ``null`` moves it back. The server refuses a move of an instance without topology, or to a node that is
      not a bottom node of the instance's zone.
    - ``node_health``: an EKS node's name or its instance id -> ``{"gpus_missing": n, "efa_devices_missing": n,
      "never_finishes": true, "dcgm_failures": [{"gpu": i, "test": "memory"}]}``: what the tools of the workloads
      the sandbox runs there find (:mod:`fmcluster_sandbox.kube.node_health`); ``dcgm_failures`` makes that test of
      ``dcgmi diag`` fail on GPU ``i`` when the run level includes it (a name ``dcgmi diag`` does not run is refused,
      naming those it does); ``"until_reboot": true`` (on an instance id only) makes the node's faults go when EC2
      RebootInstances reboots that instance, a fault a reboot clears; ``null`` makes the node healthy again.
    - ``slow_link``: ``["<node a>", "<node b>", factor]``, a link between two nodes (names or instance ids) that
      runs at ``factor`` (0 < factor <= 1) of its speed in an all-reduce spanning both; ``null`` removes it.
    - ``nccl_replay_larger_runs``: ``true`` lets an all-reduce over more nodes than any capture of its type replay
      the type's 2-node capture, for a test that compares runs of one size with each other (burn-in's narrowing).
      A model no one measured, off by default: a smoke test then still fails on a node count with no capture.
    """

    seed: int = 0
    latency: dict[str, float] = field(default_factory=_default_latency)
    throttle_rate: dict[str, float] = field(default_factory=dict)
    insufficient_capacity: set[str] = field(default_factory=set)
    fail_status: dict[str, str] = field(default_factory=dict)
    capacity_block_health: dict[str, dict[str, Any]] = field(default_factory=dict)
    topology_move: dict[str, str] = field(default_factory=dict)
    node_health: dict[str, dict[str, Any]] = field(default_factory=dict)
    slow_link: list[Any] | None = None
    nccl_replay_larger_runs: bool = False

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        # ``call.<service>.<Operation>`` -> {"started": n, "answered": m}: how many calls a per-call delay has
        # held, and how many of those have since been answered, so a test can act inside a held call (and know
        # when it has landed) instead of sleeping for a guessed part of the delay.
        self.held: dict[str, dict[str, int]] = {}
        self._check(self.latency, self.throttle_rate, self.fail_status)
        _check_block_health(self.capacity_block_health)
        _check_moves(self.topology_move)
        _check_node_health(self.node_health, self.slow_link)
        self.insufficient_capacity = set(self.insufficient_capacity)
        for kind in LATENCY_KINDS:
            self.latency.setdefault(kind, 0.0)
        self._rng = random.Random(self.seed)

    # -- queries ---------------------------------------------------------------------------------
    def should_throttle(self, service: str) -> bool:
        """Draw from the seeded RNG; True means answer this call with a throttling error."""
        with self._lock:
            rate = self.throttle_rate.get(service, self.throttle_rate.get("*", 0.0))
            if rate <= 0.0:
                return False
            if rate >= 1.0:
                return True
            return self._rng.random() < rate

    def call_delay(self, service: str, operation: str) -> float:
        """Seconds to sleep before answering ``service``'s ``operation``."""
        with self._lock:
            exact = self.latency.get(f"call.{service}.{operation}")
            if exact is not None:
                return float(exact)
            return float(self.latency.get(f"call.{service}.*", 0.0))

    def note_held(self, key: str, stage: str) -> None:
        """Count a call held by a per-call delay at ``stage`` (``started`` or ``answered``)."""
        with self._lock:
            counts = self.held.setdefault(key, {"started": 0, "answered": 0})
            counts[stage] += 1

    def transition_latency(self, kind: str) -> float:
        """Seconds a resource stays transitional: a PCS ``kind`` (cluster|compute_node_group|queue) or a full
        key such as ``eks.cluster``, ``eks.nodegroup`` or ``eks.addon``."""
        with self._lock:
            return float(self.latency.get(kind if "." in kind else f"pcs.{kind}", 0.0))

    def has_capacity(self, instance_type: str) -> bool:
        with self._lock:
            return instance_type not in self.insufficient_capacity

    def block_health(self, *ids: str) -> dict[str, Any]:
        """The injected health of a Capacity Block known by any of ``ids``; {} when none was injected."""
        with self._lock:
            for ident in ids:
                if ident in self.capacity_block_health:
                    return dict(self.capacity_block_health[ident])
            return {}

    def moved_to(self, instance_id: str) -> str | None:
        """The network node a ``topology_move`` fault hangs the instance off, or None."""
        with self._lock:
            return self.topology_move.get(instance_id)

    def forced_status(self, kind: str, *names: str) -> str | None:
        """The forced status for a resource of ``kind`` known by any of ``names`` (name or id)."""
        with self._lock:
            for name in names:
                status = self.fail_status.get(f"{kind}:{name}")
                if status:
                    return status
            return None

    # -- changes ---------------------------------------------------------------------------------
    def update(self, changes: dict[str, Any]) -> None:
        """Merge ``changes`` (JSON field names of this class).

        ``reset: true`` first restores the defaults. Dict fields merge key by key (a ``null`` value
        removes the key); ``insufficient_capacity`` is replaced by the given list; ``seed`` re-seeds
        the RNG. Unknown fields or bad values raise ``ValueError`` and change nothing.
        """
        if not isinstance(changes, dict):
            raise ValueError("fault changes must be a JSON object")
        unknown = set(changes) - {
            "held",  # read only (counted by the server): accepted so that ``to_json``'s output loads back
            "reset",
            "seed",
            "latency",
            "throttle_rate",
            "insufficient_capacity",
            "fail_status",
            "capacity_block_health",
            "topology_move",
            "node_health",
            "slow_link",
            "nccl_replay_larger_runs",
        }
        if unknown:
            raise ValueError(f"unknown fault fields: {', '.join(sorted(unknown))}")
        with self._lock:
            if changes.get("reset"):
                seed, latency, throttle, capacity, fail = 0, _default_latency(), {}, set(), {}
                health: dict[str, Any] = {}
                moves: dict[str, Any] = {}
                nodes: dict[str, Any] = {}
                link: list[Any] | None = None
            else:
                seed = self.seed
                latency, throttle = dict(self.latency), dict(self.throttle_rate)
                capacity, fail = set(self.insufficient_capacity), dict(self.fail_status)
                health = dict(self.capacity_block_health)
                moves = dict(self.topology_move)
                nodes, link = dict(self.node_health), self.slow_link
            if "slow_link" in changes:
                link = changes["slow_link"]
            replay = False if changes.get("reset") else self.nccl_replay_larger_runs
            if "nccl_replay_larger_runs" in changes:
                replay = changes["nccl_replay_larger_runs"]
                if not isinstance(replay, bool):
                    raise ValueError("nccl_replay_larger_runs must be true or false")
            for name, target in (("latency", latency), ("throttle_rate", throttle), ("fail_status", fail),
                                 ("capacity_block_health", health), ("topology_move", moves),
                                 ("node_health", nodes)):
                value = changes.get(name)
                if value is None:
                    continue
                if not isinstance(value, dict):
                    raise ValueError(f"{name} must be an object")
                for key, item in value.items():
                    if item is None:
                        target.pop(key, None)
                    else:
                        target[key] = item
            if changes.get("insufficient_capacity") is not None:
                value = changes["insufficient_capacity"]
                if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                    raise ValueError("insufficient_capacity must be a list of instance types")
                capacity = set(value)
            if "seed" in changes:
                if not isinstance(changes["seed"], int) or isinstance(changes["seed"], bool):
                    raise ValueError("seed must be an integer")
                seed = changes["seed"]
            self._check(latency, throttle, fail)
            _check_block_health(health)
            _check_moves(moves)
            _check_node_health(nodes, link)
            for kind in LATENCY_KINDS:
                latency.setdefault(kind, 0.0)
            self.latency = {k: float(v) for k, v in latency.items()}
            self.throttle_rate = {k: float(v) for k, v in throttle.items()}
            self.insufficient_capacity = capacity
            self.fail_status = fail
            self.capacity_block_health = health
            self.topology_move = moves
            self.node_health, self.slow_link = nodes, (list(link) if link else None)
            self.nccl_replay_larger_runs = replay
            if changes.get("reset"):
                self.held = {}
            if "seed" in changes or changes.get("reset"):
                self.seed = seed
                self._rng = random.Random(seed)

    def rebooted(self, instance_ids: list[str]) -> None:
        """EC2 rebooted these instances: the node faults set to last until a reboot go."""
        with self._lock:
            self.node_health = {key: value for key, value in self.node_health.items()
                                if not (key in instance_ids and value.get("until_reboot"))}

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "seed": self.seed,
                "latency": dict(self.latency),
                "throttle_rate": dict(self.throttle_rate),
                "insufficient_capacity": sorted(self.insufficient_capacity),
                "fail_status": dict(self.fail_status),
                "capacity_block_health": {k: dict(v) for k, v in self.capacity_block_health.items()},
                "topology_move": dict(self.topology_move),
                "node_health": {k: dict(v) for k, v in self.node_health.items()},
                "slow_link": list(self.slow_link) if self.slow_link else None,
                "nccl_replay_larger_runs": self.nccl_replay_larger_runs,
                "held": {key: dict(counts) for key, counts in self.held.items()},
            }

    @classmethod
    def from_file(cls, path: str | Path) -> Faults:
        """Load a JSON or YAML file holding the same fields as ``to_json``."""
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                import yaml

                data = yaml.safe_load(text) or {}
        faults = cls()
        faults.update(data)
        return faults

    # -- helpers ---------------------------------------------------------------------------------
    @staticmethod
    def _check(latency: dict, throttle: dict, fail: dict) -> None:
        for key, value in latency.items():
            if not isinstance(key, str) or not (key in LATENCY_KINDS or key.startswith("call.")):
                raise ValueError(
                    f"latency key {key!r}: expected one of {LATENCY_KINDS} or 'call.<service>.<Op>'"
                )
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"latency {key!r} must be a number of seconds >= 0")
        for key, value in throttle.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"throttle_rate {key!r} must be a probability between 0 and 1")
        for key, value in fail.items():
            kind, _, name = str(key).partition(":")
            if kind not in FAIL_KINDS or not name:
                raise ValueError(f"fail_status key {key!r} must be '<kind>:<name>' with kind in {FAIL_KINDS}")
            if value not in FAILABLE_STATUSES:
                raise ValueError(f"fail_status {key!r}: status must be one of {FAILABLE_STATUSES}")
            if kind in CREATE_ONLY_KINDS and value != "CREATE_FAILED":
                raise ValueError(f"fail_status {key!r}: the only status for {kind} is CREATE_FAILED")
            if kind in CREATE_OR_DELETE_KINDS and value not in ("CREATE_FAILED", "DELETE_FAILED"):
                raise ValueError(f"fail_status {key!r}: {kind} takes CREATE_FAILED or DELETE_FAILED")


#: DescribeCapacityBlockStatus InterconnectStatus (CapacityBlockInterconnectStatus in botocore's EC2 model).
INTERCONNECT_STATUSES = ("ok", "impaired", "insufficient-data")


def _check_block_health(health: dict) -> None:
    for key, value in health.items():
        if not isinstance(key, str) or not key.startswith(("cb-", "cr-")):
            raise ValueError(f"capacity_block_health key {key!r} must be a Capacity Block id (cb-…) or its "
                             "reservation id (cr-…)")
        if not isinstance(value, dict) or set(value) - {"interconnect_status", "unavailable"}:
            raise ValueError(f"capacity_block_health {key!r} must be an object with interconnect_status and/or "
                             "unavailable")
        if value.get("interconnect_status", "ok") not in INTERCONNECT_STATUSES:
            raise ValueError(f"capacity_block_health {key!r}: interconnect_status must be one of "
                             f"{INTERCONNECT_STATUSES}")
        unavailable = value.get("unavailable", 0)
        if isinstance(unavailable, bool) or not isinstance(unavailable, int) or unavailable < 0:
            raise ValueError(f"capacity_block_health {key!r}: unavailable must be a whole number >= 0")


def _check_moves(moves: dict) -> None:
    for key, value in moves.items():
        if not re.fullmatch(r"i-[0-9a-f]{8,17}", str(key)):
            raise ValueError(f"topology_move key {key!r} must be an instance id (i-…)")
        if not isinstance(value, str) or not re.fullmatch(r"nn-[0-9a-f]{17}", value):
            raise ValueError(f"topology_move {key!r} must name a network node id (nn- and 17 hex digits)")


NODE_FAULTS = {"gpus_missing": int, "efa_devices_missing": int, "never_finishes": bool, "dcgm_failures": list,
               "until_reboot": bool}


def _check_dcgm_failures(key: str, failures: list) -> None:
    """Each item names a GPU index and a test the sandbox's ``dcgmi diag`` runs (kube/fake_tools.py DCGM_LEVELS)."""
    for item in failures:
        if not isinstance(item, dict) or set(item) != {"gpu", "test"}:
            raise ValueError(f"node_health {key!r}: each dcgm_failures item must be "
                             '{"gpu": <index>, "test": "<dcgmi diag test>"}')
        gpu, test = item["gpu"], item["test"]
        if not isinstance(gpu, int) or isinstance(gpu, bool) or gpu < 0:
            raise ValueError(f"node_health {key!r}: dcgm_failures gpu must be a GPU index >= 0, not {gpu!r}")
        if test not in DCGM_TESTS:
            raise ValueError(f"node_health {key!r}: dcgm_failures test {test!r} is not a dcgmi diag test the "
                             f"sandbox runs; the tests are {', '.join(DCGM_TESTS)}")


def _check_node_health(nodes: dict, link: Any) -> None:
    for key, value in nodes.items():
        if not isinstance(value, dict) or not value or set(value) - set(NODE_FAULTS):
            raise ValueError(f"node_health {key!r} must be an object with any of {', '.join(NODE_FAULTS)}")
        if value.get("until_reboot") and not str(key).startswith("i-"):
            raise ValueError(f"node_health {key!r}: until_reboot needs an instance id (i-…): EC2 reboots instances")
        if "dcgm_failures" in value:
            if not isinstance(value["dcgm_failures"], list):
                raise ValueError(f"node_health {key!r}: dcgm_failures must be a list")
            _check_dcgm_failures(key, value["dcgm_failures"])
        for name, kind in NODE_FAULTS.items():
            if kind is list:
                continue
            item = value.get(name)
            if item is not None and (not isinstance(item, kind) or (kind is int and (isinstance(item, bool)
                                                                                      or item < 0))):
                raise ValueError(f"node_health {key!r}: {name} must be "
                                 + ("true or false" if kind is bool else "a whole number >= 0"))
    if link is None:
        return
    if not (isinstance(link, list) and len(link) == 3 and all(isinstance(n, str) and n for n in link[:2])
            and isinstance(link[2], (int, float)) and not isinstance(link[2], bool) and 0 < link[2] <= 1):
        raise ValueError("slow_link must be [\"<node a>\", \"<node b>\", factor] with 0 < factor <= 1")
