"""EC2 Local Zones, which moto 5.2.5 lacks: the US East (Dallas) Local Zone where AWS sells p6e-gb200.

What AWS does, and the sandbox does too:

* DescribeAvailabilityZones lists a Local Zone only once the account has opted in to its zone group, or with
  ``AllAvailabilityZones=true`` ("Include all Availability Zones, Local Zones, and Wavelength Zones regardless
  of your opt-in status. If you do not use this parameter, the results include only the zones for the Regions
  where you have chosen the option to opt in": EC2 API reference, DescribeAvailabilityZones). Each zone has
  ``OptInStatus`` (``opt-in-not-required`` for Availability Zones; ``opted-in``/``not-opted-in`` for Local
  Zones), ``ZoneType`` (``availability-zone``/``local-zone``), ``GroupName`` (``us-east-1-zg-1`` for the
  Availability Zones, the Local Zone group such as ``us-west-2-lax-1`` otherwise) and ``NetworkBorderGroup``
  (EC2 API reference, AvailabilityZone).
* ModifyAvailabilityZoneGroup opts the account in to a zone group; "The only valid value is opted-in. You must
  contact AWS Support to opt out" (EC2 API reference, ModifyAvailabilityZoneGroup).
* A subnet in a Local Zone needs the zone enabled first ("To use a Local Zone, you must first enable it. Next,
  you create a subnet in the Local Zone": Local Zones user guide, "How AWS Local Zones work"). Before that,
  CreateSubnet answers as it does for any zone the account cannot use: ``InvalidParameterValue``, "Value (…)
  for parameter availabilityZone is invalid. Subnets can currently only be created in the following
  availability zones: …" (the answer users quote, e.g. boto/boto#1904; AWS does not document a Local-Zone
  specific code).
* A default VPC has default subnets in the Region's Availability Zones only ("Default subnets": Amazon VPC
  guide, one per Availability Zone), so the zone is never added to moto's class-level zone list (from which
  moto makes default subnets), and a subnet created in it is never ``DefaultForAz`` nor auto-assigns public
  addresses (moto marks the first subnet of any zone as its default).

The Dallas zone's facts: name ``us-east-1-dfw-2a`` (instance-facts.yaml, "purchase"), network border group
``us-east-1-dfw-2`` (EC2 API reference, ProvisionByoipCidr, which lists it among Local Zone border groups),
zone id ``use1-dfw2-az1`` (:data:`fmcluster_sandbox.instance_catalog.ZONE_IDS`). Its parent zone is not
published, so ``ParentZoneName``/``ParentZoneId`` are left out rather than guessed. The opt-in state lives on
moto's EC2 backend of the account and Region, so a sandbox reset forgets it with everything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from fmcluster_sandbox import instance_catalog, model_check
from fmcluster_sandbox.ec2_query import error, ok

ACTIONS = ("DescribeAvailabilityZones", "ModifyAvailabilityZoneGroup")


@dataclass(frozen=True)
class LocalZone:
    name: str
    group: str
    region: str

    @property
    def zone_id(self) -> str:
        return instance_catalog.ZONE_IDS[self.name]


LOCAL_ZONES = {"us-east-1": [LocalZone("us-east-1-dfw-2a", "us-east-1-dfw-2", "us-east-1")]}
# DescribeAvailabilityZones filters (EC2 API reference) and the zone field each one reads.
_FILTERS = {"group-long-name": "GroupLongName", "group-name": "GroupName", "message": "Message",
            "opt-in-status": "OptInStatus", "parent-zone-id": "ParentZoneId", "parent-zone-name": "ParentZoneName",
            "region-name": "RegionName", "state": "State", "zone-id": "ZoneId", "zone-name": "ZoneName",
            "zone-type": "ZoneType", "network-border-group": "NetworkBorderGroup"}
_INSTALLED = False


def local_zone(region: str, name: str | None = None, zone_id: str | None = None) -> LocalZone | None:
    return next((z for z in LOCAL_ZONES.get(region, []) if (name and z.name == name) or
                 (zone_id and z.zone_id == zone_id)), None)


def _opted_in(backend: Any) -> set[str]:
    if not hasattr(backend, "_fmcluster_opted_in_groups"):
        backend._fmcluster_opted_in_groups = set()
    return backend._fmcluster_opted_in_groups


def _backend(account: str, region: str) -> Any:
    from moto.ec2.models import ec2_backends

    return ec2_backends[account][region]


def _zones(backend: Any, region: str) -> list[dict[str, str]]:
    """Every zone of the Region as DescribeAvailabilityZones describes it, Local Zones with this account's status."""
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    zones = [{"ZoneName": z.name, "ZoneId": z.zone_id, "ZoneType": "availability-zone", "RegionName": region,
              "State": "available", "OptInStatus": "opt-in-not-required", "GroupName": f"{region}-zg-1",
              "NetworkBorderGroup": region} for z in RegionsAndZonesBackend.zones.get(region, [])]
    opted = _opted_in(backend)
    zones += [{"ZoneName": z.name, "ZoneId": z.zone_id, "ZoneType": "local-zone", "RegionName": region,
               "State": "available", "OptInStatus": "opted-in" if z.group in opted else "not-opted-in",
               "GroupName": z.group, "NetworkBorderGroup": z.group} for z in LOCAL_ZONES.get(region, [])]
    return zones


