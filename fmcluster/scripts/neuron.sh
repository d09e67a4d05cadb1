#!/bin/bash
# fmcluster: the AWS Neuron driver, runtime, collectives and tools on a Trainium / Inferentia node.
#
# Neither ParallelCluster's official AMIs nor AWS's PCS sample AMIs carry Neuron, and neither backend boots the
# Neuron DLAMI as published, so a trn node gets Neuron here, from AWS's Neuron package repositories, the way the
# Neuron documentation's manual setup does it (repository, kernel headers, aws-neuronx-dkms, then the runtime
# pieces) and AWS's own ParallelCluster Neuron samples do it at node configuration. An image that already has
# the driver is left as it is. A node where the driver does not come up fails its bootstrap (and is replaced)
# rather than join the cluster without its accelerators.
#
# Usage: neuron.sh
set -euo pipefail

PACKAGES=(aws-neuronx-dkms aws-neuronx-collectives aws-neuronx-runtime-lib aws-neuronx-tools)
NEURON_BIN=/opt/aws/neuron/bin

if [[ -x ${NEURON_BIN}/neuron-ls ]] && modinfo neuron &>/dev/null; then
    echo "Neuron driver and tools already installed"
else
    # shellcheck source=/dev/null
    . /etc/os-release
    case "${ID}" in
        ubuntu)
            install -m 0755 -d /etc/apt/keyrings
            curl -fsSL https://apt.repos.neuron.amazonaws.com/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB \
                | gpg --batch --yes --dearmor -o /etc/apt/keyrings/neuron.gpg
            echo "deb [signed-by=/etc/apt/keyrings/neuron.gpg] https://apt.repos.neuron.amazonaws.com ${VERSION_CODENAME} main" \
                > /etc/apt/sources.list.d/neuron.list
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -y
            apt-get install -y "linux-headers-$(uname -r)"
            apt-get install -y "${PACKAGES[@]}"
            ;;
        amzn)
            cat > /etc/yum.repos.d/neuron.repo <<'REPO'
[neuron]
name=Neuron YUM Repository
baseurl=https://yum.repos.neuron.amazonaws.com
enabled=1
metadata_expire=0
REPO
            rpm --import https://yum.repos.neuron.amazonaws.com/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB
            dnf install -y "kernel-devel-$(uname -r)" "kernel-headers-$(uname -r)"
            dnf install -y "${PACKAGES[@]}"
            ;;
        *)
            echo "Neuron: no package repository for ${ID} ${VERSION_ID:-}; use an image with Neuron installed" >&2
            exit 1
            ;;
    esac
fi

modprobe neuron
echo "export PATH=${NEURON_BIN}:\$PATH" > /etc/profile.d/neuron.sh
if ! "${NEURON_BIN}/neuron-ls" >/dev/null; then
    echo "Neuron: the driver is loaded but neuron-ls sees no Neuron devices" >&2
    exit 1
fi
echo "Neuron ready"
