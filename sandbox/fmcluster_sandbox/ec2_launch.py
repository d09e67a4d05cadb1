"""RunInstances as EC2 decides it, for every launch in the sandbox (a boto3 call, ParallelCluster's stack,
the PCS emulator's nodes): moto launches whatever it is given, the sandbox first applies EC2's rules.

The launch is resolved as EC2 resolves it (the request over its launch template) and refused with EC2's
error when it breaks a rule, each from the EC2 user guide:

* the instance type exists and is sold in the subnet's zone ("Instance types", DescribeInstanceTypeOfferings);
* network interfaces ("Network cards", "Elastic Fabric Adapter", "Maximize network bandwidth on instances
  with multiple network cards"): card indexes below the type's MaximumNetworkCards, no more interfaces than
  a card or the type allows, one primary interface at card 0 / device 0 that is not EFA-only, EFA only on
  types and cards that support it and no more EFA interfaces than MaximumEfaInterfaces;
* public IPv4 addresses ("Public IPv4 addresses"): only a launch with a single network interface gets one
  from the subnet's setting; asking for one with several interfaces is refused;
* placement groups ("Placement groups"): the group exists, the type supports its strategy, and a cluster
  group stays in one Availability Zone;
* Capacity Reservations and Capacity Blocks ("Capacity Reservations", "Capacity Blocks for ML"): the
  targeted reservation exists, matches the type and zone, is active, has room for the instances (which
  then count against it), and Capacity Blocks take ``MarketType: capacity-block`` (and only they do).
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

from fmcluster_sandbox import capacity_reservations, instance_catalog, placement_groups

_request = threading.local()  # RunInstances parameters moto's response parser drops (see _keep_extras)


def _error(code: str, message: str) -> Exception:
    from moto.ec2.exceptions import EC2ClientError

    return EC2ClientError(code, message)


@dataclass
class Launch:
    """One RunInstances request, resolved over its launch template."""

    account: str
    region: str
    count: int
    instance_type: str
    explicit_type: bool
    subnet_id: str | None
    zone: str | None
    nics: list[dict[str, Any]] = field(default_factory=list)
    placement_group: str | None = None
    reservation_id: str | None = None
    market_type: str | None = None
    public_ip: bool | None = None
    instance_security_groups: bool = False

    @classmethod
    def resolve(cls, backend: Any, count: int, kwargs: dict[str, Any]) -> Launch:
        extras = getattr(_request, "extras", None) or {}
        _request.extras = None
        template = backend._get_template_from_args(kwargs["launch_template"]).data if kwargs.get(
            "launch_template") else {}
        explicit = not kwargs.get("is_instance_type_default", True)
        instance_type = kwargs.get("instance_type") if explicit else template.get("InstanceType")
        nics = copy.deepcopy(kwargs.get("nics") or template.get("NetworkInterfaces") or [])
        subnet_id = kwargs.get("subnet_id") or next((n.get("SubnetId") for n in nics if n.get("SubnetId")), None)
        reservation = ((extras.get("CapacityReservationSpecification")
                        or template.get("CapacityReservationSpecification") or {})
                       .get("CapacityReservationTarget") or {}).get("CapacityReservationId")
        market = kwargs.get("instance_market_options") or (template.get("InstanceMarketOptions") or {}).get(
            "MarketType")
        placement = extras.get("Placement") or template.get("Placement") or {}
        primary = next((n for n in nics if int(n.get("DeviceIndex", 0)) == 0
                        and int(n.get("NetworkCardIndex", 0)) == 0), {})
        public_ip = kwargs.get("associate_public_ip")
        if public_ip is None:
            public_ip = primary.get("AssociatePublicIpAddress")
        launch = cls(backend.account_id, backend.region_name, count, instance_type or "m1.small",
                     bool(instance_type), subnet_id, None, nics, placement.get("GroupName") or None,
                     reservation, market if isinstance(market, str) and market else None,
                     _as_bool(public_ip))
        launch.instance_security_groups = bool(kwargs.get("security_group_ids") or template.get("SecurityGroupIds")
                                               or template.get("SecurityGroups"))
        launch.zone = launch._zone(backend, kwargs.get("placement") or placement.get("AvailabilityZone"))
        return launch

    def _zone(self, backend: Any, requested: str | None) -> str | None:
        if self.subnet_id:
            try:
                return backend.get_subnet(self.subnet_id).availability_zone
            except Exception:  # moto reports the unknown subnet itself
                return None
        return requested

    # -- the rules ----------------------------------------------------------------------------------------
    def check(self) -> None:
        facts = instance_catalog.instance_type(self.instance_type)
        if facts is None:
            if self.explicit_type:
                raise _error("InvalidParameterValue", f"Invalid value '{self.instance_type}' for InstanceType.")
            return
        self._check_offering()
        self._check_interfaces(facts)
        self._check_placement_group(facts)
        self._check_reservation()

    def _check_offering(self) -> None:
        if not self.zone or not self.explicit_type:
            return
        zones = instance_catalog.offered_zones(self.region, self.instance_type)
        if self.zone not in zones:
            choices = ", ".join(sorted(zones)) or "none in this Region"
            raise _error("Unsupported", f"Your requested instance type ({self.instance_type}) is not supported in "
                                        f"your requested Availability Zone ({self.zone}). Please retry your request "
                                        f"by not specifying an Availability Zone or choosing {choices}.")

    def _check_interfaces(self, facts: dict[str, Any]) -> None:
        if not self.nics:
            return
        if self.instance_security_groups:
            raise _error("InvalidParameterCombination", "Network interfaces and an instance-level security groups "
                                                        "may not be specified on the same request")
        network = facts.get("NetworkInfo", {})
        cards = instance_catalog.network_cards(facts)
        max_cards = network.get("MaximumNetworkCards", 1)
        if len(self.nics) > network.get("MaximumNetworkInterfaces", len(self.nics)):
            raise _error("InvalidParameterValue", f"{self.instance_type} supports at most "
                                                  f"{network['MaximumNetworkInterfaces']} network interfaces.")
        seen: dict[tuple[int, int], int] = {}
        per_card: dict[int, int] = {}
        efa = 0
        for nic in self.nics:
            card, device = int(nic.get("NetworkCardIndex", 0)), int(nic.get("DeviceIndex", 0))
            kind = nic.get("InterfaceType") or "interface"
            if card >= max_cards:
                raise _error("InvalidParameterValue", f"Network card index {card} is not valid for "
                                                      f"{self.instance_type}, which has {max_cards} network cards.")
            if (card, device) in seen:
                raise _error("InvalidParameterValue", f"Two network interfaces use network card {card}, device "
                                                      f"index {device}.")
            seen[(card, device)] = 1
            per_card[card] = per_card.get(card, 0) + 1
            limit = cards.get(card, {}).get("MaximumNetworkInterfaces")
            if limit is not None and per_card[card] > limit:
                raise _error("InvalidParameterValue", f"Network card {card} of {self.instance_type} supports at "
                                                      f"most {limit} network interfaces.")
            if kind in ("efa", "efa-only"):
                efa += 1
                if not network.get("EfaSupported"):
                    raise _error("InvalidParameterCombination", f"{self.instance_type} instances do not support "
                                                                "Elastic Fabric Adapters.")
            supported = cards.get(card, {}).get("InterfaceTypes")
            if supported is not None and kind not in supported:
                raise _error("InvalidParameterCombination",
                             f"Network card {card} of {self.instance_type} does not support interface type {kind} "
                             f"({', '.join(supported)} only).")
        primary = next((n for n in self.nics if int(n.get("NetworkCardIndex", 0)) == 0
                        and int(n.get("DeviceIndex", 0)) == 0), None)
        if primary is None:
            raise _error("InvalidParameterValue", "A network interface at network card 0, device index 0 (the "
                                                  "primary network interface) is required.")
        if primary.get("InterfaceType") == "efa-only":
            raise _error("InvalidParameterCombination", "An EFA-only network interface can't be the primary "
                                                        "network interface.")
        max_efa = network.get("EfaInfo", {}).get("MaximumEfaInterfaces")
        if max_efa is not None and efa > max_efa:
            raise _error("InvalidParameterValue", f"{self.instance_type} supports at most {max_efa} EFA "
                                                  f"interfaces; the request has {efa}.")
        if len(self.nics) > 1 and self.public_ip:
            raise _error("InvalidParameterCombination", "The associatePublicIPAddress parameter cannot be "
                                                        "specified when launching with multiple network interfaces.")

    def _check_placement_group(self, facts: dict[str, Any]) -> None:
        if not self.placement_group:
            return
        group = placement_groups.REGISTRY.get(self.placement_group, self.account, self.region)
        if group is None:
            raise _error("InvalidPlacementGroup.Unknown", f"The Placement Group '{self.placement_group}' is unknown.")
        strategies = facts.get("PlacementGroupInfo", {}).get("SupportedStrategies")
        if strategies is not None and group.strategy not in strategies:
            raise _error("InvalidParameterCombination", f"{self.instance_type} does not support {group.strategy} "
                                                        "placement groups.")
        if group.strategy == "cluster" and group.zone and self.zone and group.zone != self.zone:
            raise _error("InvalidParameterValue", f"Cluster placement group {group.name} is in {group.zone}; "
                                                  f"instances cannot launch into it in {self.zone}.")

    def _reservation(self) -> capacity_reservations.Reservation | None:
        if not self.reservation_id:
            return None
        return capacity_reservations.REGISTRY.get(self.reservation_id, self.account, self.region)

    def _check_reservation(self) -> None:
        if self.market_type == "capacity-block" and not self.reservation_id:
            raise _error("InvalidParameterCombination", "A capacity-block launch must target a Capacity Block "
                                                        "(CapacityReservationSpecification).")
        if not self.reservation_id:
            return
        reservation = self._reservation()
        if reservation is None:
            raise _error("InvalidCapacityReservationId.NotFound",
                         f"The capacity reservation ID '{self.reservation_id}' does not exist")
        if reservation.is_capacity_block != (self.market_type == "capacity-block"):
            need = ("a Capacity Block: launch it with MarketType capacity-block" if reservation.is_capacity_block
                    else "not a Capacity Block: MarketType capacity-block needs one")
            raise _error("InvalidParameterCombination", f"{self.reservation_id} is {need}.")
        if reservation.instance_type != self.instance_type:
            raise _error("InvalidParameterCombination", f"Capacity reservation {reservation.reservation_id} is for "
                                                        f"{reservation.instance_type}, not {self.instance_type}.")
        if self.zone and reservation.availability_zone != self.zone:
            raise _error("InvalidParameterCombination", f"Capacity reservation {reservation.reservation_id} is in "
                                                        f"{reservation.availability_zone}, not {self.zone}.")
        if reservation.state != "active":
            raise _error("InvalidCapacityReservationId.Unavailable",
                         f"Capacity reservation {reservation.reservation_id} is {reservation.state}; instances "
                         "launch into it only while it is active.")
        if self.count > reservation.available:
            raise _error("ReservationCapacityExceeded", "The targeted Capacity Reservation does not have enough "
                                                        f"available capacity to fulfill your request "
                                                        f"({reservation.available} of {reservation.total} left).")

    # -- what moto is given, and what is recorded -----------------------------------------------------
    def moto_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        kwargs = dict(kwargs)
        if self.nics:
            for nic in self.nics:
                if self.subnet_id:
                    nic.setdefault("SubnetId", self.subnet_id)
                nic.pop("AssociatePublicIpAddress", None)
            kwargs["nics"] = self.nics
            kwargs["security_group_ids"] = []  # with interfaces, their Groups carry the security groups
        # None lets the subnet's MapPublicIpOnLaunch decide; EC2 gives a multi-interface launch no address.
        kwargs["associate_public_ip"] = False if len(self.nics) > 1 else self.public_ip
        if not kwargs.get("is_instance_type_default", True) or self.explicit_type:
            kwargs["instance_type"], kwargs["is_instance_type_default"] = self.instance_type, False
        return kwargs

    def record(self, instances: list[Any]) -> None:
        ids = [i.id for i in instances]
        reservation = self._reservation()
        if reservation is not None:
            capacity_reservations.REGISTRY.claim(reservation, ids)
        if self.placement_group:
            group = placement_groups.REGISTRY.get(self.placement_group, self.account, self.region)
            if group is not None:
                placement_groups.REGISTRY.place(group, self.zone or "", ids)
                for instance in instances:
                    instance.placement.group_name = group.name


def _as_bool(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    return str(value).lower() == "true"


_installed = False


def install() -> None:
    """Put EC2's launch rules in front of moto's RunInstances, and count terminations (idempotent)."""
    global _installed
    if _installed:
        return
    from moto.ec2.models.instances import InstanceBackend
    from moto.ec2.responses.instances import InstanceResponse

    original_run = InstanceBackend.run_instances
    original_terminate = InstanceBackend.terminate_instances
    original_response = InstanceResponse.run_instances

    def run_instances(self, image_id, count, user_data, security_group_names, **kwargs):
        launch = Launch.resolve(self, int(count), kwargs)
        launch.check()
        reservation = original_run(self, image_id, count, user_data, security_group_names,
                                   **launch.moto_kwargs(kwargs))
        launch.record(reservation.instances)
        return reservation

    def terminate_instances(self, instance_ids):
        result = original_terminate(self, instance_ids)
        capacity_reservations.REGISTRY.release(list(instance_ids))
        placement_groups.REGISTRY.release(list(instance_ids))
        return result

    def _keep_extras(self):
        # moto's parser drops Placement.GroupName and CapacityReservationSpecification; the rules need them.
        _request.extras = {"Placement": self._get_param("Placement", {}) or {},
                           "CapacityReservationSpecification": self._get_param("CapacityReservationSpecification",
                                                                                {}) or {}}
        try:
            return original_response(self)
        finally:
            _request.extras = None

    InstanceBackend.run_instances = run_instances
    InstanceBackend.terminate_instances = terminate_instances
    InstanceResponse.run_instances = _keep_extras
    _keep_template_tags_apart()
    _installed = True


def _keep_template_tags_apart() -> None:
    """CreateLaunchTemplate's own ``TagSpecifications`` tag the launch template; ``LaunchTemplateData``'s tag
    what instances launch (EC2 API reference, CreateLaunchTemplate and RequestLaunchTemplateData). moto 5.2.5
    appends the first to the second, so a template's version data would show tags AWS never puts there."""
    from moto.ec2.models.launch_templates import LaunchTemplateBackend

    original = LaunchTemplateBackend.create_launch_template

    def create_launch_template(self, name, description, template_data, tag_spec):
        appended = len(tag_spec or {})
        specs = template_data.get("TagSpecifications")
        if appended and isinstance(specs, list) and len(specs) >= appended:
            del specs[-appended:]
            if not specs:
                template_data.pop("TagSpecifications")
        return original(self, name, description, template_data, tag_spec)

    LaunchTemplateBackend.create_launch_template = create_launch_template
