"""An instance's network interfaces as EC2 attaches them, where moto 5.2.5 does not.

EC2 attaches one interface per ``(NetworkCardIndex, DeviceIndex)`` of the launch request, each with the type it
was asked for (``interface``, ``efa`` or ``efa-only``), and DescribeInstances reports every one with its
``InterfaceType`` and ``Attachment.NetworkCardIndex`` (EC2 API reference, InstanceNetworkInterface and
InstanceNetworkInterfaceAttachment; EC2 user guide, "Network cards": "a network interface attached to a network
card other than 0 ... DeviceIndex 1"). moto keys an instance's interfaces by device index alone, so the 16 EFA
interfaces of a p6e-gb200 (all device 1, on cards 1-16) collapse into one, and every interface reads
``interface`` on card 0. Here every requested interface stays attached (and is deleted with the instance), with
its card and type.
"""

from __future__ import annotations

from typing import Any

_INSTALLED = False
# Key of an interface on a card other than 0 in moto's per-instance map; moto reads key 0 as the primary.
_CARD_STRIDE = 1000


def install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    from moto.ec2.models.elastic_network_interfaces import Attachment
    from moto.ec2.models.instances import Instance

    original_prep = Instance.prep_nics
    original_attachment = Attachment.__init__

    def prep_nics(self: Any, nic_spec: list[dict[str, Any]], *args: Any, **kwargs: Any) -> None:
        before = set(self.ec2_backend.enis)
        original_prep(self, nic_spec, *args, **kwargs)
        made = [eni for eni_id, eni in self.ec2_backend.enis.items() if eni_id not in before]
        asked = [nic for nic in nic_spec if not nic.get("NetworkInterfaceId")]
        if len(made) != len(asked) or not asked:
            return  # interfaces moto built from defaults: moto's own view is EC2's
        attached = {key: eni for key, eni in self.nics.items() if eni not in made}  # interfaces named by id
        for eni, nic in zip(made, asked, strict=True):
            card = int(nic.get("NetworkCardIndex") or 0)
            eni.network_card_index = card
            eni.interface_type = nic.get("InterfaceType") or "interface"
            eni.instance, eni.status = self, "in-use"
            attached[eni.device_index + _CARD_STRIDE * card] = eni
        self.nics = dict(sorted(attached.items()))

    def attachment(self: Any, eni: Any) -> None:
        original_attachment(self, eni)
        self.network_card_index = getattr(eni, "network_card_index", 0)

    Instance.prep_nics = prep_nics
    Attachment.__init__ = attachment
    _INSTALLED = True
