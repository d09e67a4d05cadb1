"""`capacity buy --spec` of a spec whose named subnet EC2 does not have (the examples' placeholder
`subnet-0123456789abcdef0`, a typo, another Region's subnet) buys nothing: a Capacity Block serves only its own AZ
(EC2 User Guide, 'Capacity Blocks for ML'), and without the subnet its AZ is unknown, so the block could not be
checked against it before paying a fee that is not refundable. `find` marks every offering for that spec the same
way. Found verifying issue 35 on merged main: the buy went through for any AZ."""

from __future__ import annotations

import json

import pytest
from fixtures.capacity import fm, offering, reservations

MISSING = "subnet-0123456789abcdef0"  # the placeholder configs/p6-b300-capacity-block-pcs.yaml names
SPEC = f"""name: nosubnet
region: us-east-1
backend: pcs
network: {{subnet_id: {MISSING}}}
head_node: {{instance_type: m7i.xlarge}}
queues:
  - name: train
    instance_type: p5.48xlarge
    nodes: 2
    capacity: {{type: capacity-block, reservation_id: cr-0123456789abcdef0}}
"""


@pytest.fixture
def run(sandbox_env, capsys, monkeypatch):
    return lambda *args: fm(capsys, monkeypatch, *args)


def test_buy_refuses_and_find_marks_a_spec_whose_subnet_ec2_does_not_have(run, sandbox, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    offer = offering(run)
    before = reservations(sandbox)
    code, _, err = run("capacity", "buy", offer["offering_id"], "--yes", "--spec", str(spec), "--queue", "train")
    said = " ".join(err.split())
    assert code == 2, err
    assert f"{MISSING} does not exist in us-east-1" in said and "nothing was bought" in said, said
    assert reservations(sandbox) == before
    assert spec.read_text() == SPEC

    code, out, err = run("capacity", "find", str(spec), "--days", "1", "--json")
    assert code == 0, err
    offers = json.loads(out)["offerings"]
    assert offers and all(MISSING in (o["unusable"] or "") for o in offers), offers
