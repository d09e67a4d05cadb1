"""From rendered documents to the resources that apply them: one table per backend, kind → maker, instead of
an if/elif chain in each. The kinds both backends share (security groups, the network fmcluster makes) are
here once."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from fmcluster.aws.ec2 import SecurityGroup
from fmcluster.aws.network_plan import RESOURCES as NETWORK_RESOURCES
from fmcluster.aws.network_plan import after_routes
from fmcluster.engine import Resource
from fmcluster.render.documents import Document

# A resource for one document (the kinds that need more than the document close over it).
Maker = Callable[[Document], Resource]


def by_key(classes: Mapping[str, Callable[[str, Document], Resource]]) -> dict[str, Maker]:
    """Makers for the classes built from the document's key and the document alone."""
    return {kind: (lambda document, cls=cls: cls(document.key, document)) for kind, cls in classes.items()}


# What every backend renders: its security groups and the network it makes.
SHARED: dict[str, Maker] = by_key({"security_group": SecurityGroup, **NETWORK_RESOURCES})


def build(documents: Iterable[Document], makers: Mapping[str, Maker], backend: str) -> list[Resource]:
    """One resource per document, by its kind, and everything that launches into a made subnet after its routes.
    A kind with no maker is a bug in the backend's renderer (a ValueError naming it), never skipped."""
    resources = []
    for document in documents:
        make = makers.get(document.kind)
        if make is None:
            raise ValueError(f"the {backend} backend has no resource for {document.kind} documents")
        resources.append(make(document))
    after_routes(resources)
    return resources
