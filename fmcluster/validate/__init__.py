"""``fmcluster validate``: render a spec, then check it with each backend's own rules.

Each backend provides ``validate(loaded, rendered, region, online, zone) -> list[CheckResult]``: the rules of the
service that takes its documents. Validate sits below the backends: the caller hands in how to find the spec's
backend (:class:`ValidatedBackend`; the command line passes ``fmcluster.backends.registry.get``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fmcluster.aws.placement import instance_types, resolve_placement
from fmcluster.checks import CheckResult
from fmcluster.connection import aws
from fmcluster.preflight.network import check_node_network
from fmcluster.spec import LoadedSpec, load_spec
from fmcluster.spec.models import instance_types_of

if TYPE_CHECKING:
    from fmcluster.preflight.common import BackendChecks
    from fmcluster.render.documents import RenderedDocuments
    from fmcluster.spec.models import Spec


class ValidatedBackend(Protocol):
    """What validate asks of the spec's backend (a part of ``fmcluster.backends.protocol.Backend``)."""

    @property
    def checks(self) -> BackendChecks: ...

    def render(self, spec: Spec, spec_file: str = "spec.yaml", subnet_id: str | None = None) -> RenderedDocuments:
        ...

    def validate(self, loaded: LoadedSpec, rendered: RenderedDocuments, region: str, online: bool,
                 zone: str | None) -> list[CheckResult]: ...


def run_checks(spec_path: Path, backend_of: Callable[[str], ValidatedBackend]) -> list[CheckResult]:
    """Every check, in order; those that need AWS are skipped (and say so) when none is reachable. ``backend_of``
    finds the spec's backend by its name."""
    loaded = load_spec(spec_path)
    spec = loaded.spec
    backend = backend_of(spec.backend)
    results = [CheckResult("spec", "warning" if loaded.warnings else "passed",
                           f"{spec_path} loads ({len(spec.queues)} queues, backend {spec.backend})",
                           [str(w) for w in loaded.warnings])]
    region = aws.region_for(spec.region)
    online = bool(aws.target().endpoint_url) or aws.has_credentials(region)
    placement = None
    if online:
        try:
            placement = resolve_placement(spec, aws.client("ec2", region),
                                          lambda: aws.client("resource-groups", region))
            results.append(CheckResult("subnet", "passed", placement.describe()))
            results += _node_network(spec, region, placement, backend.checks)
        except Exception as exc:  # report it as a failed check; the rest can still run
            results.append(CheckResult("subnet", "failed", _message(exc)))
    rendered = backend.render(spec, str(spec_path), subnet_id=placement.subnet_id if placement else None)
    results.append(CheckResult("render", "passed", f"{len(rendered.documents)} documents", rendered.notes))

    results += backend.validate(loaded, rendered, region, online, placement.availability_zone if placement else None)
    results.append(_instance_type_check(spec, region, online))
    return results


def _instance_type_check(spec, region: str, online: bool) -> CheckResult:
    names = sorted({*instance_types(spec), *(t for q in spec.queues for t in instance_types_of(q))})
    if not online:
        return CheckResult("instance types", "skipped", "DescribeInstanceTypes needs an AWS endpoint")
    from botocore.exceptions import ClientError

    ec2 = aws.client("ec2", region)
    missing = []
    for name in names:
        try:
            ec2.describe_instance_types(InstanceTypes=[name])
        except ClientError:
            missing.append(name)
    if missing:
        return CheckResult("instance types", "failed", f"unknown to EC2 in {region}: {', '.join(missing)}")
    return CheckResult("instance types", "passed", f"DescribeInstanceTypes knows {', '.join(names)}")


def _message(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _node_network(spec, region: str, placement, backend: BackendChecks) -> list[CheckResult]:
    """Whether multi-interface nodes can reach out of the spec's own subnet (see fmcluster.preflight.network)."""
    if placement.created or not spec.network.subnet_id:
        return []

    try:
        return check_node_network(spec, region, aws.client("ec2", region), placement.subnet_id, backend)
    except Exception as exc:  # report it as a failed check; the rest can still run
        return [CheckResult("node network", "failed", _message(exc))]
