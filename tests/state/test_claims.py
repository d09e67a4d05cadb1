"""One name, one owner, across machines: the claim ``create`` takes before its first resource
(:mod:`fmcluster.state.claims`), in-process against the sandbox's S3 over HTTP. The end-to-end race of two
``create`` commands is in tests/verbs/lifecycle/test_team_visible.py, on the cluster that test makes anyway."""

from __future__ import annotations

import threading
import uuid

import pytest

from fmcluster.state import claims

REGION = "us-east-1"
# moto's default account, the sandbox's for the "testing" credentials
ACCOUNT = "123456789012"


def test_of_concurrent_conditional_writes_of_one_key_exactly_one_succeeds(sandbox):
    """S3, "How to prevent object overwrites with conditional writes": with If-None-Match, "if multiple conditional
    writes occur for the same object name, the first write operation to finish succeeds" and the others get 412."""
    s3 = sandbox.client("s3", REGION)
    bucket = f"claims-race-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def write(index: int) -> None:
        start.wait()
        try:
            s3.put_object(Bucket=bucket, Key="name.json", Body=str(index).encode(), IfNoneMatch="*")
            outcomes.append("written")
        except s3.exceptions.ClientError as exc:
            outcomes.append(exc.response["Error"]["Code"])

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert sorted(outcomes) == ["PreconditionFailed"] * 7 + ["written"], outcomes
    finally:
        s3.delete_object(Bucket=bucket, Key="name.json")
        s3.delete_bucket(Bucket=bucket)


@pytest.fixture
def two_machines(sandbox_env, tmp_path, monkeypatch):
    """Switch FMCLUSTER_HOME between two state directories, as two teammates' machines would have."""

    def use(which: str) -> str:
        home = tmp_path / which
        monkeypatch.setenv("FMCLUSTER_HOME", str(home))
        return str(home)

    return use


def test_a_second_state_directory_is_refused_and_told_who_holds_the_name(sandbox, two_machines):
    name = f"claim-{uuid.uuid4().hex[:8]}"
    alice = two_machines("alice")
    held = claims.claim(name, REGION, "id-alice", "eks")
    assert (held.cluster_id, held.state_dir, held.mine) == ("id-alice", alice, True)
    assert held.owner.startswith("arn:aws:") and ACCOUNT in held.owner, held.owner
    # the claim lives where the module says, in the account's own bucket for the Region
    body = sandbox.client("s3", REGION).get_object(Bucket=f"fmcluster-claims-{ACCOUNT}-{REGION}",
                                                   Key=f"clusters/{name}.json")["Body"].read()
    assert b"id-alice" in body

    two_machines("bob")
    with pytest.raises(claims.NameClaimed) as refused:
        claims.claim(name, REGION, "id-bob", "eks")
    message = str(refused.value)
    assert f"cluster name {name} in {REGION} is claimed by {held.owner}" in message, message
    assert f"state directory {alice} on host {held.host}" in message and "cluster id id-alice" in message, message
    assert "Nothing was created" in message and refused.value.exit_code == 1
    seen = claims.holder(name, REGION)
    assert seen is not None and not seen.mine and seen.as_json()["yours"] is False
    # bob's destroy of a cluster that is not the claim's leaves the claim alone, and says whose it is
    assert claims.release(name, REGION, {"id-bob"}) == seen

    two_machines("alice")
    assert claims.claim(name, REGION, "id-alice", "eks").mine  # the holder's own re-run stands
    assert claims.release(name, REGION, {"id-alice"}) is None
    assert claims.holder(name, REGION) is None

    two_machines("bob")  # released: the name is anyone's again
    assert claims.claim(name, REGION, "id-bob", "eks").cluster_id == "id-bob"
    claims.release(name, REGION, {"id-bob"})


