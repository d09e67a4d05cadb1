"""One name, one owner, across machines: ``create`` claims a cluster's name in the account and Region before it
makes anything, and ``destroy`` gives the claim back once nothing of the cluster is left.

The local lock (:mod:`fmcluster.state.locks`) sees only commands that share a state directory; two teammates on two
machines both pass it. The claim is the account-wide counterpart: one S3 object per cluster name and Region,
written with ``If-None-Match: *``, in a bucket of fmcluster's own per account and Region
(``fmcluster-claims-<account>-<region>``).

Why an S3 conditional write, and not a resource whose creation fails when it exists (an SSM parameter with
``Overwrite=false``, an IAM role, a CloudFormation stack or resource group name):

- S3 documents the race itself. "How to prevent object overwrites with conditional writes"
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html): with ``If-None-Match``, "if
  multiple conditional writes occur for the same object name, the first write operation to finish succeeds"
  and the others get 412 Precondition Failed (or 409 ConditionalRequestConflict when a delete races them: retry).
  The other candidates refuse a duplicate name, but AWS says nothing of two creates in flight at once (and IAM
  is documented as eventually consistent).
- It is what Terraform's S3 backend locks its state with since 1.10 (``use_lockfile``), for the same reason.
- The claim holds a document: who holds the name (the caller's ARN), from which state directory and host, the
  cluster id and since when. A refused creator is told all of it without a second service.
- It costs nothing while nobody creates (an empty bucket bills nothing; each claim is a few hundred bytes).

Every request names the expected bucket owner (``ExpectedBucketOwner``): a bucket of that name in another
account (bucket names are global) is refused by S3 rather than trusted with the claim.

A state directory is known by a random id kept in ``<state dir>/owner-id``: the claim is this directory's when it
carries that id. A cluster made before claims existed has none; the first ``create`` that converges it claims it.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fmcluster.connection import aws
from fmcluster.errors import FmclusterError
from fmcluster.state.db import private_directory
from fmcluster.state.store import home

BUCKET_PREFIX = "fmcluster-claims-"
# 409 ConditionalRequestConflict: a delete finished while our conditional write was in flight; S3 says retry.
_RETRIES = 5


class NameClaimed(FmclusterError):
    """Another state directory holds the cluster's name in this account and Region."""

    exit_code = 1


@dataclass(frozen=True)
class Claim:
    """Who holds a cluster name (the claim object's document)."""

    cluster: str
    region: str
    cluster_id: str
    owner: str  # the caller's ARN when it claimed
    host: str
    state_dir: str
    state_id: str
    since: str
    backend: str = ""

    @property
    def mine(self) -> bool:
        """Whether this state directory holds it (one that never claimed a name has no id yet, and holds none)."""
        return bool(self.state_id) and self.state_id == _known_state_id()

    def describe(self) -> str:
        return (f"{self.owner} (state directory {self.state_dir} on host {self.host}, since {self.since}, "
                f"cluster id {self.cluster_id})")

    def as_json(self) -> dict[str, Any]:
        return {"owner": self.owner, "host": self.host, "state_dir": self.state_dir, "cluster_id": self.cluster_id,
                "since": self.since, "yours": self.mine}


def _known_state_id() -> str:
    try:
        return (home() / "owner-id").read_text().strip()
    except OSError:
        return ""


def state_id() -> str:
    """This state directory's id (made once, kept in ``owner-id``)."""
    directory = home()
    path = directory / "owner-id"
    if known := _known_state_id():
        return known
    private_directory(directory)
    made = uuid.uuid4().hex
    draft = directory / f"owner-id.{made}"
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(made + "\n")
    try:
        os.link(draft, path)  # whole or not at all: a reader never sees a half-written id
    except FileExistsError:  # another command made it first: theirs stands
        return Path(path).read_text().strip()
    finally:
        draft.unlink(missing_ok=True)
    return made


def bucket_name(account: str, region: str) -> str:
    return f"{BUCKET_PREFIX}{account}-{region}"


def _key(cluster: str) -> str:
    return f"clusters/{cluster}.json"


def _code(exc: Exception) -> str:
    return getattr(exc, "response", {}).get("Error", {}).get("Code", "")


