"""Issue 39 on PCS: Slurm's network topology is PCS's to set, and fmcluster says so and sets nothing beside it.

Facts, hand-typed from the PCS user guide:
* "Configure UltraServer instances" (docs.aws.amazon.com/pcs/latest/userguide/capacity-blocks-nvidia-imex.html):
  "When you create a AWS PCS cluster with UltraServer compute node groups, the system inspects the Capacity Block,
  identifies the UltraServer type, and configures Slurm with the appropriate topology plugin."
* "Network topology-aware scheduling in AWS PCS" (docs.aws.amazon.com/pcs/latest/userguide/network-topology.html):
  "AWS PCS tells Slurm where each compute node sits in the network", enabled per queue. Its enabling setting is
  not in botocore's PCS model, so fmcluster renders none and says that it does not turn it on.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fixtures.ultraserver import BLOCK, run_plan

from fmcluster.backends.registry import render
from fmcluster.spec import load_spec

ULTRASERVER_QUOTE = ("the system inspects the Capacity Block, identifies the UltraServer type, and configures Slurm "
                     "with the appropriate topology plugin")
NETWORK_PAGE = "Network topology-aware scheduling in AWS PCS"

GB200 = f"""\
name: gb200-pcs
backend: pcs
region: us-east-1
head_node: {{instance_type: m7g.2xlarge}}
queues:
  - name: train
    instance_type: p6e-gb200.36xlarge
    nodes: 9
    {BLOCK}
"""
# A 16-node p5 queue: EC2 gives p5.48xlarge 3 network nodes ("Prerequisites for Amazon EC2 topology").
P5 = """\
name: p5-pcs
backend: pcs
region: us-east-1
head_node: {instance_type: m7i.2xlarge}
queues:
  - name: gpu
    instance_type: p5.48xlarge
    nodes: 16
  - name: cpu
    instance_type: c7i.8xlarge
    nodes: {min: 0, max: 4}
"""
# Any parameterName starting with "Topology" in any case (slurm.conf(5): names are case-insensitive).
TOPOLOGY_NAME = re.compile(r"parameterName:\s*['\"]?topology", re.IGNORECASE)


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def _rendered_text(path: Path) -> tuple[str, list[str]]:
    rendered = render(load_spec(path).spec, str(path))
    return "\n".join(d.text for d in rendered.documents), rendered.notes


def test_ultraserver_queue_plan_says_pcs_picks_the_topology_and_fmcluster_sets_none(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    path = _spec(tmp_path, GB200)
    code, err = run_plan(path, monkeypatch, capsys)
    text = " ".join(err.split())
    assert code == 0, err
    assert "queue train: PCS chooses Slurm's topology itself" in text and ULTRASERVER_QUOTE in text, err
    documents, notes = _rendered_text(path)
    assert "parameterName" in documents  # the IMEX Prolog is a custom setting: the pattern has text to search
    assert not TOPOLOGY_NAME.search(documents)
    assert not any(NETWORK_PAGE in note for note in notes)  # the UltraServer's topology is PCS's, said in plan


def test_p5_queue_gets_no_tree_from_fmcluster_and_render_says_why(tmp_path):
    documents, notes = _rendered_text(_spec(tmp_path, P5))
    assert not TOPOLOGY_NAME.search(documents)
    [note] = [n for n in notes if NETWORK_PAGE in n]
    assert note.startswith("queue gpu: no Slurm network tree from fmcluster on PCS"), note  # not the CPU queue
    assert "does not turn it on" in note and "fmcluster topology NAME" in note, note


@pytest.mark.parametrize(("where", "line", "position"), [
    ("slurm", "slurm: {custom_settings: {TopologyPlugin: topology/tree}}\n", "slurm.custom_settings.TopologyPlugin"),
    ("slurm", "slurm: {custom_settings: {topologyparam: SwitchAsNodeRank}}\n",
     "slurm.custom_settings.topologyparam"),
    ("queue", "    slurm_settings: {Topology: default}\n", "queues[0].slurm_settings.Topology"),
])
def test_a_topology_setting_of_the_users_is_refused_with_the_reason(tmp_path, monkeypatch, capsys, where, line,
                                                                    position):
    monkeypatch.setenv("FMCLUSTER_HOME", str(tmp_path / "state"))
    text = GB200 + line if where == "slurm" else GB200.replace("    nodes: 9\n", "    nodes: 9\n" + line)
    code, err = run_plan(_spec(tmp_path, text), monkeypatch, capsys)
    said = " ".join(err.split())
    assert code == 2 and position in said, err
    assert "PCS keeps Slurm's topology itself" in said and ULTRASERVER_QUOTE in said and NETWORK_PAGE in said, err
    assert "Traceback" not in err
