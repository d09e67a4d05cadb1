"""A self-signed TLS certificate for the sandbox endpoint.

The sandbox serves HTTPS so that requests look like they do against AWS (ParallelCluster's S3 bucket
policy denies ``aws:SecureTransport = false``). Clients trust the certificate through
``AWS_CA_BUNDLE=<home>/sandbox/cert.pem``. The certificate is created once per sandbox home and reused;
its subject alternative names cover ``127.0.0.1``, ``::1`` and ``localhost`` (and ``*.localhost`` for
virtual-host style S3 requests).
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
from pathlib import Path

CERT_NAME = "cert.pem"
KEY_NAME = "key.pem"
_VALID_DAYS = 3650


def cert_paths(sandbox_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``(cert.pem, key.pem)`` inside *sandbox_dir* (``<home>/sandbox``)."""
    d = Path(sandbox_dir)
    return d / CERT_NAME, d / KEY_NAME


def _is_usable(cert_file: Path, key_file: Path) -> bool:
    if not (cert_file.is_file() and key_file.is_file()):
        return False
    try:
        from cryptography import x509

        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        not_after = cert.not_valid_after_utc
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        ips = san.get_values_for_type(x509.IPAddress)
    except Exception:  # unreadable, expired-format, or without SAN: make a new one
        return False
    remaining = not_after - _dt.datetime.now(_dt.timezone.utc)
    return remaining > _dt.timedelta(days=1) and ipaddress.ip_address("127.0.0.1") in ips


def ensure_certificate(sandbox_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Return ``(cert_path, key_path)``, creating a self-signed pair if none usable exists yet."""
    cert_file, key_file = cert_paths(sandbox_dir)
    if _is_usable(cert_file, key_file):
        return cert_file, key_file

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "fmcluster sandbox"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fmcluster (local test endpoint)"),
        ]
    )
    now = _dt.datetime.now(_dt.timezone.utc)
    san = x509.SubjectAlternativeName(
        [
            x509.DNSName("localhost"),
            x509.DNSName("*.localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=_VALID_DAYS))
        .add_extension(san, critical=False)
        # A self-signed leaf that is also its own CA: OpenSSL (and so botocore) accepts it as a trust
        # anchor given through AWS_CA_BUNDLE.
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False
        )
        .sign(key, hashes.SHA256())
    )

    cert_file.parent.mkdir(parents=True, exist_ok=True)
    key_bytes = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # Write atomically so that two sandboxes starting at once never read half a file.
    tmp_key = key_file.with_name(f".{key_file.name}.{os.getpid()}")
    fd = os.open(tmp_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key_bytes)
    tmp_cert = cert_file.with_name(f".{cert_file.name}.{os.getpid()}")
    tmp_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.replace(tmp_key, key_file)
    os.replace(tmp_cert, cert_file)
    return cert_file, key_file
