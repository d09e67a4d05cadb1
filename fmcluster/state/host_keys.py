"""Each cluster's ssh host keys, in their own file under fmcluster's state dir: AWS hands the same addresses
to new instances, and a cluster's keys should not clash with another's in ~/.ssh/known_hosts. ``connect``
writes them through ssh; ``destroy`` forgets them."""

from __future__ import annotations

from pathlib import Path

from fmcluster.state.store import home


def known_hosts_file(cluster: str) -> Path:
    return home() / "ssh" / f"{cluster}.known_hosts"


def forget_host_keys(cluster: str) -> None:
    """A destroyed cluster's host keys go with it (a new cluster of the same name has new ones)."""
    known_hosts_file(cluster).unlink(missing_ok=True)
