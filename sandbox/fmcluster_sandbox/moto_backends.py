"""moto's in-process backends, as the emulators reach them (moto is imported only when first asked for)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def ec2(account: str, region: str) -> Any:
    from moto.ec2.models import ec2_backends

    return ec2_backends[account][region]


def iam(account: str) -> Any:
    from moto.iam.models import iam_backends

    backends = iam_backends[account]
    return next((backends[p] for p in ("aws", "global") if p in backends), backends["aws"])


def live_instances(backend: Any, instance_ids: Iterable[str]) -> list[str]:
    """The ids among ``instance_ids`` whose instances are not terminated or shutting down in ``backend``."""
    alive = []
    for instance_id in instance_ids:
        try:
            if backend.get_instance(instance_id).state not in ("terminated", "shutting-down"):
                alive.append(instance_id)
        except Exception:  # noqa: BLE001 - gone from moto
            continue
    return alive


def terminate(backend: Any, instance_ids: Iterable[str]) -> None:
    """Terminate the instances of ``instance_ids`` that are still alive in ``backend``. Some may be gone or
    terminated out of band already: terminating one again would make moto detach its deleted network interfaces
    a second time (InvalidNetworkInterfaceID.NotFound), where EC2 answers a terminated instance's terminate as
    a no-op."""
    present = live_instances(backend, instance_ids)
    if present:
        backend.terminate_instances(present)
