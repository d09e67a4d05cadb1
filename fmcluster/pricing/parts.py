"""The parts of a cluster that bill by the hour besides its nodes: the file systems fmcluster creates and a managed
controller. Each is a :class:`CostPart` with its hourly price, or ``None`` and the reason when AWS's rate is not
one fmcluster bundles — so every total names it, priced or not, and never drops it silently.

Rates are bundled only where an AWS pricing page stored with fmcluster's sources shows them; where it does not, the
note says so and names the page to read.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster.spec.models import Spec

# Amazon EFS pricing (aws.amazon.com/efs/pricing): Standard storage $0.30 per GB-month, for the data stored (no
# minimum, no provisioned size). A new /home holds almost nothing, so its hourly figure depends on what is stored.
EFS_STANDARD_USD_PER_GB_MONTH = 0.30
# Amazon FSx for Lustre pricing (aws.amazon.com/fsx/lustre/pricing) bills persistent SSD storage per GB-month by
# throughput tier; the stored copy of that page fmcluster was built from shows no figures for PERSISTENT_2, so none
# is bundled (third-party quotes differ by region and date and are not AWS's page).
FSX_LUSTRE_PAGE = "aws.amazon.com/fsx/lustre/pricing"
# Amazon FSx for OpenZFS pricing (aws.amazon.com/fsx/openzfs/pricing): SSD storage per GB-month plus throughput
# capacity per MBps-month; the stored copies carry only the China and Japan pages, so no US rate is bundled.
FSX_OPENZFS_PAGE = "aws.amazon.com/fsx/openzfs/pricing"

# The name every total gives FSx for Lustre (plan --json lists it in cost.unknown under this name).
FSX_LUSTRE = "FSx for Lustre"


@dataclass(frozen=True)
class CostPart:
    """One billed part: ``usd_per_hour`` None means no bundled price (left out of the total, and said)."""

    name: str
    usd_per_hour: float | None
    note: str  # the rate and the AWS page it comes from, or why there is none

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "usd_per_hour": self.usd_per_hour, "note": self.note}


def storage_parts(spec: Spec) -> list[CostPart]:
    """The file systems fmcluster creates for ``spec``. Existing ones (``existing_id``) are the owner's and bill
    whether or not the cluster exists, so they are no part of its cost."""
    parts = []
    lustre = spec.storage.lustre
    if lustre is not None and lustre.existing_id is None:
        parts.append(CostPart(
            FSX_LUSTRE, None,
            f"{lustre.capacity_gib:,} GiB {lustre.deployment_type} at {lustre.throughput_per_tib} MB/s/TiB, billed "
            f"per GB-month by throughput tier while it exists; no bundled rate (see {FSX_LUSTRE_PAGE})"))
    home = spec.storage.home
    if home is not None and home.existing_id is None:
        if home.type == "openzfs":
            parts.append(CostPart(
                "FSx for OpenZFS /home", None,
                f"{home.capacity_gib:,} GiB SSD plus throughput capacity, billed per GB-month and MBps-month while it "
                f"exists; no bundled rate (see {FSX_OPENZFS_PAGE})"))
        else:
            parts.append(CostPart(
                "EFS /home", None,
                f"${EFS_STANDARD_USD_PER_GB_MONTH:.2f} per GB-month of data stored (Amazon EFS pricing, "
                "aws.amazon.com/efs/pricing, Standard storage): it grows with what /home holds, so it has no "
                "hourly figure"))
    return parts


#: What a live resource of each type is called when it bills with no bundled price (``status``, "still billing").
UNPRICED_RESOURCES = {"fsx_lustre": FSX_LUSTRE, "fsx_openzfs": "FSx for OpenZFS", "efs": "EFS"}
