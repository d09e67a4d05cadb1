#!/bin/bash
# fmcluster: mount a shared file system on a PCS node and keep it in /etc/fstab.
# Usage: mount_storage.sh lustre DNS_NAME MOUNT_NAME MOUNT_POINT
#        mount_storage.sh nfs    SERVER   EXPORT     MOUNT_POINT
# A /home mount keeps the image's own users: their home directories are copied over once, without
# overwriting anything already on the shared file system.
set -euo pipefail

kind="${1:?usage: mount_storage.sh lustre|nfs SERVER PATH MOUNT_POINT}"
server="${2:?server}"
path="${3:?path}"
mount_point="${4:?mount point}"

case "${kind}" in
    lustre)
        if ! command -v mount.lustre >/dev/null 2>&1; then
            # FSx for Lustre guide, "Installing the Lustre client" (Amazon Linux 2023; Ubuntu).
            if command -v dnf >/dev/null 2>&1; then
                dnf install -y lustre-client
            else
                apt-get update -y
                apt-get install -y "lustre-client-modules-$(uname -r)"
            fi
        fi
        source="${server}@tcp:/${path}"
        fstype=lustre
        options="defaults,noatime,flock,_netdev,x-systemd.automount,x-systemd.requires=network.service"
        ;;
    nfs)
        source="${server}:${path}"
        fstype=nfs
        options="nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev"
        ;;
    *)
        echo "usage: $0 lustre|nfs SERVER PATH MOUNT_POINT" >&2
        exit 2
        ;;
esac

if mountpoint -q "${mount_point}"; then
    exit 0
fi
staging=""
if [[ "${mount_point}" == "/home" ]]; then
    staging="$(mktemp -d)"
    mount -t "${fstype}" -o "${options}" "${source}" "${staging}"
    cp -an /home/. "${staging}/"
    umount "${staging}"
    rmdir "${staging}"
fi
mkdir -p "${mount_point}"
if ! grep -qs " ${mount_point} ${fstype} " /etc/fstab; then
    echo "${source} ${mount_point} ${fstype} ${options} 0 0" >> /etc/fstab
fi
mount "${mount_point}"
