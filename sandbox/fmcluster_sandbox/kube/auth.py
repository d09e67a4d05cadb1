"""EKS's IAM authentication of Kubernetes API requests: the ``k8s-aws-v1.`` bearer token.

``aws eks get-token`` (awscli/customizations/eks/get_token.py) presigns STS ``GetCallerIdentity`` as a GET URL with
the header ``x-k8s-aws-id: <cluster name>`` signed in, ``ExpiresIn=60``, and sends
``k8s-aws-v1.<base64url of the URL, padding stripped>``. EKS's authenticator (aws-iam-authenticator,
pkg/token/token.go ``Verify``) checks the token's form, that the URL is an STS GetCallerIdentity URL with only the
presigning parameters, that ``X-Amz-SignedHeaders`` holds ``x-k8s-aws-id``, and the 15-minute cap on
``X-Amz-Date``; it then sends the URL to STS with ``x-k8s-aws-id`` set to *its own* cluster, so STS's signature
check refuses a token made for another cluster, an expired one (``X-Amz-Expires``) and unknown credentials.

The sandbox is that STS: it recomputes the SigV4 query signature (botocore's signer, with the secret moto holds for
the key) with ``x-k8s-aws-id`` set to the cluster the request came to. Secrets it knows: access keys of moto's
IAM users, credentials moto's STS handed out (AssumeRole), and the sandbox's published pair ``testing``/``testing``
(fmcluster_sandbox.manager). Any other key is refused as STS refuses an unknown key (InvalidClientTokenId).
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hmac
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
MAX_TOKEN_BYTES = 4096  # aws-iam-authenticator maxTokenLenBytes
MAX_AGE = _dt.timedelta(minutes=15)  # aws-iam-authenticator presignedURLExpiration
# aws-iam-authenticator parameterWhitelist: any other query parameter makes the token invalid.
ALLOWED_PARAMS = {"action", "version", "x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-expires",
                  "x-amz-security-token", "x-amz-signature", "x-amz-signedheaders"}
STS_HOST = re.compile(r"^sts(\.[a-z0-9-]+)?\.amazonaws\.com(\.cn)?$")
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
SANDBOX_CREDENTIALS = {"testing": "testing"}  # the pair the sandbox tells clients to sign with


class TokenRejected(Exception):
    """The token is not valid for this cluster; the message says why (the API server answers only 401)."""


@dataclass(frozen=True)
class Identity:
    arn: str  # the IAM principal ARN an EKS access entry names (users: user ARN; assumed roles: the role ARN)
    caller_arn: str  # what STS GetCallerIdentity answers
    account: str
    access_key: str
    region: str

    @property
    def username(self) -> str:
        """The Kubernetes user name an access entry gives by default: the IAM user's ARN; for a role, its session
        ``arn:aws:sts::<account>:assumed-role/<role>/<session>`` (EKS guide, "Create access entries")."""
        return self.caller_arn if ":assumed-role/" in self.caller_arn else self.arn


def verify(token: str, cluster: str, now: _dt.datetime) -> Identity:
    """The identity behind a bearer token sent to ``cluster``'s endpoint, or TokenRejected."""
    if not token.startswith(TOKEN_PREFIX):
        raise TokenRejected("token does not start with k8s-aws-v1.")
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenRejected("token is too large")
    encoded = token[len(TOKEN_PREFIX):]
    try:
        url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise TokenRejected(f"token is not base64url: {exc}") from None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme != "https" and not (parts.scheme == "http" and host in LOOPBACK):
        raise TokenRejected(f"unexpected scheme {parts.scheme!r}")
    if not (STS_HOST.match(host) or host in LOOPBACK):  # the sandbox itself serves STS on loopback
        raise TokenRejected(f"unexpected hostname {host!r} in pre-signed URL")
    if parts.path not in ("", "/"):
        raise TokenRejected(f"unexpected path {parts.path!r} in pre-signed URL")
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    params = {k: v for k, v in pairs}
    lower = {k.lower(): v for k, v in pairs}
    if len(lower) != len(pairs):
        raise TokenRejected("query parameter given twice")
    for key in lower:
        if key not in ALLOWED_PARAMS:
            raise TokenRejected(f"non-allowlisted query parameter {key!r}")
    if lower.get("action") != "GetCallerIdentity":
        raise TokenRejected("unexpected action parameter in pre-signed URL")
    if lower.get("x-amz-algorithm") != "AWS4-HMAC-SHA256":
        raise TokenRejected("unexpected X-Amz-Algorithm")
    signed_headers = lower.get("x-amz-signedheaders", "").split(";")
    if CLUSTER_ID_HEADER not in signed_headers:
        raise TokenRejected(f"client did not sign the {CLUSTER_ID_HEADER} header in the pre-signed URL")
    try:
        signed_at = _dt.datetime.strptime(lower.get("x-amz-date", ""), "%Y%m%dT%H%M%SZ").replace(
            tzinfo=_dt.timezone.utc)
        expires = int(lower.get("x-amz-expires", ""))
    except ValueError:
        raise TokenRejected("X-Amz-Date or X-Amz-Expires missing or malformed") from None
    if now > signed_at + MAX_AGE:
        raise TokenRejected("X-Amz-Date parameter is expired (15 minute expiration)")
    if now > signed_at + _dt.timedelta(seconds=expires):  # STS: "Request has expired."
        raise TokenRejected(f"Request has expired (signed {signed_at:%Y-%m-%dT%H:%M:%SZ}, expires after {expires} s)")
    scope = lower.get("x-amz-credential", "").split("/")
    if len(scope) != 5 or scope[3] != "sts" or scope[4] != "aws4_request":
        raise TokenRejected("X-Amz-Credential is not an STS credential scope")
    access_key, region = scope[0], scope[2]
    secret, session_token = _secret(access_key)
    if secret is None:
        raise TokenRejected("The security token included in the request is invalid (unknown access key)")
    if session_token is not None and lower.get("x-amz-security-token") != session_token:
        raise TokenRejected("The security token included in the request is invalid (session token)")
    expected = _signature(parts.scheme, parts.netloc, params, signed_headers, cluster, access_key, secret, region)
    if not hmac.compare_digest(expected, lower.get("x-amz-signature", "")):
        raise TokenRejected("SignatureDoesNotMatch: the token was not signed for this cluster "
                            f"({CLUSTER_ID_HEADER}: {cluster}) with these credentials")
    return _identity(access_key, region)


