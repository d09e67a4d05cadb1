"""``fmcluster smoke NAME``: the smoke test the cluster's backend runs (:meth:`Backend.smoke
<fmcluster.backends.protocol.Backend.smoke>`) — a Slurm job over ssh, or on a Kubernetes cluster an MPIJob through
its scheduler — reported as docs/smoke-json.md says. The backend prints nothing: its progress comes back through
:data:`SINK`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import yaml

from fmcluster.backends import registry
from fmcluster.backends.protocol import SmokeRequest, SmokeSink, Tick
from fmcluster.output import ui
from fmcluster.verbs.connect.resolve import recorded


@contextlib.contextmanager
def _ticker(title: str) -> Iterator[Tick]:
    with ui.Ticker(title) as ticker:
        yield ticker.update


# The smoke test's progress, on stderr: notes, warnings, and one status line while its job runs. Looked up in ui at
# each call, as when the smoke code called ui itself (a test that replaces ui.note still sees every line).
SINK = SmokeSink(note=lambda message: ui.note(message), warning=lambda message: ui.warning(message), ticker=_ticker)


def run(name: str, queue: str | None, nodes: int | None, host: str | None, user: str | None,
        identity: str | None, timeout_min: float, nccl_tests: str | None = None,
        image: str | None = None) -> dict[str, Any]:
    """Smoke-test cluster NAME by its backend's smoke test."""
    session, spec = recorded(name)
    request = SmokeRequest(queue, nodes, timeout_min, host, user, identity, nccl_tests, image)
    # The light backend object, not session.backend: the backend names the extra its smoke test needs, if any, in
    # its own words and only once the options are found good.
    return registry.get(spec.backend).smoke(session.context, request, SINK)


def manifest_text(name: str, queue: str | None, nodes: int | None, timeout_min: float,
                  image: str | None = None) -> str:
    """The YAML of what ``smoke NAME`` would submit, from the recorded spec alone (a UsageError for a backend whose
    job is no document)."""
    _, spec = recorded(name)
    document = registry.get(spec.backend).smoke_manifest(spec, SmokeRequest(queue, nodes, timeout_min, image=image))
    return yaml.dump(document, Dumper=_BlockDumper, sort_keys=False)


def _block_strings(dumper: Any, value: str) -> Any:
    # The launcher's script reads as a script (a literal block), not as one long escaped line.
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


class _BlockDumper(yaml.SafeDumper):
    pass


_BlockDumper.add_representer(str, _block_strings)
