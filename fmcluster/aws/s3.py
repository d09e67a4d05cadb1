"""The cluster's S3 bucket (ParallelCluster): fmcluster makes it, uploads the scripts the nodes run
(``CustomActions``), and hands it to ParallelCluster as ``CustomS3Bucket``, so ParallelCluster keeps its own
artifacts there too and the nodes already may read it. ParallelCluster requires versioning on such a bucket
(its S3BucketValidator), so a delete removes every object version first.

Each object carries its SHA-256 as metadata: a changed script is an update (uploaded again), not a replacement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.discovery import Discovered
from fmcluster.aws.ec2 import error_code
from fmcluster.aws.ownership import is_ours, require_ours, tag_dict, tagged_for_cluster
from fmcluster.engine import AttributeChange, Context, Observed, Resource, reads
from fmcluster.render.common import CLUSTER_ID_TAG, RESOURCE_TAG
from fmcluster.render.documents import Document

_GONE = ("404", "NoSuchBucket", "NotFound")


class ScriptsBucket(Resource):
    kind = "bucket"
    teardown_rank = 60
    stored_data = "every object in the bucket (the nodes' scripts, and what ParallelCluster keeps there)"

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None):
        self.key = key
        self.document = document
        self.known_id = known_id

    def _name(self, ctx: Context) -> str:
        if self.document is not None:
            return ctx.resolve(self.document.body["create"]["Bucket"])
        return self.known_id or ""

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        s3 = ctx.client("s3")
        name = known_id or self._name(ctx)
        try:
            tags = reads.kept(ctx, "s3.BucketTagging", name)  # discovery's answer in this read-only pass
            if tags is reads.MISSING:
                s3.head_bucket(Bucket=name)
                tags = s3.get_bucket_tagging(Bucket=name).get("TagSet", [])
        except ClientError as exc:
            if error_code(exc) in _GONE:
                return None
            if error_code(exc) == "NoSuchTagSet":
                tags = []
            else:
                raise
        require_ours(f"S3 bucket {name}", tag_dict(tags), ctx)
        attributes = {}
        for item in (self.document.body.get("objects", []) if self.document is not None else []):
            try:
                head = s3.head_object(Bucket=name, Key=item["Key"])
                attributes[f"objects.{item['Key']}"] = head.get("Metadata", {}).get("sha256")
            except ClientError as exc:
                if error_code(exc) not in _GONE:
                    raise
                attributes[f"objects.{item['Key']}"] = None
        return Observed(name, "available", "ready", {f"bucket.{self.key}.name": name}, attributes=attributes)

    def desired(self, ctx: Context) -> dict[str, Any]:
        return {f"objects.{item['Key']}": item["Sha256"] for item in self.document.body.get("objects", [])}

    def _upload(self, ctx: Context, name: str, keys: set[str] | None = None) -> None:
        s3 = ctx.client("s3")
        for item in self.document.body.get("objects", []):
            if keys is None or item["Key"] in keys:
                s3.put_object(Bucket=name, Key=item["Key"], Body=Path(item["Source"]).read_bytes(),
                              Metadata={"sha256": item["Sha256"]}, ServerSideEncryption="AES256")

    def create(self, ctx: Context, token: str) -> Observed:
        s3 = ctx.client("s3")
        body = ctx.resolve(self.document.body)
        name = body["create"]["Bucket"]
        try:
            s3.create_bucket(**body["create"])
        except ClientError as exc:
            if error_code(exc) != "BucketAlreadyOwnedByYou":  # a re-run after a crash
                raise
        s3.put_bucket_tagging(**body["tagging"])
        s3.put_bucket_versioning(**body["versioning"])
        s3.put_public_access_block(**body["public_access"])
        self._upload(ctx, name)
        return Observed(name, "available", "ready", {f"bucket.{self.key}.name": name})

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        keys = {c.path.removeprefix("objects.") for c in changes if c.path.startswith("objects.")}
        self._upload(ctx, observed.id or "", keys)
        return Observed(observed.id, "available", "ready", observed.outputs)

    def delete(self, ctx: Context, observed: Observed) -> None:
        s3 = ctx.client("s3")
        name = observed.id or ""
        try:
            for page in s3.get_paginator("list_object_versions").paginate(Bucket=name):
                doomed = [{"Key": v["Key"], "VersionId": v["VersionId"]}
                          for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
                if doomed:
                    s3.delete_objects(Bucket=name, Delete={"Objects": doomed, "Quiet": True})
            s3.delete_bucket(Bucket=name)
        except ClientError as exc:
            if error_code(exc) not in _GONE:
                raise


def scan_buckets(ctx: Context) -> list:
    """fmcluster's buckets tagged for the cluster (S3 lists every bucket; only ``fmcluster-`` ones are asked)."""
    s3 = ctx.client("s3")
    found = []
    for bucket in s3.list_buckets().get("Buckets", []):
        name = bucket["Name"]
        if not name.startswith("fmcluster-"):
            continue
        try:
            tag_set = s3.get_bucket_tagging(Bucket=name).get("TagSet", [])
            reads.keep(ctx, "s3.BucketTagging", tag_set, name)  # ScriptsBucket.read's, in a read-only pass
            tags = tag_dict(tag_set)
        except ClientError as exc:
            if error_code(exc) in (*_GONE, "NoSuchTagSet"):
                continue
            raise
        if not tagged_for_cluster(tags, ctx):
            continue
        ours = is_ours(tags, ctx)
        resource = tags.get(RESOURCE_TAG) or "bucket:scripts"
        found.append(Discovered(resource, name, "available", f"S3 bucket {name}", ours,
                                ScriptsBucket(resource.partition(":")[2], known_id=name) if ours else None,
                                tags.get(CLUSTER_ID_TAG, "")))
    return found
