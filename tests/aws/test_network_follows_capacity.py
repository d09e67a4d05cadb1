"""The network fmcluster creates follows the spec's Capacity Block (issue 35): `capacity find SPEC` →
`capacity buy --spec --queue` → preflight of an EKS and a PCS spec without a subnet, for a block in an AZ that
offers every type the cluster runs and for one in an AZ that offers the GPU type but not the system/login type.
The AZs are chosen by what EC2 offers in them (DescribeInstanceTypeOfferings, the sandbox's copy of AWS's
data), never by list position or the time of day. And `capacity buy --spec` refuses, before paying, a block in
an AZ the spec's named subnet is not in."""

from __future__ import annotations

import json

import pytest
from fixtures.capacity import fm

from fmcluster.backends import registry
from fmcluster.preflight import run_preflight
from fmcluster.spec import load_spec

REGION = "us-east-1"
GPU, SYSTEM = "p5.48xlarge", "m7i.xlarge"  # configs/p5-kueue-eks.yaml's queue and system node types
EKS = f"""name: follow-eks
region: {REGION}
backend: eks
kubernetes: {{scheduler: kueue, system_nodes: 2, system_instance_type: {SYSTEM}}}
queues:
  - name: train
    instance_type: {GPU}
    nodes: 2
    capacity: {{type: capacity-block, reservation_id: cr-0123456789abcdef0}}
"""
PCS = f"""name: follow-pcs
region: {REGION}
backend: pcs
head_node: {{instance_type: {SYSTEM}}}
queues:
  - name: train
    instance_type: {GPU}
    nodes: 2
    capacity: {{type: capacity-block, reservation_id: cr-0123456789abcdef0}}
"""


@pytest.fixture
def run(sandbox_env, capsys, monkeypatch):
    return lambda *args: fm(capsys, monkeypatch, *args)


def _offered(ec2, instance_type: str) -> set[str]:
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [instance_type]}])
    return {o["Location"] for page in pages for o in page["InstanceTypeOfferings"]}


def _zones(sandbox) -> dict[str, str]:
    """An AZ of each kind: one that offers both types, one that offers only the GPU type."""
    ec2 = sandbox.client("ec2", REGION)
    regular = {z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]
               if z.get("ZoneType", "availability-zone") == "availability-zone"}
    gpu, system = _offered(ec2, GPU) & regular, _offered(ec2, SYSTEM) & regular
    assert gpu - system, f"the flow needs an AZ that offers {GPU} but not {SYSTEM}"
    return {"every type": sorted(gpu & system)[0], "gpu only": sorted(gpu - system)[0]}


def _reservations(sandbox) -> list[str]:
    return sorted(r["CapacityReservationId"] for r in
                  sandbox.client("ec2", REGION).describe_capacity_reservations()["CapacityReservations"])


@pytest.mark.parametrize("text", [EKS, PCS], ids=["eks", "pcs"])
@pytest.mark.parametrize("kind", ["every type", "gpu only"])
def test_find_buy_and_preflight_put_the_compute_nodes_in_the_blocks_az(run, sandbox, tmp_path, text, kind):
    zone = _zones(sandbox)[kind]
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    code, out, err = run("capacity", "find", str(spec), "--days", "1", "--json")
    assert code == 0, err
    offers = [o for o in json.loads(out)["offerings"] if o["availability_zone"] == zone]
    assert offers and all(o["unusable"] is None for o in offers), offers
    offer = min(offers, key=lambda o: o["start"])
    code, out, err = run("capacity", "buy", offer["offering_id"], "--yes", "--spec", str(spec), "--queue", "train",
                         "--json")
    assert code == 0, err
    assert json.loads(out)["availability_zone"] == zone

    loaded = load_spec(spec).spec
    results = run_preflight(loaded, REGION, lambda service: sandbox.client(service, REGION),
                            registry.get(loaded.backend).checks)
    assert [r for r in results if r.status == "failed"] == []
    subnet = next(r for r in results if r.name == "subnet")
    if kind == "every type":
        assert f"with its subnets in {zone}" in subnet.summary
    else:
        assert f"with its compute subnet in {zone} and its public subnet in " in subnet.summary
        head_zone = subnet.summary.rsplit(" ", 1)[-1]
        assert head_zone in _offered(sandbox.client("ec2", REGION), SYSTEM)
    said = [text for r in results for text in (r.summary, *r.details)]
    assert [text for text in said if "${" in text] == []  # every reference rendered


def test_eks_system_nodes_leave_an_az_without_their_type_for_the_routed_second_subnet(tmp_path):
    from fmcluster.backends.eks.render import render
    from fmcluster.validate.requests import check_document

    path = tmp_path / "spec.yaml"
    path.write_text(EKS)
    documents = {f"{d.kind}:{d.key}": d for d in render(load_spec(path).spec, system_apart=True).documents}
    assert documents["eks_nodegroup:system"].body["subnets"] == ["${subnet.control.id}"]
    assert documents["eks_nodegroup:train"].body["subnets"] == ["${subnet.compute.id}"]
    routes = documents["route_table:control"]
    assert routes.body["route"]["NatGatewayId"] == "${nat_gateway.cluster.id}"
    assert routes.body["associate"]["SubnetId"] == "${subnet.control.id}"
    assert check_document(routes) == []
    assert documents["subnet:public"].body["create"]["AvailabilityZone"] == "${network.head_availability_zone}"


