#!/bin/bash
# fmcluster: the instance-store NVMe devices as one local scratch file system (RAID 0 when there are several).
# Usage: scratch.sh MOUNT_POINT
set -euo pipefail

mount_point="${1:?usage: scratch.sh MOUNT_POINT}"
if mountpoint -q "${mount_point}"; then
    exit 0
fi
mapfile -t devices < <(lsblk -dpno NAME,MODEL | awk '/Instance Storage/ {print $1}')
if [[ ${#devices[@]} -eq 0 ]]; then
    echo "fmcluster scratch: no instance-store NVMe on this node; ${mount_point} not made" >&2
    exit 0
fi
device="${devices[0]}"
if [[ ${#devices[@]} -gt 1 ]]; then
    device=/dev/md/fmcluster-scratch
    mdadm --create "${device}" --level=0 --force --run --raid-devices="${#devices[@]}" "${devices[@]}"
fi
mkfs.xfs -f "${device}"
mkdir -p "${mount_point}"
mount -o noatime "${device}" "${mount_point}"
chmod 1777 "${mount_point}"
