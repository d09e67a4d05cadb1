"""The AMIs the sandbox adds to moto (ParallelCluster's official AMIs, PCS sample AMIs), and the
DescribeImages filters AWS documents that moto lacks (``description``, ``root-device-name``).

moto builds each region's EC2 backend lazily and loads its default AMIs in ``AmiBackend._load_amis``;
seeding from there covers every account and region, and survives a sandbox reset. The PCS user guide
finds sample AMIs with ``--filters Name=description,Values=*26.05*`` ("Using sample AMIs", AWS CLI tab).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_seeders: list[Callable[[Any], None]] = []
_EXTRA_FILTERS = {"description": "description", "root-device-name": "root_device_name",
                  "root-device-type": "root_device_type"}


def add_seeder(seed: Callable[[Any], None]) -> None:
    """Call ``seed(ami_backend)`` for every EC2 backend moto creates from now on."""
    from moto.ec2.models.amis import Ami, AmiBackend

    if seed not in _seeders:
        _seeders.append(seed)
    original = AmiBackend._load_amis
    if getattr(original, "_fmcluster", False):
        return

    def _load_amis(self: Any) -> None:
        original(self)
        for seeder in _seeders:
            seeder(self)

    original_filter = Ami.get_filter_value

    def get_filter_value(self: Any, filter_name: str, method_name: str | None = None) -> Any:
        if filter_name in _EXTRA_FILTERS:
            return getattr(self, _EXTRA_FILTERS[filter_name]) or ""
        return original_filter(self, filter_name, method_name)

    _load_amis._fmcluster = True  # type: ignore[attr-defined]
    AmiBackend._load_amis = _load_amis
    Ami.get_filter_value = get_filter_value
