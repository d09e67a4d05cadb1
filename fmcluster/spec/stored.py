"""A spec as the state file keeps it: checked with the same rules as a spec file, both before it is saved
(:func:`record_cluster`) and when it is read back (:func:`stored_spec_problem`, :func:`usable_spec`). The
store itself (:mod:`fmcluster.state.store`) only keeps the text.

Problems in a stored spec carry its field path but no line and column: the stored text is fmcluster's own
copy, not a file the user edits.
"""

from __future__ import annotations

from pydantic import ValidationError

from fmcluster.errors import FmclusterError, SpecError
from fmcluster.spec.loader import load_spec_data
from fmcluster.spec.models import Spec
from fmcluster.spec.positions import document_from_text
from fmcluster.state.store import StateStore


class InvalidRecord(FmclusterError):
    """A command tried to record a spec that does not validate; nothing was saved."""

    exit_code = 2


class UnusableRecord(FmclusterError):
    """A recorded spec that cannot even be read as a spec (its shape is wrong)."""

    exit_code = 1


def spec_from_text(text: str, source: str = "recorded spec") -> Spec:
    """The :class:`Spec` in ``text``, checked like a spec file (shape, then rules); :class:`SpecError` lists
    every problem, named by ``source`` and field path."""
    # Composed within the loader's bounds: the text comes from a file that may have been damaged or edited.
    data = document_from_text(text, source).data
    return load_spec_data(data, source).spec


def describe(error: SpecError) -> str:
    return "; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in error.problems)


def stored_spec_problem(text: str) -> str | None:
    """Why a stored spec does not validate, or None when it does. Never raises: a record must load whatever
    it holds, so that ``status`` can show it and ``destroy`` can act on it."""
    try:
        spec_from_text(text)
    except SpecError as exc:
        return describe(exc)
    except Exception as exc:  # noqa: BLE001 - damaged data of any kind becomes the reason shown
        return f"unreadable ({type(exc).__name__}: {exc})"
    return None


def record_cluster(store: StateStore, name: str, region: str, backend: str, spec: str, spec_path: str | None,
                   status: str, cluster_id: str = "", endpoint_url: str = "") -> None:
    """Record a cluster and its spec text in ``store``; a spec that does not validate is refused
    (:class:`InvalidRecord`), never saved. An empty ``cluster_id`` keeps the recorded one."""
    problem = stored_spec_problem(spec)
    if problem:
        raise InvalidRecord(f"refusing to record cluster {name}: its spec does not validate: {problem}")
    store.save_cluster(name, region, backend, spec, spec_path, status, cluster_id, endpoint_url)


def usable_spec(text: str, cluster: str) -> Spec:
    """The spec of a record whose shape is right; a rule it breaks (one added since it was saved) does not
    stop ``status`` or ``destroy``. :class:`UnusableRecord` when even the shape is wrong."""
    try:
        return spec_from_text(text)
    except SpecError as exc:
        reason = describe(exc)
        try:
            return Spec.model_validate(document_from_text(text, "recorded spec").data)
        except (SpecError, ValidationError):
            pass
    raise UnusableRecord(f"the recorded spec of cluster {cluster} does not validate, so fmcluster cannot rebuild "
                         f"its plan from it: {reason}")
