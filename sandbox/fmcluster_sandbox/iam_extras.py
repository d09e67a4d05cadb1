"""IAM as AWS names it and answers it where moto does not: the EC2 Spot service-linked role, and
RemoveRoleFromInstanceProfile for a role the profile does not hold.

``aws iam create-service-linked-role --aws-service-name spot.amazonaws.com`` creates
``AWSServiceRoleForEC2Spot`` ("Service-linked role for Spot Instance requests", EC2 user guide); moto
derives ``AWSServiceRoleForspot`` from the service name.
"""

from __future__ import annotations


def install() -> None:
    from moto.iam import models

    models.SERVICE_NAME_CONVERSION.setdefault("spot", "EC2Spot")
    _remove_role_answers_no_such_entity(models)


def _remove_role_answers_no_such_entity(models) -> None:
    """RemoveRoleFromInstanceProfile for a role that is not in the profile is ``NoSuchEntity`` (404) in the
    IAM API reference; moto 5.2.5 raises ValueError, which its server turns into an HTML 500."""
    from moto.iam.exceptions import NotFoundException

    original = models.IAMBackend.remove_role_from_instance_profile
    if getattr(original, "_fmcluster", False):
        return

    def remove_role_from_instance_profile(self, profile_name: str, role_name: str) -> None:
        profile = self.get_instance_profile(profile_name)
        role = self.get_role(role_name)
        if role not in profile.roles:
            raise NotFoundException(f"The role {role_name} is not in the instance profile {profile_name}.")
        original(self, profile_name, role_name)

    remove_role_from_instance_profile._fmcluster = True  # type: ignore[attr-defined]
    models.IAMBackend.remove_role_from_instance_profile = remove_role_from_instance_profile
