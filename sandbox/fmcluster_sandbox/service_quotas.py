"""Service Quotas that moto does not have, per account and region: the EC2 vCPU quotas preflight reads and
the PCS Clusters quota the PCS emulator enforces.

moto's Service Quotas knows only ``vpc`` quotas and lacks ListServiceQuotas and GetAWSDefaultServiceQuota.
The sandbox answers for the quotas below. EC2's start generous, so preflight fails only when a test lowers
one; PCS's start at AWS's default ("Endpoints and service quotas for AWS PCS": Clusters, 5 per Region,
adjustable, ``L-0ADE95E3``), and EKS's node-group quotas at AWS's defaults too. Tests and demos change
them through ``POST /_fmcluster/quotas``.
"""

from __future__ import annotations

import json
from typing import Any

#: service code -> quota code -> (quota name, default value)
DEFAULT_QUOTAS: dict[str, dict[str, tuple[str, float]]] = {
    "ec2": {  # generous, in vCPUs
        "L-1216C47A": ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", 100000.0),
        "L-417A185B": ("Running On-Demand P instances", 100000.0),
        "L-DB2E81BA": ("Running On-Demand G and VT instances", 100000.0),
        "L-2C3B7624": ("Running On-Demand Trn instances", 100000.0),
        "L-7212CCBC": ("All P Spot Instance Requests", 100000.0),
        "L-3819A6DF": ("All G and VT Spot Instance Requests", 100000.0),
        "L-34B43A08": ("All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests", 100000.0),
    },
    "pcs": {"L-0ADE95E3": ("Clusters", 5.0)},
    # AWS's defaults: "Amazon EKS endpoints and quotas" (AWS General Reference, docs.aws.amazon.com/general/latest/
    # gr/eks.html) and the EKS User Guide's "Amazon EKS service quotas": 30 and 450, both adjustable.
    "eks": {"L-6D54EA21": ("Managed node groups per cluster", 30.0),
            "L-BD136A63": ("Nodes per managed node group", 450.0)},
}
SERVICE_NAMES = {"ec2": "Amazon Elastic Compute Cloud (Amazon EC2)", "pcs": "AWS Parallel Computing Service",
                 "eks": "Amazon Elastic Kubernetes Service (Amazon EKS)"}


def _quota_dict(account: str, region: str, service_code: str, code: str, name: str, value: float):
    return {
        "ServiceCode": service_code,
        "ServiceName": SERVICE_NAMES.get(service_code, service_code),
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
        table = {service: {code: [name, value] for code, (name, value) in quotas.items()}
                 for service, quotas in DEFAULT_QUOTAS.items()}
        backend._fmcluster_quotas = table
    return table


_QUOTAS_INSTALLED = False


def install_service_quotas() -> None:
    """Teach moto's Service Quotas backend the quotas above (idempotent)."""
    global _QUOTAS_INSTALLED
    if _QUOTAS_INSTALLED:
        return
    from moto.servicequotas.models import ServiceQuotasBackend
    from moto.servicequotas.responses import ServiceQuotasResponse

    orig_get = ServiceQuotasBackend.get_service_quota
    orig_list_default = ServiceQuotasBackend.list_aws_default_service_quotas

    def _ours(self: Any, service_code: str) -> list[dict[str, Any]] | None:
        entries = _quota_table(self).get(service_code)
        if entries is None:
            return None
        return [_quota_dict(self.account_id, self.region_name, service_code, code, name, value)
                for code, (name, value) in sorted(entries.items())]

    def get_service_quota(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        for quota in _ours(self, service_code) or []:
            if quota["QuotaCode"] == quota_code:
                return quota
        return orig_get(self, service_code, quota_code)

    def get_aws_default_service_quota(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        if quota_code in DEFAULT_QUOTAS.get(service_code, {}):
            name, value = DEFAULT_QUOTAS[service_code][quota_code]
            return _quota_dict(self.account_id, self.region_name, service_code, quota_code, name, value)
        return orig_get(self, service_code, quota_code)

    def list_aws_default_service_quotas(self: Any, service_code: str) -> list[dict[str, Any]]:
        if service_code in DEFAULT_QUOTAS:
            return [_quota_dict(self.account_id, self.region_name, service_code, code, name, value)
                    for code, (name, value) in sorted(DEFAULT_QUOTAS[service_code].items())]
        return orig_list_default(self, service_code)

    def list_service_quotas(self: Any, service_code: str) -> list[dict[str, Any]]:
        ours = _ours(self, service_code)
        return ours if ours is not None else orig_list_default(self, service_code)

    ServiceQuotasBackend.get_service_quota = get_service_quota
    ServiceQuotasBackend.get_aws_default_service_quota = get_aws_default_service_quota
    ServiceQuotasBackend.list_aws_default_service_quotas = list_aws_default_service_quotas
    ServiceQuotasBackend.list_service_quotas = list_service_quotas

    def _r_get_default(self: Any) -> str:
        params = json.loads(self.body or "{}")
        quota = self.backend.get_aws_default_service_quota(str(params.get("ServiceCode")),
                                                           str(params.get("QuotaCode")))
        return json.dumps({"Quota": quota})

    def _r_list(self: Any) -> str:
        params = json.loads(self.body or "{}")
        return json.dumps({"Quotas": self.backend.list_service_quotas(str(params.get("ServiceCode")))})

    ServiceQuotasResponse.get_aws_default_service_quota = _r_get_default
    ServiceQuotasResponse.list_service_quotas = _r_list
    _QUOTAS_INSTALLED = True


def _backend(account: str, region: str) -> Any:
    from moto.servicequotas.models import servicequotas_backends

    return servicequotas_backends[account][region]


def quota_value(service_code: str, quota_code: str, account: str, region: str) -> float:
    """The applied value of a quota, as GetServiceQuota would answer (what the emulators enforce)."""
    entries = _quota_table(_backend(account, region)).get(service_code, {})
    if quota_code not in entries:
        raise KeyError(f"no {service_code} quota {quota_code}")
    return float(entries[quota_code][1])


def set_quotas(changes: dict[str, Any]) -> dict[str, Any]:
    """Apply a ``POST /_fmcluster/quotas`` body; return the region's table afterwards."""
    from moto.core import DEFAULT_ACCOUNT_ID

    changes = dict(changes)
    region = str(changes.pop("region", "us-east-1"))
    account = str(changes.pop("account", DEFAULT_ACCOUNT_ID))
    service_code = str(changes.pop("service_code", "ec2"))
    backend = _backend(account, region)
    table = _quota_table(backend)
    if changes.pop("reset", False):
        backend._fmcluster_quotas = None
        table = _quota_table(backend)
    entries = table.setdefault(service_code, {})
    for code, value in changes.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"quota {code}: value must be a number, got {value!r}")
        name = entries.get(code, [DEFAULT_QUOTAS.get(service_code, {}).get(code, (code, 0))[0]])[0]
        entries[code] = [name, float(value)]
    return get_quotas(region, account)


def get_quotas(region: str, account: str | None = None) -> dict[str, Any]:
    from moto.core import DEFAULT_ACCOUNT_ID

    account = account or DEFAULT_ACCOUNT_ID
    table = _quota_table(_backend(account, region))
    return {"region": region, "account": account,
            "quotas": {sc: {code: value for code, (_n, value) in e.items()} for sc, e in table.items()}}