def _signature(scheme: str, netloc: str, params: dict[str, str], signed_headers: list[str], cluster: str,
               access_key: str, secret: str, region: str) -> str:
    """SigV4 query signature STS computes for this URL, with ``x-k8s-aws-id`` set to ``cluster``."""
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    from botocore.utils import percent_encode_sequence

    unsigned = {k: v for k, v in params.items() if k.lower() != "x-amz-signature"}
    request = AWSRequest(method="GET", url=f"{scheme}://{netloc}/?{percent_encode_sequence(unsigned)}")
    headers = {"host": netloc, CLUSTER_ID_HEADER: cluster}
    for name in signed_headers:
        if name not in headers:
            raise TokenRejected(f"signed header {name!r} cannot be reproduced by the authenticator")
        request.headers[name] = headers[name]
    request.context["timestamp"] = params.get("X-Amz-Date", "")
    signer = SigV4QueryAuth(Credentials(access_key, secret), "sts", region)
    canonical = signer.canonical_request(request)
    return signer.signature(signer.string_to_sign(request, canonical), request)


def _secret(access_key: str) -> tuple[str | None, str | None]:
    """(secret access key, session token or None) that moto's IAM/STS hold for ``access_key``."""
    from moto.iam.models import iam_backends
    from moto.sts.models import sts_backends

    # Session credentials first: moto files AssumeRole's keys among IAM's access keys too, without the token.
    for account in list(sts_backends):
        for partition in list(sts_backends[account]):
            role = sts_backends[account][partition].get_assumed_role_from_access_key(access_key)
            if role is not None:
                return role.secret_access_key, role.session_token
    for account in list(iam_backends):
        for partition in list(iam_backends[account]):
            key = iam_backends[account][partition].access_keys.get(access_key)
            if key is not None and getattr(key, "status", "Active") == "Active":
                return key.secret_access_key, None
    return SANDBOX_CREDENTIALS.get(access_key), None


def _identity(access_key: str, region: str) -> Identity:
    """What moto's STS GetCallerIdentity answers for the key, and the IAM ARN an access entry would name."""
    from moto.iam.models import get_account_id_from
    from moto.sts.models import sts_backends

    account = get_account_id_from(access_key)
    backend = sts_backends[account]["aws"]
    _user_id, caller, account = backend.get_caller_identity(access_key, region)
    return Identity(arn=principal_arn(caller), caller_arn=caller, account=account, access_key=access_key,
                    region=region)


def principal_arn(caller_arn: str) -> str:
    """The IAM ARN EKS maps a caller to: an assumed-role session to its role, ``sts::…:user/`` to ``iam::``.

    aws-iam-authenticator (pkg/arn ``Canonicalize``) turns ``arn:aws:sts::A:assumed-role/R/S`` into
    ``arn:aws:iam::A:role/R``. moto answers ``arn:aws:sts::A:user/moto`` for keys it did not issue, a form real
    STS never returns for a user; it is read as the IAM user ``arn:aws:iam::A:user/moto``.
    """
    match = re.match(r"^arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([^/]+)/[^/]+$", caller_arn)
    if match:
        return f"arn:{match[1]}:iam::{match[2]}:role/{match[3]}"
    match = re.match(r"^arn:(aws[a-z-]*):sts::(\d{12}):user/(.+)$", caller_arn)
    if match:
        return f"arn:{match[1]}:iam::{match[2]}:user/{match[3]}"
    return caller_arn
