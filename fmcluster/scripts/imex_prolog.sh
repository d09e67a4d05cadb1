#!/bin/bash
# fmcluster: NVIDIA IMEX for jobs on p6e-gb200 / p6e-gb300 UltraServer nodes, as a Slurm prolog.
#
# GPU-to-GPU NVLink between the instances of an UltraServer works only while nvidia-imex runs on every node with
# the addresses of its peers in its nodes config (NVIDIA IMEX guide, "Deployment Models"). Which peers:
#   parallelcluster: every node of the node's queue and compute resource. ParallelCluster's cookbook points
#                    nvidia-imex at one nodes config per compute resource on the shared directory, so every job
#                    writes the same list (as the prolog of ParallelCluster's own GB200 test cluster does).
#   pcs:             the nodes of the job, in the node's own config (PCS user guide, "Configure UltraServer
#                    instances"); PCS runs the cluster's one Prolog on every node, so other types exit at once.
# A node restarts nvidia-imex only when the list differs from the one it last started with.
#
# Usage:
#   imex_prolog.sh install parallelcluster|pcs    run once per node: put this file where Slurm runs prologs
#   imex_prolog.sh                                run by slurmd as the prolog (root, SLURM_JOB_ID set)
set -uo pipefail

PCLUSTER_PROLOG=/opt/slurm/etc/scripts/prolog.d/90_fmcluster_imex.sh
PCS_PROLOG=/opt/fmcluster/prolog/imex.sh
SERVICE=nvidia-imex
STATE_DIR=${FMCLUSTER_IMEX_STATE:-/run/fmcluster-imex}
LOG=${FMCLUSTER_IMEX_LOG:-/var/log/fmcluster-imex-prolog.log}
READY_SECONDS=${FMCLUSTER_IMEX_READY_SECONDS:-60}
DNA_JSON=${FMCLUSTER_IMEX_DNA_JSON:-/etc/chef/dna.json}  # only ParallelCluster nodes have it
# slurmd hands prologs a bare environment; Slurm's own commands live in /opt/slurm/bin on ParallelCluster.
export PATH="${PATH:-/usr/bin:/bin}:/usr/sbin:/sbin:/opt/slurm/bin"

log() { echo "$(date -u +%FT%TZ) job ${SLURM_JOB_ID:-none} ${SLURMD_NODENAME:-$(hostname)}: $*" >> "${LOG}"; }

install_prolog() {
    local target
    case "${1:-}" in
        parallelcluster)
            # Only the head node writes the shared Slurm directory; ParallelCluster's Prolog runs prolog.d/*.
            if [[ ! -f /etc/parallelcluster/cfnconfig ]] || ! grep -q 'cfn_node_type=HeadNode' /etc/parallelcluster/cfnconfig; then
                return 0
            fi
            target=${PCLUSTER_PROLOG} ;;
        pcs) target=${PCS_PROLOG} ;;
        *) echo "usage: $0 install parallelcluster|pcs" >&2; return 2 ;;
    esac
    mkdir -p "$(dirname "${target}")"
    install -m 0755 "$0" "${target}"
    echo "IMEX prolog installed at ${target}"
}

instance_type() {
    local token
    token=$(curl -sf -X PUT http://169.254.169.254/latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 300")
    curl -sf -H "X-aws-ec2-metadata-token: ${token}" http://169.254.169.254/latest/meta-data/instance-type
}

# The nodes config nvidia-imex reads: IMEX_NODE_CONFIG_FILE of the config its unit starts it with (-c).
nodes_config_file() {
    local exec_start main
    exec_start=$(systemctl show --property=ExecStart --value "${SERVICE}" 2>/dev/null)
    main=$(grep -oE -- '-c +[^ ;]+' <<< "${exec_start}" | head -n1 | awk '{print $2}')
    main=${main:-/etc/nvidia-imex/config.cfg}
    local file
    file=$(sed -n 's/^ *IMEX_NODE_CONFIG_FILE *= *//p' "${main}" 2>/dev/null | tail -n1)
    echo "${file:-/etc/nvidia-imex/nodes_config.cfg}"
}

# "NodeName=a … NodeAddr=10.0.0.1 …" lines → the addresses of those that have one (nodes still powering up
# carry their name as address).
addresses() {
    awk '{
        name = ""; addr = ""
        for (i = 1; i <= NF; i++) {
            if ($i ~ /^NodeName=/) name = substr($i, 10)
            if ($i ~ /^NodeAddr=/) addr = substr($i, 10)
        }
        if (addr != "" && addr != name && addr ~ /^[0-9.]+$/) print addr
    }' | sort -t . -k1,1n -k2,2n -k3,3n -k4,4n -u
}

