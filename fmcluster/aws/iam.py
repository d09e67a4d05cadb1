"""The nodes' IAM role and instance profile (or a role alone), as one resource made of parts.

A crash can stop a create or a delete between any two IAM calls, so every part is read on its own — the
role, its inline policy, its managed policies, the profile, the role inside the profile — and whatever is
missing is made (an ``update``) and whatever exists is deleted. Any crash point converges.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from botocore.exceptions import ClientError

from fmcluster.aws.ec2 import error_code, tolerate
from fmcluster.aws.ownership import require_ours, tag_dict
from fmcluster.engine import AttributeChange, Context, Observed, Resource, reads
from fmcluster.render.documents import Document


def _policy(document: Any) -> Any:
    """IAM hands policies back URL-encoded (or parsed); compare them as parsed JSON."""
    if isinstance(document, str):
        return json.loads(unquote(document))
    return document


class InstanceProfile(Resource):
    """The role (name and path PCS accepts), its policies, and the instance profile that carries it."""

    kind = "instance_profile"
    teardown_rank = 60
    replace_on = ("RoleName", "Path")

    def __init__(self, key: str, document: Document | None = None, role_name: str | None = None,
                 profile_name: str | None = None):
        self.key = key
        self.document = document
        if document is not None:
            role_name = document.body["role"]["RoleName"]
            profile_name = document.body["profile"]["InstanceProfileName"] if "profile" in document.body else None
        self.role_name = role_name
        self.profile_name = profile_name

    def _outputs(self, arn: str) -> dict[str, Any]:
        return {f"instance_profile.{self.key}.arn": arn, f"instance_profile.{self.key}.role_name": self.role_name,
                f"instance_profile.{self.key}.profile_name": self.profile_name}

    def _get(self, call: Any, field: str) -> dict[str, Any] | None:
        try:
            return call()[field]
        except ClientError as exc:
            if error_code(exc) == "NoSuchEntity":
                return None
            raise

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        iam = ctx.client("iam")
        # In a read-only pass, discovery's answers for the same names (fmcluster.engine.reads).
        role = reads.once(ctx, "iam.Role", self.role_name,
                          lambda: self._get(lambda: iam.get_role(RoleName=self.role_name), "Role"))
        if self.profile_name is None:
            return self._read_role(iam, role, ctx)
        profile = reads.once(ctx, "iam.InstanceProfile", self.profile_name, lambda: self._get(
            lambda: iam.get_instance_profile(InstanceProfileName=self.profile_name), "InstanceProfile"))
        if role is None and profile is None:
            return None
        if role is not None:
            require_ours(f"IAM role {self.role_name}", tag_dict(role.get("Tags")), ctx)
        if profile is not None:
            require_ours(f"IAM instance profile {self.profile_name}", tag_dict(profile.get("Tags")), ctx)
        attributes = self._role_attributes(iam, role) if role is not None else None
        if attributes is None and profile is None:
            return None
        missing: list[str] = []
        if attributes is None:
            missing.append("role")
        if profile is None:
            missing.append("instance profile")
        elif self.role_name not in [r["RoleName"] for r in profile.get("Roles", [])]:
            missing.append("role in the instance profile")
        arn = profile["Arn"] if profile else (role or {}).get("Arn")
        return Observed(arn, "available", "ready", self._outputs(profile["Arn"]) if profile else {},
                        attributes=attributes or {}, missing=missing)

    def _read_role(self, iam: Any, role: dict[str, Any] | None, ctx: Context) -> Observed | None:
        """A role without an instance profile (what EKS is given: the cluster's role, the nodes')."""
        if role is None:
            return None
        require_ours(f"IAM role {self.role_name}", tag_dict(role.get("Tags")), ctx)
        attributes = self._role_attributes(iam, role)
        if attributes is None:
            return None
        return Observed(role["Arn"], "available", "ready", self._outputs(role["Arn"]), attributes=attributes)

    def _role_attributes(self, iam: Any, role: dict[str, Any]) -> dict[str, Any] | None:
        """The role's trust and policies; None when it is deleted while we read (a killed command's DeleteRole
        may still land, as may another user's)."""
        attributes = {"RoleName": role["RoleName"], "Path": role.get("Path"),
                      "AssumeRolePolicyDocument": _policy(role.get("AssumeRolePolicyDocument"))}
        try:
            for name in iam.list_role_policies(RoleName=self.role_name)["PolicyNames"]:
                document = iam.get_role_policy(RoleName=self.role_name, PolicyName=name)["PolicyDocument"]
                attributes[f"inline_policy.{name}"] = _policy(document)
            attached = [p["PolicyArn"] for page in iam.get_paginator("list_attached_role_policies").paginate(
                RoleName=self.role_name) for p in page["AttachedPolicies"]]
        except ClientError as exc:
            if error_code(exc) == "NoSuchEntity":
                return None
            raise
        attributes["managed_policies"] = sorted(attached)
        return attributes

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = self.document.body
        desired = {"RoleName": body["role"]["RoleName"], "Path": body["role"].get("Path", "/"),
                   "AssumeRolePolicyDocument": _policy(body["role"]["AssumeRolePolicyDocument"]),
                   "managed_policies": sorted(body["managed_policies"])}
        policy = body.get("inline_policy")
        if policy is not None:
            desired[f"inline_policy.{policy['PolicyName']}"] = _policy(policy["PolicyDocument"])
        return desired

    def create(self, ctx: Context, token: str) -> Observed:
        self._converge(ctx, None)
        return self.read(ctx, None) or Observed(None, "available", "ready")

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        self._converge(ctx, observed)
        return self.read(ctx, observed.id) or observed

    def _converge(self, ctx: Context, observed: Observed | None) -> None:
        """Make every part the document has and AWS lacks, and drop policies the document does not name."""
        iam = ctx.client("iam")
        body = ctx.resolve(self.document.body)
        live = observed.attributes if observed else {}
        missing = set(observed.missing) if observed else {"role", "instance profile", "role in the instance profile"}
        if self.profile_name is None:
            missing -= {"instance profile", "role in the instance profile"}
        if "role" in missing:
            tolerate(lambda: iam.create_role(**body["role"]), "EntityAlreadyExists")
        elif live.get("AssumeRolePolicyDocument") != _policy(body["role"]["AssumeRolePolicyDocument"]):
            iam.update_assume_role_policy(RoleName=self.role_name,
                                          PolicyDocument=body["role"]["AssumeRolePolicyDocument"])
        inline = body.get("inline_policy")
        wanted_inline = f"inline_policy.{inline['PolicyName']}" if inline else None
        for path in [p for p in live if p.startswith("inline_policy.") and p != wanted_inline]:
            iam.delete_role_policy(RoleName=self.role_name, PolicyName=path.removeprefix("inline_policy."))
        if inline and live.get(wanted_inline) != _policy(inline["PolicyDocument"]):
            iam.put_role_policy(**inline)
        attached = set(live.get("managed_policies") or [])
        for arn in sorted(set(body["managed_policies"]) - attached):
            iam.attach_role_policy(RoleName=self.role_name, PolicyArn=arn)
        for arn in sorted(attached - set(body["managed_policies"])):
            iam.detach_role_policy(RoleName=self.role_name, PolicyArn=arn)
        if "instance profile" in missing:
            tolerate(lambda: iam.create_instance_profile(**body["profile"]), "EntityAlreadyExists")
        if "instance profile" in missing or "role in the instance profile" in missing:
            tolerate(lambda: iam.add_role_to_instance_profile(InstanceProfileName=self.profile_name,
                                                              RoleName=self.role_name), "LimitExceeded")

    def delete(self, ctx: Context, observed: Observed) -> None:
        """Delete every part that exists, each on its own: the order IAM requires, each step safe to repeat."""
        iam = ctx.client("iam")
        if self.profile_name is not None:
            tolerate(lambda: iam.remove_role_from_instance_profile(InstanceProfileName=self.profile_name,
                                                                   RoleName=self.role_name), "NoSuchEntity")
            tolerate(lambda: iam.delete_instance_profile(InstanceProfileName=self.profile_name), "NoSuchEntity")
        # A request of a killed command may still land (a policy attached after the list): list again, once.
        for attempt in range(2):
            try:
                self._delete_role(iam)
                return
            except ClientError as exc:
                if error_code(exc) != "DeleteConflict" or attempt:
                    raise

    def _delete_role(self, iam: Any) -> None:
        try:
            attached = [p["PolicyArn"] for page in iam.get_paginator("list_attached_role_policies").paginate(
                RoleName=self.role_name) for p in page["AttachedPolicies"]]
            inline = [n for page in iam.get_paginator("list_role_policies").paginate(RoleName=self.role_name)
                      for n in page["PolicyNames"]]
        except ClientError as exc:
            if error_code(exc) != "NoSuchEntity":
                raise
            return
        for arn in attached:
            tolerate(lambda arn=arn: iam.detach_role_policy(RoleName=self.role_name, PolicyArn=arn), "NoSuchEntity")
        for name in inline:
            tolerate(lambda name=name: iam.delete_role_policy(RoleName=self.role_name, PolicyName=name),
                     "NoSuchEntity")
        tolerate(lambda: iam.delete_role(RoleName=self.role_name), "NoSuchEntity")


class IamRole(InstanceProfile):
    """A role a service assumes (EKS's cluster role; the nodes' role, which a managed node group puts in its own
    instance profile): the same parts without the profile."""

    kind = "iam_role"

    def __init__(self, key: str, document: Document | None = None, role_name: str | None = None):
        super().__init__(key, document, role_name=role_name)
        self.profile_name = None

    def _outputs(self, arn: str) -> dict[str, Any]:
        return {f"iam_role.{self.key}.arn": arn, f"iam_role.{self.key}.name": self.role_name}
