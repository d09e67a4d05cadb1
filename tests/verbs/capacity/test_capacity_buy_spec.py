"""`capacity buy OFFERING --spec S --queue Q` against the sandbox: before paying, the block must fit the queue
(its instance type; as many instances as the queue's nodes, for a {min, max} queue its max) and the spec must be
able to take the id; after paying, the id is written changing nothing else of the file: its mode, a symlink
(written through), CRLF line ends.

The offering is the one ``offering`` (tests/fixtures/capacity.py) finds: 2 × p5.48xlarge for a day (the sandbox
sells what DescribeCapacityBlockOfferings asks for), so a queue of 3 nodes, or of {min: 0, max: 4}, does not fit
it."""

from __future__ import annotations

import os
import stat

import pytest
from fixtures.capacity import fm, offering, reservations

QUEUE = """\
name: s\r
region: us-east-1\r
backend: pcs\r
queues:\r
  - name: train   # the block's queue\r
    instance_type: {instance_type}\r
    nodes: {nodes}\r
    capacity:\r
      type: capacity-block\r
      reservation_id: cr-0123456789abcdef0\r
"""


@pytest.fixture
def run(sandbox_env, capsys, monkeypatch):
    return lambda *args: fm(capsys, monkeypatch, *args)


def _spec(tmp_path, name="spec.yaml", newline="\n", **fields):
    text = QUEUE.format(**{"instance_type": "p5.48xlarge", "nodes": 2, **fields}).replace("\r\n", newline)
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path, text


@pytest.mark.parametrize(("nodes", "said"), [
    ("3", "queue 'train' has 3 nodes, but offering {id} holds 2 instance(s)"),
    ("{min: 0, max: 4}", "queue 'train' has 4 nodes at most (nodes.max), but offering {id} holds 2 instance(s)"),
])
def test_a_block_smaller_than_the_queue_buys_nothing(run, sandbox, tmp_path, nodes, said):
    offer = offering(run)
    spec, text = _spec(tmp_path, nodes=nodes)
    before = reservations(sandbox)
    code, _, err = run("capacity", "buy", offer["offering_id"], "--yes", "--spec", str(spec), "--queue", "train")
    assert code == 2 and said.format(id=offer["offering_id"]) in " ".join(err.split()), err
    assert "charged now" not in err  # refused before the price (and EC2's DryRun) were asked for
    assert reservations(sandbox) == before and spec.read_text() == text


def test_specs_that_cannot_take_the_id_buy_nothing(run, sandbox, tmp_path):
    offer = offering(run)
    before = reservations(sandbox)

    def refused(spec, said):
        code, _, err = run("capacity", "buy", offer["offering_id"], "--yes", "--spec", str(spec), "--queue", "train")
        assert code == 2 and said in " ".join(err.split()), err

    wrong_type, _ = _spec(tmp_path, "type.yaml", instance_type="p4d.24xlarge")
    refused(wrong_type, f"queue 'train' runs p4d.24xlarge, but offering {offer['offering_id']} is for p5.48xlarge")
    refused(tmp_path / "absent.yaml", "absent.yaml")
    shared = tmp_path / "shared.yaml"
    shared.write_text("name: s\nregion: us-east-1\nbackend: pcs\nqueues:\n"
                      "  - name: train\n    instance_type: p5.48xlarge\n    nodes: 2\n"
                      "    capacity: &block {type: capacity-block}\n"
                      "  - name: other\n    instance_type: p5.48xlarge\n    nodes: 2\n    capacity: *block\n")
    refused(shared, "queue 'train''s capacity is a YAML anchor it shares with queue(s) 'other'")
    mixed, _ = _spec(tmp_path, "mixed.yaml", newline="\r\n")
    mixed.write_bytes(mixed.read_bytes() + b"# a last line with LF\n")
    refused(mixed, "mixes CRLF and LF line ends")
    assert reservations(sandbox) == before
    assert not [p for p in tmp_path.iterdir() if "fmcluster-tmp" in p.name]


def test_the_id_is_written_through_a_symlink_keeping_mode_and_crlf(run, sandbox, tmp_path):
    offer = offering(run)
    real, text = _spec(tmp_path, "real.yaml", newline="\r\n")
    os.chmod(real, 0o640)  # not mkstemp's own 0600
    link = tmp_path / "spec.yaml"
    link.symlink_to(real.name)
    code, out, err = run("capacity", "buy", offer["offering_id"], "--yes", "--spec", str(link), "--queue", "train")
    assert code == 0, err
    rid = out.split()[1].rstrip(":")
    assert rid.startswith("cr-") and rid in reservations(sandbox)
    assert link.is_symlink() and os.readlink(link) == real.name
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert real.read_bytes() == text.replace("cr-0123456789abcdef0", rid).encode()  # CRLF and comment kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real.yaml", "spec.yaml"]  # no temporary file left


def test_a_failed_write_leaves_the_spec_and_no_temporary_file(tmp_path, monkeypatch):
    from fmcluster.verbs.capacity import spec_edit

    spec, text = _spec(tmp_path)

    def refuse(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        spec_edit.write_reservation_id(spec, "train", "cr-0123456789abcdef1")
    assert spec.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ["spec.yaml"]