def test_two_claims_started_together_have_one_winner(sandbox_env, tmp_path):
    """The claim's own race, without a cluster: several state directories claim one name at once (each thread
    reads its own FMCLUSTER_HOME through the ``home`` it is given)."""
    name = f"claim-{uuid.uuid4().hex[:8]}"
    start = threading.Barrier(6)
    won: list[str] = []
    refused: list[str] = []
    import fmcluster.state.claims as module

    homes = {i: tmp_path / f"machine-{i}" for i in range(6)}
    local = threading.local()
    real_home = module.home
    module.home = lambda: getattr(local, "home", None) or real_home()
    try:
        def attempt(index: int) -> None:
            local.home = homes[index]
            start.wait()
            try:
                won.append(claims.claim(name, REGION, f"id-{index}", "pcs").cluster_id)
            except claims.NameClaimed as exc:
                refused.append(str(exc))

        threads = [threading.Thread(target=attempt, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        module.home = real_home
    assert len(won) == 1 and len(refused) == 5, (won, refused)
    assert all(f"cluster id {won[0]}" in message for message in refused), refused
    claims.release(name, REGION, set(won))


def test_status_text_names_the_owner_and_whether_it_is_this_state_directory():
    from rich.console import Console

    from fmcluster.output import ui

    report = {"name": "c", "backend": "pcs", "region": REGION, "status": "ACTIVE", "queues": [], "resources": [],
              "drift": [], "owner": {"owner": "arn:aws:iam::123456789012:user/alice", "host": "box1",
                                     "state_dir": "/home/alice/.local/state/fmcluster", "cluster_id": "x",
                                     "since": "2026-12-05T09:00:00Z", "yours": False}}
    console = Console(width=200, record=True)
    console.print(ui.status_view(report))
    assert ("owner: arn:aws:iam::123456789012:user/alice (state directory /home/alice/.local/state/fmcluster on "
            "box1, not this one)") in console.export_text()


def test_status_of_a_record_whose_name_another_directory_now_holds_says_so(sandbox, two_machines):
    """A record of this directory's (say, made before claims, or destroyed by a teammate who then made their own):
    what AWS holds under the name is shown as the claim holder's, not as this record's."""
    from fmcluster.state.store import ClusterRecord
    from fmcluster.verbs.lifecycle.status import _owner

    name = f"claim-{uuid.uuid4().hex[:8]}"
    alice = two_machines("alice")
    claims.claim(name, REGION, "id-alice", "pcs")
    two_machines("bob")
    record = ClusterRecord(name, REGION, "pcs", "", None, "ACTIVE", 0.0, 0.0, cluster_id="id-bob")
    report: dict = {"problems": []}
    _owner(report, name, REGION, record)
    assert report["owner"]["state_dir"] == alice and report["owner"]["yours"] is False, report
    assert report["problems"] == [f"the name {name} is claimed by {report['owner']['owner']} (state directory "
                                  f"{alice} on host {report['owner']['host']}, since {report['owner']['since']}, "
                                  "cluster id id-alice): what AWS holds under it is theirs, not the cluster this "
                                  "state directory recorded"], report["problems"]
    claims.release(name, REGION, {"id-alice"})



def test_destroy_of_a_name_with_nothing_made_gives_back_only_its_own_claim(sandbox, two_machines, capsys):
    """A create that claimed the name and stopped before its first resource: what `destroy` does when AWS holds
    nothing of the name (its ClusterNotFound path). Its own directory releases the name; another directory leaves
    it, naming the holder. (The function, not the command: the command first probes every backend, seconds.)"""
    from fmcluster.verbs.lifecycle.destroy import _release_empty_claim

    name = f"claim-{uuid.uuid4().hex[:8]}"
    alice = two_machines("alice")
    claims.claim(name, REGION, "id-alice", "pcs")
    two_machines("bob")
    _release_empty_claim(name)
    assert f"state directory {alice}" in " ".join(capsys.readouterr().err.split())
    assert claims.holder(name, REGION) is not None
    two_machines("alice")
    _release_empty_claim(name)
    assert "released this state directory's claim" in " ".join(capsys.readouterr().err.split())
    assert claims.holder(name, REGION) is None


def test_destroy_never_lists_another_owners_resources_to_delete_by_hand(two_machines):
    """After a teardown, what is still tagged under the name is told to be deleted by hand only when it is this
    cluster's: with the name claimed by another directory for another cluster, theirs (and what carries no id, such
    as the nodes EKS tags) is left out."""
    from fmcluster.aws.discovery import Discovered
    from fmcluster.verbs.lifecycle.destroy import still_mine

    two_machines("bob")
    alices = claims.Claim("c", REGION, "id-alice", "arn:aws:iam::123456789012:user/alice", "box1", "/a",
                          "alice-state-id", "2026-12-05T09:00:00Z")
    left = [Discovered("instance:node-1", "i-1", "running", "alice's p5 node", cluster_id=""),
            Discovered("vpc:cluster", "vpc-1", "available", "alice's VPC", cluster_id="id-alice"),
            Discovered("security_group:cluster", "sg-1", "available", "bob's group", cluster_id="id-bob")]
    assert [d.id for d in still_mine(left, {"id-bob"}, alices)] == ["sg-1"]
    # the name is nobody's, or the claim is on the cluster destroyed here: everything left is this cluster's
    assert [d.id for d in still_mine(left, {"id-bob"}, None)] == ["i-1", "vpc-1", "sg-1"]
    assert [d.id for d in still_mine(left, {"id-alice"}, alices)] == ["i-1", "vpc-1", "sg-1"]
