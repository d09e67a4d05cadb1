#!/bin/bash
# fmcluster: Prometheus exporters on a node.
#   node_exporter on :9100 — host metrics, including the EFA devices' counters (its infiniband collector reads
#                            /sys/class/infiniband, where the efa driver publishes them);
#   dcgm-exporter on :9400 — NVIDIA GPU metrics, on nodes that have NVIDIA GPUs (run from NVIDIA's container
#                            image with Docker when Docker is present, else skipped with a message).
set -euo pipefail

NODE_EXPORTER_VERSION="1.8.2"
DCGM_EXPORTER_IMAGE="nvcr.io/nvidia/k8s/dcgm-exporter:3.3.8-3.6.0-ubuntu22.04"

install_node_exporter() {
    if systemctl is-active --quiet node_exporter 2>/dev/null; then
        return 0
    fi
    local arch
    case "$(uname -m)" in
        x86_64) arch=amd64 ;;
        aarch64) arch=arm64 ;;
        *) echo "fmcluster monitoring: no node_exporter build for $(uname -m)" >&2; return 0 ;;
    esac
    local name="node_exporter-${NODE_EXPORTER_VERSION}.linux-${arch}"
    curl -fsSL "https://github.com/prometheus/node_exporter/releases/download/v${NODE_EXPORTER_VERSION}/${name}.tar.gz" \
        | tar -xz -C /tmp
    install -m 0755 "/tmp/${name}/node_exporter" /usr/local/bin/node_exporter
    rm -rf "/tmp/${name}"
    id node_exporter >/dev/null 2>&1 || useradd --system --no-create-home --shell /sbin/nologin node_exporter
    cat > /etc/systemd/system/node_exporter.service <<UNIT
[Unit]
Description=Prometheus node_exporter (fmcluster)
After=network-online.target

[Service]
User=node_exporter
ExecStart=/usr/local/bin/node_exporter --collector.infiniband --collector.systemd
Restart=always

[Install]
WantedBy=multi-user.target
UNIT
    systemctl daemon-reload
    systemctl enable --now node_exporter
}

start_dcgm_exporter() {
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        return 0
    fi
    if ! command -v docker >/dev/null 2>&1; then
        echo "fmcluster monitoring: NVIDIA GPUs but no Docker; dcgm-exporter not started" >&2
        return 0
    fi
    docker rm -f dcgm-exporter >/dev/null 2>&1 || true
    docker run -d --restart always --name dcgm-exporter --gpus all --cap-add SYS_ADMIN --net host \
        "${DCGM_EXPORTER_IMAGE}"
}

install_node_exporter
start_dcgm_exporter
