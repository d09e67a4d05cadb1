"""Lustre's links to S3 (data repository associations): lazy load from ``s3_import``, export to ``s3_export``.

An association is found by its recorded id, else among its file system's associations by this cluster's
``fmcluster:resource`` tag; its create carries the engine's idempotency token as ``ClientRequestToken``.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code
from fmcluster.aws.ownership import require_ours, tag_dict
from fmcluster.engine import Context, Observed, Resource
from fmcluster.render.common import RESOURCE_TAG
from fmcluster.render.documents import Document


def associations(fsx: Any, file_system_id: str) -> list[dict[str, Any]]:
    """Every data repository association of a file system (botocore has no paginator for this call)."""
    found: list[dict[str, Any]] = []
    token = None
    while True:
        page = fsx.describe_data_repository_associations(
            Filters=[{"Name": "file-system-id", "Values": [file_system_id]}], **({"NextToken": token} if token else {}))
        found += page.get("Associations", [])
        token = page.get("NextToken")
        if not token:
            return found


class FsxDataRepository(Resource):
    """A Lustre ↔ S3 link (lazy load from ``s3_import``, export to ``s3_export``)."""

    kind = "fsx_data_repository"
    teardown_rank = 70
    is_storage = True
    replace_on = ("DataRepositoryPath", "FileSystemPath", "FileSystemId")

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None,
                 file_system: str = "fsx_lustre.lustre.id"):
        self.key = key
        self.document = document
        self.known_id = known_id
        self.file_system = file_system

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        fsx = ctx.client("fsx")
        known_id = known_id or self.known_id
        if known_id:
            try:
                found = fsx.describe_data_repository_associations(AssociationIds=[known_id])["Associations"]
            except ClientError as exc:
                if error_code(exc) != "DataRepositoryAssociationNotFound":
                    raise
                found = []
        else:
            file_system = ctx.values.get(self.file_system)
            if not file_system or self.document is None:
                return None
            found = [a for a in associations(fsx, file_system)
                     if tag_dict(a.get("Tags")).get(RESOURCE_TAG) == self.name]
        for association in found:
            require_ours(f"data repository association {association['AssociationId']}",
                         tag_dict(association.get("Tags")), ctx)
            state = association.get("Lifecycle", "AVAILABLE")
            phase = {"AVAILABLE": "ready", "CREATING": "pending", "DELETING": "gone", "FAILED": "failed",
                     "MISCONFIGURED": "failed"}.get(state, "pending")
            attributes = {key: association.get(key) for key in ("DataRepositoryPath", "FileSystemPath",
                                                                 "FileSystemId")}
            return Observed(association["AssociationId"], state, phase, {},
                            association.get("FailureDetails", {}).get("Message", ""), attributes=attributes)
        return None

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = ctx.resolve(self.document.body, partial=True)
        return {key: body[key] for key in ("DataRepositoryPath", "FileSystemPath", "FileSystemId")}

    def create(self, ctx: Context, token: str) -> Observed:
        association = ctx.client("fsx").create_data_repository_association(
            ClientRequestToken=token[:63], **ctx.resolve(self.document.body))["Association"]
        return Observed(association["AssociationId"], association.get("Lifecycle", "CREATING"), "pending")

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("fsx").delete_data_repository_association(AssociationId=observed.id,
                                                                 DeleteDataInFileSystem=False)
        except ClientError as exc:
            if error_code(exc) != "DataRepositoryAssociationNotFound":
                raise