def usable_zone_names(backend: Any, region: str) -> list[str]:
    return [z["ZoneName"] for z in _zones(backend, region) if z["OptInStatus"] != "not-opted-in"]


def handle(action: str, params: dict[str, str], region: str, account: str) -> tuple[int, dict, bytes]:
    request, unknown = model_check.from_query("ec2", action, params)
    problems = unknown + model_check.check("ec2", action, request)
    if problems:
        name, message = problems[0]
        code = "MissingParameter" if message == "is required" else (
            "InvalidParameterValue" if name in request else "UnknownParameter")
        return error(code, f"{name}: {message}")
    if request.get("DryRun"):
        return error("DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
    backend = _backend(account, region)
    if action == "ModifyAvailabilityZoneGroup":
        return _modify_group(backend, region, request)
    return _describe(backend, region, request)


def _modify_group(backend: Any, region: str, request: dict[str, Any]) -> tuple[int, dict, bytes]:
    group = request["GroupName"]
    groups = {z.group for z in LOCAL_ZONES.get(region, [])}
    if group not in groups:
        return error("InvalidParameterValue", f"The zone group '{group}' is not a Local Zone or Wavelength Zone "
                                              f"group of {region}.")
    if request["OptInStatus"] != "opted-in":
        return error("InvalidParameterValue", "The only valid value for OptInStatus is opted-in: contact AWS Support "
                                              "to opt out of a Local Zone or Wavelength Zone group.")
    _opted_in(backend).add(group)
    return ok("ModifyAvailabilityZoneGroupResponse", "<return>true</return>")


def _describe(backend: Any, region: str, request: dict[str, Any]) -> tuple[int, dict, bytes]:
    zones = _zones(backend, region)
    if not request.get("AllAvailabilityZones"):
        zones = [z for z in zones if z["OptInStatus"] != "not-opted-in"]
    names, ids = request.get("ZoneNames") or [], request.get("ZoneIds") or []
    zones = [z for z in zones if (not names or z["ZoneName"] in names) and (not ids or z["ZoneId"] in ids)]
    for flt in request.get("Filters") or []:
        field = _FILTERS.get(flt.get("Name", ""))
        if field is None:
            return error("InvalidParameterValue", f"The filter '{flt.get('Name')}' is invalid")
        values = set(flt.get("Values") or [])
        zones = [z for z in zones if z.get(field) in values]
    items = "".join("<item>" + "".join(f"<{_xml_name(k)}>{escape(v)}</{_xml_name(k)}>" for k, v in z.items())
                    + "<messageSet/></item>" for z in zones)
    return ok("DescribeAvailabilityZonesResponse", f"<availabilityZoneInfo>{items}</availabilityZoneInfo>")


def _xml_name(field: str) -> str:
    return field[0].lower() + field[1:]


def install() -> None:
    """CreateSubnet in a Local Zone: refused before the account opts in; after, made in that zone, never the
    zone's default subnet (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from moto.ec2.exceptions import InvalidAvailabilityZoneError
    from moto.ec2.models import EC2Backend
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend, Zone

    create_subnet = EC2Backend.create_subnet

    def create(self: Any, vpc_id: str, cidr_block: str, ipv6_cidr_block: str | None = None,
               availability_zone: str | None = None, availability_zone_id: str | None = None,
               **kwargs: Any) -> Any:
        zone = local_zone(self.region_name, availability_zone, availability_zone_id)
        if zone is None:
            return create_subnet(self, vpc_id, cidr_block, ipv6_cidr_block, availability_zone,
                                 availability_zone_id, **kwargs)
        if zone.group not in _opted_in(self):
            raise InvalidAvailabilityZoneError(availability_zone or zone.zone_id,
                                               ", ".join(usable_zone_names(self, self.region_name)))
        # moto checks the VPC and the CIDR block against an Availability Zone; the subnet then moves to the
        # Local Zone, which moto's class-level zone list (and so the default VPC) never holds.
        anchor = RegionsAndZonesBackend.zones[self.region_name][0].name
        subnet = create_subnet(self, vpc_id, cidr_block, ipv6_cidr_block, anchor, None, **kwargs)
        self.subnets[anchor].pop(subnet.id, None)
        subnet._availability_zone = Zone(zone.name, zone.region, zone.zone_id, zone_type="local-zone")
        subnet.default_for_az = False
        subnet.map_public_ip_on_launch = False
        self.subnets[zone.name][subnet.id] = subnet
        return subnet

    EC2Backend.create_subnet = create
    _INSTALLED = True
