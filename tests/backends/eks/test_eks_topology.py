"""The network topology an EKS cluster's scheduler is given: Kueue's Topology and the flavor naming it, and KAI's
Topology; checked against the pinned CRDs offline (the sandbox's API admits them in test_eks_manifests.py and
test_eks_kube.py). Volcano gets none: its HyperNode discovery is set in its release's own controller ConfigMap, and
fmcluster ships the releases unchanged.

Facts typed by hand, with their source:

* layers per type: EC2 user guide, "Prerequisites for Amazon EC2 topology", Instance types ("Returns 3* network
  nodes": p4d.24xlarge, p5.48xlarge, p5en.48xlarge, p6e-gb200.36xlarge, trn1.32xlarge, trn2.48xlarge; "Returns 4*
  network nodes": p6-b200.48xlarge, p6-b300.48xlarge; g6.xlarge and m7i.large are on neither list);
* node labels ``topology.k8s.aws/network-node-layer-1`` .. ``-N``: EKS user guide, "Place distributed AI/ML workloads
  with network topology labels";
* the lowest level ``kubernetes.io/hostname``: Kueue's Topology-Aware Scheduling docs, and the pinned Topology CRDs
  (Kueue v0.19.2, KAI v0.13.0: "the kubernetes.io/hostname label can only be used at the lowest level");
* the UltraServer (NVLink domain) label: fmcluster's own ``fmcluster.io/ultraserver``, which `create` writes on an
  UltraServer queue's nodes from EC2's CapacityBlockId (tests/backends/eks/test_eks_ultraserver_topology.py shows the
  nodes carry it); without a label named (manifests.ULTRASERVER_NODE_LABEL None) the level is left out.
"""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.eks_specs import GB200_SPEC, eks_spec

from fmcluster.backends.eks.software import manifests as manifests_module
from fmcluster.backends.eks.software.manifests import manifests
from fmcluster.backends.eks.software.network_topology import ULTRASERVER_LABEL
from fmcluster.backends.eks.software.validate import manifest_problems
from fmcluster.catalog.network_topology import network_layers
from fmcluster.spec import load_spec
from fmcluster.spec.models import Spec

L1, L2, L3, L4 = (f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3, 4))
HOST = "kubernetes.io/hostname"
ULTRASERVER = "fmcluster.io/ultraserver"
P5_LEVELS = [L1, L2, L3, HOST]
B200_LEVELS = [L1, L2, L3, L4, HOST]
GB200_LEVELS = [L1, L2, L3, ULTRASERVER, HOST]


def of_kind(objects: list[dict[str, Any]], kind: str, api_version: str | None = None) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and (api_version is None or o["apiVersion"] == api_version)]


def levels_of(topology: dict[str, Any]) -> list[str]:
    return [level["nodeLabel"] for level in topology["spec"]["levels"]]


def gb200_spec(scheduler: str, tmp_path, monkeypatch) -> Spec:
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    path = tmp_path / "spec.yaml"
    path.write_text(GB200_SPEC.replace("region: us-east-1\n",
                                       f"region: us-east-1\nkubernetes: {{scheduler: {scheduler}}}\n"))
    return load_spec(path).spec


@pytest.mark.parametrize(("instance_type", "layers"), [
    ("p4d.24xlarge", 3), ("p5.48xlarge", 3), ("p5en.48xlarge", 3), ("p6e-gb200.36xlarge", 3), ("trn1.32xlarge", 3),
    ("trn2.48xlarge", 3), ("p6-b200.48xlarge", 4), ("p6-b300.48xlarge", 4), ("g6.xlarge", 0), ("m7i.large", 0)])
def test_the_catalog_knows_how_many_layers_ec2_returns(instance_type: str, layers: int) -> None:
    assert network_layers(instance_type) == layers


def test_a_p5_queue_gets_a_three_layer_topology_that_its_flavor_names() -> None:
    spec = eks_spec("kueue")
    objects = manifests(spec)
    (topology,) = of_kind(objects, "Topology")
    assert topology["apiVersion"] == "kueue.x-k8s.io/v1beta2"  # the version the pinned CRD stores
    assert topology["metadata"]["name"] == "network-3-layers"
    assert levels_of(topology) == P5_LEVELS
    (flavor,) = of_kind(objects, "ResourceFlavor")
    # topologyName needs nodeLabels (the ResourceFlavor CRD's rule): the instance-type label is kept
    assert flavor["spec"] == {"nodeLabels": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                              "topologyName": "network-3-layers"}
    assert objects.index(topology) < objects.index(flavor)  # the flavor's Topology is made first
    assert manifest_problems(objects, spec.kubernetes.version) == []


def test_a_p6_b200_queue_gets_four_layers() -> None:
    spec = eks_spec("kueue", instance_type="p6-b200.48xlarge")
    objects = manifests(spec)
    (topology,) = of_kind(objects, "Topology")
    assert (topology["metadata"]["name"], levels_of(topology)) == ("network-4-layers", B200_LEVELS)
    (flavor,) = of_kind(objects, "ResourceFlavor")
    assert flavor["spec"]["topologyName"] == "network-4-layers"
    assert manifest_problems(objects, spec.kubernetes.version) == []


