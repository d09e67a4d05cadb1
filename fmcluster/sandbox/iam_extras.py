"""IAM as AWS names it where moto does not: the EC2 Spot service-linked role.

``aws iam create-service-linked-role --aws-service-name spot.amazonaws.com`` creates
``AWSServiceRoleForEC2Spot`` ("Service-linked role for Spot Instance requests", EC2 user guide); moto
derives ``AWSServiceRoleForspot`` from the service name.
"""

from __future__ import annotations


def install() -> None:
    from moto.iam import models

    models.SERVICE_NAME_CONVERSION.setdefault("spot", "EC2Spot")
