"""The resource graph, taken from the documents themselves.

A document that needs another resource's id says so with a reference, ``${kind.key.attribute}``; that
reference is the edge. Backends add an explicit edge only where AWS needs an order no document shows.
The graph is checked with :mod:`graphlib` before any AWS call: a reference to nothing, or a cycle, is a
clear error instead of a hang.
"""

from __future__ import annotations

from collections.abc import Iterable
from graphlib import CycleError, TopologicalSorter
from typing import TYPE_CHECKING

from fmcluster.errors import FmclusterError

if TYPE_CHECKING:
    from fmcluster.engine.resource import Resource

# References to values the session supplies rather than a resource (the cluster's identity, the network
# it was placed in).
CONTEXT_NAMESPACES = frozenset({"fmcluster", "network"})


class GraphError(FmclusterError):
    """The plan's documents do not form a graph AWS could build: a bug in a backend or a template."""

    exit_code = 1


def provider_of(reference: str) -> str | None:
    """``kind.key.attribute`` → ``kind:key``; None for a context value."""
    parts = reference.split(".")
    if parts[0] in CONTEXT_NAMESPACES:
        return None
    if len(parts) < 3:
        raise GraphError(f"reference ${{{reference}}} names no resource (write ${{kind.key.attribute}})")
    return f"{parts[0]}:{parts[1]}"


def wire(resources: list[Resource]) -> list[Resource]:
    """Set each resource's ``depends_on`` from its references and explicit edges; return them in an order
    where every resource comes after what it depends on."""
    names = {r.name for r in resources}
    if len(names) != len(resources):
        seen: set[str] = set()
        twice = sorted({r.name for r in resources if r.name in seen or seen.add(r.name)})  # type: ignore[func-returns-value]
        raise GraphError(f"the plan holds {', '.join(twice)} more than once")
    for resource in resources:
        edges: set[str] = set()
        for reference in sorted(resource.references()):
            provider = provider_of(reference)
            if provider is None or provider == resource.name:
                continue
            if provider not in names:
                raise GraphError(f"{resource.name} refers to ${{{reference}}}, but the plan has no {provider}")
            edges.add(provider)
        for edge in resource.extra_edges:
            if edge not in names:
                raise GraphError(f"{resource.name} must come after {edge}, but the plan has no {edge}")
            edges.add(edge)
        resource.depends_on = tuple(sorted(edges))
    return in_order(resources)


def in_order(resources: Iterable[Resource]) -> list[Resource]:
    """Dependencies first (stable: ties keep the backend's order)."""
    resources = list(resources)
    by_name = {r.name: r for r in resources}
    sorter = TopologicalSorter({r.name: [d for d in r.depends_on if d in by_name] for r in resources})
    try:
        sorter.prepare()
    except CycleError as exc:
        cycle = " → ".join(exc.args[1]) if len(exc.args) > 1 else "?"
        raise GraphError(f"the plan's resources depend on each other in a cycle: {cycle}") from None
    position = {r.name: index for index, r in enumerate(resources)}
    ordered: list[Resource] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=position.__getitem__)
        ordered.extend(by_name[name] for name in ready)
        sorter.done(*ready)
    return ordered


def by_rank(resources: list[Resource]) -> list[Resource]:
    """Order a teardown of resources that have no documents (found in the state or by their tags): each
    waits for every resource of a lower ``teardown_rank`` to be gone."""
    for resource in resources:
        resource.depends_on = tuple(sorted(o.name for o in resources if o.teardown_rank > resource.teardown_rank))
    return sorted(resources, key=lambda r: -r.teardown_rank)
