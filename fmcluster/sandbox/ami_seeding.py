"""One hook for the AMIs the sandbox adds to moto (ParallelCluster's official AMIs, PCS sample AMIs).

moto builds each region's EC2 backend lazily and loads its default AMIs in ``AmiBackend._load_amis``;
seeding from there covers every account and region, and survives a sandbox reset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_seeders: list[Callable[[Any], None]] = []


def add_seeder(seed: Callable[[Any], None]) -> None:
    """Call ``seed(ami_backend)`` for every EC2 backend moto creates from now on."""
    from moto.ec2.models.amis import AmiBackend

    if seed not in _seeders:
        _seeders.append(seed)
    original = AmiBackend._load_amis
    if getattr(original, "_fmcluster", False):
        return

    def _load_amis(self: Any) -> None:
        original(self)
        for seeder in _seeders:
            seeder(self)

    _load_amis._fmcluster = True  # type: ignore[attr-defined]
    AmiBackend._load_amis = _load_amis