domain() {
    if [[ -f ${DNA_JSON} ]]; then
        # ParallelCluster names nodes <queue>-st-<compute resource>-<n> (static) or -dy- (dynamic).
        if [[ ! ${SLURMD_NODENAME:-} =~ ^(.+)-(st|dy)-(.+)-[0-9]+$ ]]; then
            log "node name '${SLURMD_NODENAME:-}' is not a ParallelCluster compute node name"
            return 0
        fi
        scontrol -o show nodes | grep -E "^NodeName=${BASH_REMATCH[1]}-(st|dy)-${BASH_REMATCH[3]}-[0-9]+ " | addresses
    else
        local node
        scontrol show hostnames "${SLURM_JOB_NODELIST}" | while read -r node; do
            scontrol -o show node "${node}"
        done | addresses
    fi
}

prolog() {
    local type
    type=$(instance_type)
    if [[ ! ${type} =~ ^p6e-gb(200|300)\. ]]; then
        return 0
    fi
    if ! systemctl is-enabled --quiet "${SERVICE}"; then
        log "${SERVICE} is not enabled on this ${type} node: NVLink across instances is unavailable (use an image with the NVIDIA driver and nvidia-imex enabled)"
        return 0
    fi
    local wanted file
    wanted=$(domain)
    if [[ -z ${wanted} ]]; then
        log "no node addresses found for this job; leaving ${SERVICE} as it is"
        return 0
    fi
    mkdir -p "${STATE_DIR}"
    if [[ -f ${STATE_DIR}/loaded ]] && [[ "$(cat "${STATE_DIR}/loaded")" == "${wanted}" ]] \
            && systemctl is-active --quiet "${SERVICE}"; then
        return 0
    fi
    file=$(nodes_config_file)
    mkdir -p "$(dirname "${file}")"
    (
        # Nodes sharing one nodes config (ParallelCluster) write it one at a time, and only when it changes.
        flock -w 60 9 || { log "could not lock ${file}.lock"; exit 1; }
        if [[ ! -f ${file} ]] || [[ "$(cat "${file}")" != "${wanted}" ]]; then
            printf '%s\n' "${wanted}" > "${file}.tmp.$$" && mv "${file}.tmp.$$" "${file}"
        fi
    ) 9> "${file}.lock" || return 0
    log "restarting ${SERVICE} with $(wc -l <<< "${wanted}") nodes from ${file}"
    if ! timeout 60 systemctl restart "${SERVICE}"; then
        log "${SERVICE} did not restart; NVLink across instances is unavailable for this job"
        return 0
    fi
    printf '%s\n' "${wanted}" > "${STATE_DIR}/loaded"
    local waited=0
    while (( waited < READY_SECONDS )); do
        if nvidia-imex-ctl -q 2>/dev/null | grep -q READY; then
            log "${SERVICE} ready"
            return 0
        fi
        sleep 2
        waited=$((waited + 2))
    done
    log "${SERVICE} not ready after ${READY_SECONDS}s (its peers may still be starting)"
}

if [[ ${1:-} == install ]]; then
    install_prolog "${2:-}"
    exit $?
fi
# A failing prolog drains the node: IMEX trouble is logged, never fatal.
prolog
exit 0
