"""EC2 Service Quotas that moto does not have (the vCPU quotas preflight reads), per account and region.

moto's Service Quotas knows only ``vpc`` quotas and lacks ListServiceQuotas and GetAWSDefaultServiceQuota.
The sandbox answers for the EC2 quotas below, with generous values that tests lower through
``POST /_fmcluster/quotas``.
"""

from __future__ import annotations

import json
from typing import Any

#: Generous defaults, in vCPUs, so that preflight never fails unless a test lowers one on purpose.
DEFAULT_EC2_QUOTAS: dict[str, tuple[str, float]] = {
    "L-1216C47A": ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", 100000.0),
    "L-417A185B": ("Running On-Demand P instances", 100000.0),
    "L-DB2E81BA": ("Running On-Demand G and VT instances", 100000.0),
    "L-2C3B7624": ("Running On-Demand Trn instances", 100000.0),
    "L-7212CCBC": ("All P Spot Instance Requests", 100000.0),
}
_EC2_SERVICE_NAME = "Amazon Elastic Compute Cloud (Amazon EC2)"


def _quota_dict(account: str, region: str, service_code: str, code: str, name: str, value: float):
    return {
        "ServiceCode": service_code,
        "ServiceName": _EC2_SERVICE_NAME if service_code == "ec2" else service_code,
        "QuotaArn": f"arn:aws:servicequotas:{region}:{account}:{service_code}/{code}",
        "QuotaCode": code,
        "QuotaName": name,
        "Value": float(value),
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def _quota_table(backend: Any) -> dict[str, dict[str, list]]:
    """Per-backend (account+region) table ``{service_code: {code: [name, value]}}``.

    Kept on moto's own backend object, so moto's reset (which drops backends) also resets quotas.
    """
    table = getattr(backend, "_fmcluster_quotas", None)
    if table is None:
        table = {"ec2": {code: [name, value] for code, (name, value) in DEFAULT_EC2_QUOTAS.items()}}
        backend._fmcluster_quotas = table
    return table


_QUOTAS_INSTALLED = False


def install_service_quotas() -> None:
    """Teach moto's Service Quotas backend the EC2 quotas preflight reads (idempotent)."""
    global _QUOTAS_INSTALLED
    if _QUOTAS_INSTALLED:
        return
    from moto.servicequotas.exceptions import NoSuchResource
    from moto.servicequotas.models import ServiceQuotasBackend
    from moto.servicequotas.responses import ServiceQuotasResponse

    orig_get = ServiceQuotasBackend.get_service_quota
    orig_list_default = ServiceQuotasBackend.list_aws_default_service_quotas

    def _ours(self: Any, service_code: str) -> list[dict[str, Any]] | None:
        entries = _quota_table(self).get(service_code)
        if entries is None:
            return None
        return [
            _quota_dict(self.account_id, self.region_name, service_code, code, name, value)
            for code, (name, value) in sorted(entries.items())
        ]

    def get_service_quota(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        for quota in _ours(self, service_code) or []:
            if quota["QuotaCode"] == quota_code:
                return quota
        return orig_get(self, service_code, quota_code)

    def get_aws_default_service_quota(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code in DEFAULT_EC2_QUOTAS_BY_SERVICE and quota_code in DEFAULT_EC2_QUOTAS:
            name, value = DEFAULT_EC2_QUOTAS[quota_code]
            return _quota_dict(self.account_id, self.region_name, service_code, quota_code, name, value)
        return orig_get(self, service_code, quota_code)

    def list_aws_default_service_quotas(self: Any, service_code: str) -> list[dict[str, Any]]:
        if service_code in DEFAULT_EC2_QUOTAS_BY_SERVICE:
            return [
                _quota_dict(self.account_id, self.region_name, service_code, code, name, value)
                for code, (name, value) in sorted(DEFAULT_EC2_QUOTAS.items())
            ]
        return orig_list_default(self, service_code)

    def list_service_quotas(self: Any, service_code: str) -> list[dict[str, Any]]:
        ours = _ours(self, service_code)
        if ours is not None:
            return ours
        try:
            return orig_list_default(self, service_code)
        except NoSuchResource:
            raise

    ServiceQuotasBackend.get_service_quota = get_service_quota
    ServiceQuotasBackend.get_aws_default_service_quota = get_aws_default_service_quota
    ServiceQuotasBackend.list_aws_default_service_quotas = list_aws_default_service_quotas
    ServiceQuotasBackend.list_service_quotas = list_service_quotas

    def _r_get_default(self: Any) -> str:
        params = json.loads(self.body or "{}")
        quota = self.backend.get_aws_default_service_quota(
            str(params.get("ServiceCode")), str(params.get("QuotaCode"))
        )
        return json.dumps({"Quota": quota})

    def _r_list(self: Any) -> str:
        params = json.loads(self.body or "{}")
        return json.dumps({"Quotas": self.backend.list_service_quotas(str(params.get("ServiceCode")))})

    ServiceQuotasResponse.get_aws_default_service_quota = _r_get_default
    ServiceQuotasResponse.list_service_quotas = _r_list
    _QUOTAS_INSTALLED = True


DEFAULT_EC2_QUOTAS_BY_SERVICE = {"ec2"}


def set_quotas(changes: dict[str, Any]) -> dict[str, Any]:
    """Apply a ``POST /_fmcluster/quotas`` body; return the region's table afterwards."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.servicequotas.models import servicequotas_backends

    changes = dict(changes)
    region = str(changes.pop("region", "us-east-1"))
    account = str(changes.pop("account", DEFAULT_ACCOUNT_ID))
    service_code = str(changes.pop("service_code", "ec2"))
    backend = servicequotas_backends[account][region]
    table = _quota_table(backend)
    if changes.pop("reset", False):
        backend._fmcluster_quotas = None
        table = _quota_table(backend)
    entries = table.setdefault(service_code, {})
    for code, value in changes.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"quota {code}: value must be a number, got {value!r}")
        name = entries.get(code, [DEFAULT_EC2_QUOTAS.get(code, (code, 0))[0]])[0]
        entries[code] = [name, float(value)]
    return get_quotas(region, account)


def get_quotas(region: str, account: str | None = None) -> dict[str, Any]:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.servicequotas.models import servicequotas_backends

    account = account or DEFAULT_ACCOUNT_ID
    table = _quota_table(servicequotas_backends[account][region])
    return {
        "region": region,
        "account": account,
        "quotas": {sc: {code: value for code, (_n, value) in e.items()} for sc, e in table.items()},
    }
