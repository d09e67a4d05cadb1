"""Backend messages point back at the spec line they are about."""

from __future__ import annotations

from pathlib import Path

from fmcluster.spec import load_spec
from fmcluster.spec.trace import locate

SPEC = """name: traced
backend: parallelcluster
network:
  ssh: {key_name: research-key}
queues:
  - name: train
    instance_type: p5.48xlarge
    nodes: 2
    capacity: {type: reservation, reservation_id: cr-0123456789abcdef0}
"""


def test_messages_name_their_spec_position(tmp_path: Path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    loaded = load_spec(path)
    assert locate(loaded, "KeyPairValidator: The key pair 'research-key' does not exist") == \
        f"{path}:4:19: network.ssh.key_name"
    assert locate(loaded, "The queue train has EFA enabled on p5.48xlarge") == f"{path}:7:20: queues[0].instance_type"
    assert locate(loaded, "Capacity reservation cr-0123456789abcdef0 is not active") == \
        f"{path}:9:51: queues[0].capacity.reservation_id"
    assert locate(loaded, "Compute resource p5-48xlarge is misconfigured") == f"{path}:6:11: queues[0].name"
    assert locate(loaded, "nothing from the spec here") is None