def test_without_an_ultraserver_label_the_gb200_queue_gets_its_network_layers(tmp_path, monkeypatch) -> None:
    """Kueue leaves a node without every level label out of the flavor's topology: with no UltraServer label named,
    the UltraServer queue gets its 3 network layers and the hostname."""
    monkeypatch.setattr(manifests_module, "ULTRASERVER_NODE_LABEL", None)
    spec = gb200_spec("kueue", tmp_path, monkeypatch)
    (topology,) = of_kind(manifests(spec), "Topology")
    assert (topology["metadata"]["name"], levels_of(topology)) == ("network-3-layers", P5_LEVELS)


def test_a_gb200_ultraserver_queue_gets_the_ultraserver_level(tmp_path, monkeypatch) -> None:
    assert manifests_module.ULTRASERVER_NODE_LABEL == ULTRASERVER_LABEL == ULTRASERVER
    spec = gb200_spec("kueue", tmp_path, monkeypatch)
    objects = manifests(spec)
    (topology,) = of_kind(objects, "Topology")
    assert (topology["metadata"]["name"], levels_of(topology)) == ("ultraserver-3-layers", GB200_LEVELS)
    (flavor,) = of_kind(objects, "ResourceFlavor")
    assert flavor["spec"]["topologyName"] == "ultraserver-3-layers"
    assert manifest_problems(objects, spec.kubernetes.version) == []
    # a p5 queue beside it keeps its plain network layers (the UltraServer level is the GB200 type's only)
    assert [levels_of(t) for t in of_kind(manifests(eks_spec("kueue")), "Topology")] == [P5_LEVELS]
    kai = gb200_spec("kai", tmp_path, monkeypatch)
    (kai_topology,) = of_kind(manifests(kai), "Topology", "kai.scheduler/v1alpha1")
    assert levels_of(kai_topology) == GB200_LEVELS
    assert manifest_problems(manifests(kai), kai.kubernetes.version) == []


def test_a_queue_without_topology_is_unchanged() -> None:
    """g6.xlarge is on neither of EC2's topology lists: no Topology, and its flavor is as before."""
    spec = eks_spec("kueue", instance_type="g6.xlarge", capacity={"type": "on-demand"})
    objects = manifests(spec)
    assert of_kind(objects, "Topology") == []
    (flavor,) = of_kind(objects, "ResourceFlavor")
    assert flavor["spec"] == {"nodeLabels": {"node.kubernetes.io/instance-type": "g6.xlarge"}}
    assert of_kind(manifests(eks_spec("kai", instance_type="g6.xlarge", capacity={"type": "on-demand"})),
                   "Topology") == []


def test_a_mixed_queue_names_a_topology_only_on_the_type_that_has_one() -> None:
    spec = eks_spec("kueue", instance_type=["p5.48xlarge", "g6.xlarge"], capacity={"type": "on-demand"})
    objects = manifests(spec)
    assert [t["metadata"]["name"] for t in of_kind(objects, "Topology")] == ["network-3-layers"]
    flavors = {f["metadata"]["name"]: f["spec"].get("topologyName") for f in of_kind(objects, "ResourceFlavor")}
    assert flavors == {"p5.48xlarge": "network-3-layers", "g6.xlarge": None}


def test_one_topology_per_distinct_level_list() -> None:
    """Two p5 queues and a p6-b200 queue: two Topologies, not three; each flavor names its own."""
    spec = Spec.model_validate({"name": "mix", "region": "us-east-2", "backend": "eks",
                                "kubernetes": {"scheduler": "kueue"}, "queues": [
                                    {"name": "a", "instance_type": "p5.48xlarge", "nodes": 2},
                                    {"name": "b", "instance_type": "p5.48xlarge", "nodes": 4},
                                    {"name": "c", "instance_type": "p6-b200.48xlarge", "nodes": 2}]})
    objects = manifests(spec)
    assert {t["metadata"]["name"]: levels_of(t) for t in of_kind(objects, "Topology")} == {
        "network-3-layers": P5_LEVELS, "network-4-layers": B200_LEVELS}
    assert {f["metadata"]["name"]: f["spec"]["topologyName"] for f in of_kind(objects, "ResourceFlavor")} == {
        "p5.48xlarge": "network-3-layers", "p6-b200.48xlarge": "network-4-layers"}
    assert manifest_problems(objects, spec.kubernetes.version) == []


def test_kai_gets_the_same_topology() -> None:
    """KAI v0.13.0's Topology (kai.scheduler/v1alpha1, cluster-scoped); its Queue CRD has no topology field (a job's
    PodGroup names the Topology in its topologyConstraint), so the queues are as before."""
    for spec, name, levels in ((eks_spec("kai"), "network-3-layers", P5_LEVELS),
                               (eks_spec("kai", instance_type="p6-b200.48xlarge"), "network-4-layers", B200_LEVELS)):
        objects = manifests(spec)
        (topology,) = of_kind(objects, "Topology", "kai.scheduler/v1alpha1")
        assert (topology["metadata"]["name"], levels_of(topology)) == (name, levels)
        assert all("topology" not in str(q["spec"]).lower() for q in of_kind(objects, "Queue"))
        assert manifest_problems(objects, spec.kubernetes.version) == []


def test_a_topology_outside_the_crd_is_reported() -> None:
    """The offline check reads the Topology CRDs: a misspelt level field is a problem (so the passes above mean
    something)."""
    spec = eks_spec("kueue")
    objects = manifests(spec)
    (topology,) = of_kind(objects, "Topology")
    topology["spec"]["levels"][0] = {"nodeLabels": L1}
    problems = manifest_problems(objects, spec.kubernetes.version)
    assert problems and any("network-3-layers" in p for p in problems), problems
