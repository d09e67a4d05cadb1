"""Load-time rules for a queue that lists several instance types.

ParallelCluster's flexible-instance validators (pcluster/validators/instances_validators.py) refuse a
compute resource whose types differ in vCPUs, GPU count or GPU maker, or that enables EFA on a type without
it; fmcluster says so at the line, before any AWS call. Its own rules add what one launch template and one
plan need: the same EFA interface layout (PCS node groups share the template; ParallelCluster would fall back
to the smallest card count), and one type for a reservation or Capacity Block, which holds a single type.
"""

from __future__ import annotations

from collections.abc import Callable

from fmcluster import catalog
from fmcluster.catalog import names as catalog_names
from fmcluster.spec import decisions
from fmcluster.spec.models import Spec, instance_types_of

Report = Callable[[tuple, str], None]


def _describe(values: dict[str, object]) -> str:
    return ", ".join(f"{name}: {value}" for name, value in values.items())


def check_instance_mix(spec: Spec, error: Report, warn: Report) -> None:
    for index, queue in enumerate(spec.queues):
        types = instance_types_of(queue)
        if len(types) < 2:
            continue
        path = ("queues", index, "instance_type")
        for position, name in enumerate(types):
            problem = catalog_names.instance_type_problem(name)
            if problem:
                error((*path, position), problem)
            if name in types[:position]:
                error((*path, position), f"'{name}' is listed twice")
        if queue.capacity.type in ("reservation", "capacity-block"):
            error(path, f"a {queue.capacity.type.replace('-', ' ')} holds one instance type: list only the one "
                        f"{queue.capacity.reservation_id or 'the reservation'} is for")
            continue
        facts = {name: catalog.instance(name) for name in types}
        unknown = [name for name, fact in facts.items() if fact is None]
        if unknown:
            warn(path, f"{', '.join(unknown)} not in fmcluster's catalog: vCPUs, accelerators and EFA of the "
                       "types cannot be compared here (ParallelCluster's validators compare them at validate)")
            continue
        for label, value in (("vCPUs", lambda f: f.vcpus), ("accelerators", lambda f: f.accelerators),
                             ("accelerator maker", lambda f: f.accelerator.vendor if f.accelerators else "none"),
                             ("architecture", lambda f: f.arch)):
            values = {name: value(fact) for name, fact in facts.items()}
            if len(set(values.values())) > 1:
                error(path, f"the types of one queue must have the same {label} ({_describe(values)}); "
                            "ParallelCluster refuses a mix, and Slurm schedules the queue as one node shape")
        if decisions.efa_enabled(queue):
            without = [name for name, fact in facts.items() if not fact.efa_supported]
            if without:
                error(path, f"EFA is on for this queue and {', '.join(without)} has no EFA: drop it, or set efa: false")
                continue
            layouts = {}
            for name in types:
                try:
                    layouts[name] = len(decisions.efa_network_interfaces(queue.model_copy(update={
                        "instance_type": name})))
                except LookupError:
                    layouts[name] = "unknown"
            if len(set(layouts.values())) > 1:
                error(path, "the types of one queue launch from one launch template, so they need the same EFA "
                            f"interface count ({_describe(layouts)})")
        warn(path, f"plan, cost and the catalog figures count every node of this queue as {queue.instance_type}, "
                   "the most expensive of its types by On-Demand price (EC2 may launch any of them)")
        if decisions.placement_group_enabled(queue):
            warn(path, "a cluster placement group with several instance types may fail with Insufficient Capacity "
                       "(ParallelCluster warns the same); set placement_group: false to trade locality for capacity")
