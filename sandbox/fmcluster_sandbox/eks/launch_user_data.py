"""A managed node group's launch template user data, as EKS takes it.

EKS User Guide, "Customize managed nodes with launch templates": when the template names no custom AMI, EKS
merges its own bootstrap into the template's user data, which must then be a MIME multi-part document (for
AL2023, ``application/node.eks.aws`` parts hold nodeadm NodeConfigs, ``text/x-shellscript`` parts scripts).
EKS refuses any other user data at CreateNodegroup with "Ec2LaunchTemplateInvalidConfiguration: User data was not
in the MIME multipart format." (the error as users report it: aws-ia/terraform-aws-eks-blueprints#843,
terraform-aws-modules/terraform-aws-eks#1875). With a custom AMI the user data is the node's own business.
"""

from __future__ import annotations

import base64
import binascii
import email
from typing import Any

NOT_MIME = "Ec2LaunchTemplateInvalidConfiguration: User data was not in the MIME multipart format."


def problem(data: dict[str, Any]) -> str | None:
    """Why EKS would refuse the template's ``UserData`` for a node group, or None."""
    encoded = data.get("UserData")
    if not encoded or data.get("ImageId"):
        return None
    try:
        # moto keeps it as its Base64EncodedString (``as_bytes``: the base64 text), or a plain string
        raw = encoded.as_bytes() if hasattr(encoded, "as_bytes") else str(encoded).encode()
        text = base64.b64decode(raw, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return NOT_MIME
    message = email.message_from_string(text)
    return None if message.is_multipart() else NOT_MIME
