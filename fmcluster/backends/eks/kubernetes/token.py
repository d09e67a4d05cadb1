"""The bearer token EKS's Kubernetes API accepts, made as ``aws eks get-token`` makes it.

awscli (customizations/eks/get_token.py) presigns STS ``GetCallerIdentity`` as a GET URL with the header
``x-k8s-aws-id: <cluster name>`` among the signed headers and ``ExpiresIn=60``, and sends
``k8s-aws-v1.`` + the URL in URL-safe base64 without padding. EKS's authenticator replays the URL to STS with the
header set to its own cluster, so a token works only for the cluster it names, for 60 seconds.
"""

from __future__ import annotations

import base64
from typing import Any

from fmcluster.connection import aws

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
# X-Amz-Expires of the presigned URL (awscli's TOKEN_EXPIRATION_MINS is the client-side expiry it reports; the
# URL itself is presigned for 60 s).
TOKEN_LIFETIME_SECONDS = 60


def eks_token(cluster: str, region: str) -> str:
    """A bearer token for ``cluster``'s Kubernetes API, signed with this command's AWS credentials."""
    sts = aws.client("sts", region)
    # the command's clients are shared: registered once per client however many tokens it signs
    sts.meta.events.register("provide-client-params.sts.GetCallerIdentity", _retrieve,
                             unique_id="fmcluster-k8s-aws-id-retrieve")
    sts.meta.events.register("before-sign.sts.GetCallerIdentity", _inject, unique_id="fmcluster-k8s-aws-id-inject")
    url = sts.generate_presigned_url("get_caller_identity", Params={CLUSTER_ID_HEADER: cluster},
                                     ExpiresIn=TOKEN_LIFETIME_SECONDS, HttpMethod="GET")
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


# GetCallerIdentity has no x-k8s-aws-id parameter: take it out before botocore validates the params and put it back
# as a header before signing (awscli's STSClientFactory._retrieve_k8s_aws_id / _inject_k8s_aws_id_header).
def _retrieve(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    if CLUSTER_ID_HEADER in params:
        context[CLUSTER_ID_HEADER] = params.pop(CLUSTER_ID_HEADER)


def _inject(request: Any, **_: Any) -> None:
    if CLUSTER_ID_HEADER in request.context:
        request.headers[CLUSTER_ID_HEADER] = request.context[CLUSTER_ID_HEADER]