def test_find_marks_and_buy_refuses_an_az_the_specs_subnet_is_not_in(run, sandbox, tmp_path):
    zones = _zones(sandbox)
    ec2 = sandbox.client("ec2", REGION)
    subnet = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]},
                                           {"Name": "availability-zone", "Values": [zones["every type"]]}])
    subnet_id = subnet["Subnets"][0]["SubnetId"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(PCS.replace("backend: pcs\n", f"backend: pcs\nnetwork: {{subnet_id: {subnet_id}}}\n"))
    code, out, err = run("capacity", "find", str(spec), "--days", "1", "--json")
    assert code == 0, err
    offers = json.loads(out)["offerings"]
    elsewhere = next(o for o in offers if o["availability_zone"] == zones["gpu only"])
    assert f"subnet {subnet_id} is in {zones['every type']}" in elsewhere["unusable"]
    assert all(o["unusable"] is None for o in offers if o["availability_zone"] == zones["every type"])

    before = _reservations(sandbox)
    code, _, err = run("capacity", "buy", elsewhere["offering_id"], "--yes", "--spec", str(spec), "--queue", "train")
    assert code == 2
    assert f"is in {zones['gpu only']}, where the spec could not use it" in " ".join(err.split())
    assert _reservations(sandbox) == before
    assert "cr-0123456789abcdef0" in spec.read_text()


def test_the_sandbox_offers_blocks_only_where_ec2_sells_the_type(sandbox):
    import urllib.error

    ec2 = sandbox.client("ec2", REGION)
    offered = _offered(ec2, GPU)
    answer = ec2.describe_capacity_block_offerings(InstanceType=GPU, InstanceCount=2, CapacityDurationHours=24)
    assert {o["AvailabilityZone"] for o in answer["CapacityBlockOfferings"]} == offered
    # an offering seeded through the control route too (p5en.48xlarge is not sold in us-east-1b: moto's copy of
    # AWS's DescribeInstanceTypeOfferings)
    assert "us-east-1b" not in _offered(ec2, "p5en.48xlarge")
    with pytest.raises(urllib.error.HTTPError) as refused:
        sandbox.control("POST", "/_fmcluster/capacity-block-offerings", {
            "region": REGION, "instance_type": "p5en.48xlarge", "availability_zone": "us-east-1b", "count": 1,
            "start": "2030-01-01T11:30:00+00:00", "end": "2030-01-02T11:30:00+00:00"})
    assert refused.value.code == 400


def test_buy_refuses_an_az_other_than_the_other_queues_reservations_in_a_created_network(run, sandbox, tmp_path):
    zones = _zones(sandbox)
    held = sandbox.control("POST", "/_fmcluster/capacity-reservations", {
        "instance_type": GPU, "availability_zone": zones["every type"], "count": 1, "type": "capacity-block",
        "start": "2020-01-01T11:30:00+00:00", "end": "2040-01-01T11:30:00+00:00", "region": REGION,
        "reservation_id": "cr-" + "a" * 17})["reservation_id"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(PCS + f"""  - name: held
    instance_type: {GPU}
    nodes: 1
    capacity: {{type: capacity-block, reservation_id: {held}}}
""")
    code, out, err = run("capacity", "find", str(spec), "--days", "1", "--json")
    assert code == 0, err
    offers = [o for o in json.loads(out)["offerings"] if o["queue"] == "train"]
    elsewhere = next(o for o in offers if o["availability_zone"] == zones["gpu only"])
    assert f"queue held's reservation {held} is in {zones['every type']}" in elsewhere["unusable"]
    before = _reservations(sandbox)
    code, _, err = run("capacity", "buy", elsewhere["offering_id"], "--yes", "--spec", str(spec), "--queue", "train")
    assert code == 2 and "nothing was bought" in " ".join(err.split()), err
    assert _reservations(sandbox) == before


def test_preflight_of_reservations_in_two_azs_names_the_created_subnet_by_its_az(sandbox):
    from fmcluster.spec.models import Spec

    zones = _zones(sandbox)

    def seed(zone: str) -> str:
        return sandbox.control("POST", "/_fmcluster/capacity-reservations", {
            "instance_type": GPU, "availability_zone": zone, "count": 2, "type": "capacity-block",
            "start": "2020-01-01T11:30:00+00:00", "end": "2040-01-01T11:30:00+00:00", "region": REGION,
            "reservation_id": "cr-" + zone[-1] * 17})["reservation_id"]

    held = {kind: seed(zone) for kind, zone in zones.items()}
    spec = Spec.model_validate({"name": "two-azs", "region": REGION, "backend": "pcs",
                                "head_node": {"instance_type": SYSTEM},
                                "queues": [{"name": f"q{i}", "instance_type": GPU, "nodes": 2,
                                            "capacity": {"type": "capacity-block", "reservation_id": rid}}
                                           for i, rid in enumerate(held.values())]})
    results = run_preflight(spec, REGION, lambda service: sandbox.client(service, REGION),
                            registry.get(spec.backend).checks)
    failed = [r for r in results if r.status == "failed"]
    assert failed, results
    said = " ".join(text for r in failed for text in (r.summary, *r.details))
    assert "the compute subnet fmcluster will create in " in said
    assert "put every queue's reservation in one AZ" in said
    assert "${" not in said


OWN_SUBNET = "network: {subnet_id: subnet-0123456789abcdef0}\n"


@pytest.mark.parametrize("text", [EKS, PCS, PCS.replace("backend: pcs", "backend: parallelcluster"),
                                  EKS.replace("backend: eks\n", "backend: eks\n" + OWN_SUBNET)],
                         ids=["eks", "pcs", "parallelcluster", "eks-own-subnet"])
def test_render_notes_carry_no_unrendered_reference(tmp_path, text):
    from fmcluster.backends.registry import render

    path = tmp_path / "spec.yaml"
    path.write_text(text)
    notes = render(load_spec(path).spec).notes
    assert notes and [note for note in notes if "${" in note] == []
