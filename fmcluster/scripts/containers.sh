#!/bin/bash
# fmcluster: Enroot + Pyxis with Slurm, so jobs can run `srun --container-image=...`.
# Usage: containers.sh parallelcluster|pcs
#   parallelcluster: ParallelCluster (3.11.1+) ships Enroot and Pyxis with Pyxis disabled; this turns them on
#                    the way its "Enroot and Pyxis" page describes (runtime dirs, enroot.conf, Pyxis in the
#                    SPANK plugin stack on the shared Slurm directory; the head node writes that once).
#   pcs:             AWS's PCS sample AMIs have neither: install Enroot from NVIDIA's release packages, build
#                    Pyxis against the node's PCS Slurm, and add it to the local plugin stack.
set -euo pipefail

backend="${1:-parallelcluster}"
ENROOT_VERSION="3.5.0"
PYXIS_VERSION="0.20.0"

runtime_dirs() {
    mkdir -p /var/enroot /run/enroot /run/pyxis
    chmod 1777 /var/enroot /run/enroot /run/pyxis
    # Per-user scratch for unpacked images; NVMe scratch when the node has it.
    local scratch=/tmp
    if [[ -d /local_scratch ]]; then scratch=/local_scratch; fi
    mkdir -p /etc/enroot
    cat > /etc/enroot/enroot.conf <<CONF
ENROOT_RUNTIME_PATH /run/enroot/user-\$(id -u)
ENROOT_CACHE_PATH ${scratch}/enroot/cache/group-\$(id -g)
ENROOT_DATA_PATH ${scratch}/enroot/data/user-\$(id -u)
ENROOT_TEMP_PATH ${scratch}/enroot/tmp
ENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -no-duplicates
ENROOT_MOUNT_HOME y
ENROOT_RESTRICT_DEV y
ENROOT_ROOTFS_WRITABLE y
CONF
    mkdir -p "${scratch}/enroot/tmp"
    chmod 1777 "${scratch}/enroot" "${scratch}/enroot/tmp"
}

parallelcluster() {
    runtime_dirs
    local examples=/opt/parallelcluster/examples
    local slurm_etc=/opt/slurm/etc
    # Only the head node owns the shared Slurm configuration; compute nodes read it over NFS.
    if [[ -f /etc/parallelcluster/cfnconfig ]] && grep -q 'cfn_node_type=HeadNode' /etc/parallelcluster/cfnconfig; then
        mkdir -p "${slurm_etc}/plugstack.conf.d"
        if [[ -f "${examples}/spank/plugstack.conf" ]]; then
            cp "${examples}/spank/plugstack.conf" "${slurm_etc}/plugstack.conf"
        else
            echo "include ${slurm_etc}/plugstack.conf.d/*" > "${slurm_etc}/plugstack.conf"
        fi
        if [[ -f "${examples}/pyxis/pyxis.conf" ]]; then
            cp "${examples}/pyxis/pyxis.conf" "${slurm_etc}/plugstack.conf.d/pyxis.conf"
        else
            echo "required /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis" \
                > "${slurm_etc}/plugstack.conf.d/pyxis.conf"
        fi
        systemctl restart slurmctld || true
    fi
}

pcs() {
    local slurm_dir
    slurm_dir="$(find /opt/aws/pcs/scheduler -maxdepth 1 -name 'slurm-*' -type d | sort -V | tail -n 1)"
    if [[ -z "${slurm_dir}" ]]; then
        echo "fmcluster containers: no PCS Slurm under /opt/aws/pcs/scheduler; skipping" >&2
        return 0
    fi
    local arch
    arch="$(uname -m)"
    local base="https://github.com/NVIDIA/enroot/releases/download/v${ENROOT_VERSION}"
    if ! command -v enroot >/dev/null 2>&1; then
        if command -v dnf >/dev/null 2>&1; then
            dnf install -y "${base}/enroot-${ENROOT_VERSION}-1.el8.${arch}.rpm" \
                "${base}/enroot+caps-${ENROOT_VERSION}-1.el8.${arch}.rpm"
        else
            local deb_arch
            deb_arch="$(dpkg --print-architecture)"
            curl -fsSLO "${base}/enroot_${ENROOT_VERSION}-1_${deb_arch}.deb"
            curl -fsSLO "${base}/enroot+caps_${ENROOT_VERSION}-1_${deb_arch}.deb"
            apt-get update -y
            apt-get install -y "./enroot_${ENROOT_VERSION}-1_${deb_arch}.deb" \
                "./enroot+caps_${ENROOT_VERSION}-1_${deb_arch}.deb"
        fi
    fi
    runtime_dirs
    local plugin=/usr/local/lib/slurm/spank_pyxis.so
    if [[ ! -f "${plugin}" ]]; then
        if command -v dnf >/dev/null 2>&1; then dnf install -y gcc make tar gzip; else apt-get install -y gcc make; fi
        local build
        build="$(mktemp -d)"
        curl -fsSL "https://github.com/NVIDIA/pyxis/archive/refs/tags/v${PYXIS_VERSION}.tar.gz" | tar -xz -C "${build}"
        make -C "${build}/pyxis-${PYXIS_VERSION}" CPPFLAGS="-I${slurm_dir}/include"
        make -C "${build}/pyxis-${PYXIS_VERSION}" install prefix=/usr/local
        rm -rf "${build}"
    fi
    mkdir -p /etc/slurm/plugstack.conf.d
    echo "required ${plugin} runtime_path=/run/pyxis" > /etc/slurm/plugstack.conf.d/pyxis.conf
    if ! grep -qs 'plugstack.conf.d' /etc/slurm/plugstack.conf; then
        echo "include /etc/slurm/plugstack.conf.d/*" >> /etc/slurm/plugstack.conf
    fi
}

case "${backend}" in
    parallelcluster) parallelcluster ;;
    pcs) pcs ;;
    *) echo "usage: $0 parallelcluster|pcs" >&2; exit 2 ;;
esac
