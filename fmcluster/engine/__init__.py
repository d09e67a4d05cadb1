"""The engine: one reconciler for every backend. It walks the resource graph (edges from the references between
rendered documents), reads what AWS holds, and creates, updates, replaces or deletes until the two agree.

This package's face is the engine's contract: what backends implement (:class:`Resource`), what they are handed
(:class:`Context`), and what a walk reports (:class:`ResourceChange`, :class:`Event`). The modules under it are
how it does that.
"""

from fmcluster.engine.context import Context
from fmcluster.engine.events import EngineFailed, Event, EventKind, Interrupted, TimedOut
from fmcluster.engine.resource import (
    Action,
    AttributeChange,
    ForeignResource,
    InPlace,
    Observed,
    Phase,
    Resource,
    ResourceChange,
    flatten,
)
from fmcluster.engine.unknown import UNKNOWN, Unknown
from fmcluster.engine.walk import AttributeFilter, Engine

__all__ = ["UNKNOWN", "Action", "AttributeChange", "AttributeFilter", "Context", "Engine", "EngineFailed", "Event",
           "EventKind", "ForeignResource", "InPlace", "Interrupted", "Observed", "Phase", "Resource",
           "ResourceChange", "TimedOut", "Unknown", "flatten"]