def _status(exc: Exception) -> int:
    return int(getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


class _Claims:
    """The claims bucket of one account and Region."""

    def __init__(self, region: str):
        from botocore.exceptions import BotoCoreError, ClientError

        self.region = region
        try:
            identity = aws.client("sts", region).get_caller_identity()
        except (BotoCoreError, ClientError) as exc:
            raise aws.describe_error("the caller's identity (to claim the cluster's name)", exc) from None
        self.account, self.caller = identity["Account"], identity["Arn"]
        self.bucket = bucket_name(self.account, region)
        self.s3 = aws.client("s3", region)

    def read(self, cluster: str) -> Claim | None:
        from botocore.exceptions import ClientError

        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=_key(cluster),
                                      ExpectedBucketOwner=self.account)["Body"].read()
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "NoSuchBucket", "404"):
                return None
            raise aws.describe_error(f"the claim on {cluster}", exc) from None
        try:
            data = json.loads(body)
            return Claim(**{k: str(data.get(k, "")) for k in Claim.__dataclass_fields__})
        except (ValueError, TypeError):
            return Claim(cluster, self.region, "", "(unreadable claim)", "?", "?", "", "?")

    def write(self, claim: Claim) -> bool:
        """Write ``claim`` unless one exists: True when it is now held, False when another was there first."""
        from botocore.exceptions import ClientError

        body = json.dumps(claim.__dict__, indent=2).encode()
        for _ in range(_RETRIES):
            try:
                self.s3.put_object(Bucket=self.bucket, Key=_key(claim.cluster), Body=body, IfNoneMatch="*",
                                   ContentType="application/json", ExpectedBucketOwner=self.account)
                return True
            except ClientError as exc:
                code = _code(exc)
                if code == "NoSuchBucket":
                    self._make_bucket()
                    continue
                if code == "PreconditionFailed" or _status(exc) == 412:
                    return False
                if code == "ConditionalRequestConflict" or _status(exc) == 409:
                    continue
                raise aws.describe_error(f"the claim on {claim.cluster}", exc) from None
        raise FmclusterError(f"could not claim the name {claim.cluster} in {self.region}: S3 kept answering "
                             "409 ConditionalRequestConflict; try again")

    def overwrite(self, claim: Claim) -> None:
        from botocore.exceptions import ClientError

        try:
            self.s3.put_object(Bucket=self.bucket, Key=_key(claim.cluster), Body=json.dumps(claim.__dict__).encode(),
                               ContentType="application/json", ExpectedBucketOwner=self.account)
        except ClientError as exc:
            raise aws.describe_error(f"the claim on {claim.cluster}", exc) from None

    def delete(self, cluster: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self.s3.delete_object(Bucket=self.bucket, Key=_key(cluster), ExpectedBucketOwner=self.account)
        except ClientError as exc:
            if _code(exc) not in ("NoSuchKey", "NoSuchBucket", "404"):
                raise aws.describe_error(f"the claim on {cluster}", exc) from None

    def _make_bucket(self) -> None:
        from botocore.exceptions import ClientError

        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if self.region != "us-east-1":  # us-east-1 takes no LocationConstraint (CreateBucket's reference)
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            self.s3.create_bucket(**kwargs)
        except ClientError as exc:
            if _code(exc) == "BucketAlreadyOwnedByYou":  # a teammate made it a moment ago
                return
            if _code(exc) == "BucketAlreadyExists":
                raise FmclusterError(
                    f"the S3 bucket {self.bucket}, where fmcluster claims cluster names for account {self.account} "
                    f"in {self.region}, belongs to another account; fmcluster will not write claims there. Ask "
                    "AWS Support, or remove it if it is yours under another account") from None
            raise aws.describe_error(f"the claims bucket {self.bucket}", exc) from None


def claim(cluster: str, region: str, cluster_id: str, backend: str) -> Claim:
    """Claim ``cluster`` in ``region`` for this state directory, or raise :class:`NameClaimed` naming the holder.
    A claim this directory already holds for ``cluster_id`` stands."""
    claims = _Claims(region)
    held = claims.read(cluster)
    mine = Claim(cluster, region, cluster_id, claims.caller, socket.gethostname(), str(home()), state_id(),
                 time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), backend)
    if held is None:
        if claims.write(mine):
            return mine
        held = claims.read(cluster)
        if held is None:  # released between our write and read: the name is free again, but say so plainly
            raise NameClaimed(f"the name {cluster} in {region} was claimed and released while this create ran; "
                              "re-run it")
    if held.mine:
        if held.cluster_id != cluster_id:  # this directory's own, for a cluster it lost the record of: re-pointed
            claims.overwrite(mine)         # (the local lock keeps this directory's commands one at a time)
            return mine
        return held
    raise NameClaimed(refusal(held))


def refusal(held: Claim) -> str:
    return (f"cluster name {held.cluster} in {held.region} is claimed by {held.describe()}: another state "
            "directory holds it. Nothing was "
            f"created. `fmcluster status {held.cluster}` shows that cluster; give this one another name, or ask its "
            f"owner to destroy it (`fmcluster destroy {held.cluster}` releases the name)")


def holder(cluster: str, region: str) -> Claim | None:
    """Who holds ``cluster`` in ``region`` (None when nobody does, or AWS cannot say)."""
    try:
        return _Claims(region).read(cluster)
    except Exception:  # status shows what it can; an unreadable claim is not a failed status
        return None


def release(cluster: str, region: str, cluster_ids: set[str]) -> Claim | None:
    """Give the name back after a destroy that left nothing: only a claim on one of ``cluster_ids`` (the clusters
    just destroyed) or this directory's own. Returns a claim that stays (another owner's), else None."""
    claims = _Claims(region)
    held = claims.read(cluster)
    if held is None:
        return None
    if held.cluster_id in cluster_ids or held.mine:
        claims.delete(cluster)
        return None
    return held


def release_quietly(cluster: str, region: str, cluster_id: str, warn: Callable[[str], None]) -> None:
    """Give back a claim just taken by a create that stopped before its first resource; a failure to is only said
    (through ``warn``), since the create's own error is the one that matters (the claim stays this directory's, and
    its next create or destroy takes it over or gives it back)."""
    try:
        release(cluster, region, {cluster_id})
    except FmclusterError as exc:
        warn(f"the claim on the name {cluster} stays ({exc}); `fmcluster destroy {cluster}` gives it back")

