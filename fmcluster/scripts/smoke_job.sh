#!/bin/bash
# fmcluster smoke job: submitted by `fmcluster smoke NAME` with sbatch, one task per node.
#
# It reports facts, one per line, and leaves the judging to fmcluster (which knows what the instance type
# should have, from its catalog):
#   FMCLUSTER <node> gpus <count>|absent|failed [detail]
#   FMCLUSTER <node> accelerators <count>|absent [detail]     (Trainium: /dev/neuron* devices)
#   FMCLUSTER <node> efa_provider <endpoints>|absent|failed [detail]   (fi_info -p efa -t FI_EP_RDM)
#   FMCLUSTER <node> efa_devices <count>                        (/sys/class/infiniband devices bound to efa)
#   FMCLUSTER - nccl absent|ran <exit code> [detail]
# and the raw all_reduce_perf output between FMCLUSTER-NCCL-BEGIN and FMCLUSTER-NCCL-END.
#
# Settings come from the environment (sbatch --export):
#   FMC_ACCEL_KIND      gpu | trainium
#   FMC_RANKS_PER_NODE  ranks per node for all_reduce_perf (the accelerators the catalog expects)
#   FMC_NCCL_TESTS      optional path to all_reduce_perf (fmcluster smoke --nccl-tests PATH)
set -u

export PATH="${PATH}:/opt/amazon/efa/bin:/opt/amazon/openmpi/bin"

node_checks() {
    local node out count dev
    node="${SLURMD_NODENAME:-$(hostname -s)}"  # Slurm's name for the node, which may not be its hostname
    if [ "${FMC_ACCEL_KIND:-gpu}" = "trainium" ]; then
        count="$(find /dev -maxdepth 1 -name 'neuron[0-9]*' 2>/dev/null | wc -l)"
        if [ "$count" -gt 0 ]; then
            echo "FMCLUSTER $node accelerators $count"
        else
            echo "FMCLUSTER $node accelerators absent no /dev/neuron devices"
        fi
    elif command -v nvidia-smi >/dev/null 2>&1; then
        if out="$(nvidia-smi -L 2>&1)"; then
            echo "FMCLUSTER $node gpus $(grep -c '^GPU ' <<<"$out")"
        else
            echo "FMCLUSTER $node gpus failed $(head -n 1 <<<"$out")"
        fi
    else
        echo "FMCLUSTER $node gpus absent nvidia-smi not found"
    fi

    if command -v fi_info >/dev/null 2>&1; then
        if out="$(fi_info -p efa -t FI_EP_RDM 2>&1)"; then
            echo "FMCLUSTER $node efa_provider $(grep -c 'provider: efa$' <<<"$out")"
        else
            echo "FMCLUSTER $node efa_provider failed $(head -n 1 <<<"$out")"
        fi
    else
        echo "FMCLUSTER $node efa_provider absent fi_info not found"
    fi

    count=0
    for dev in /sys/class/infiniband/*; do
        [ -e "$dev/device/driver" ] || continue
        if [ "$(basename "$(readlink -f "$dev/device/driver")")" = "efa" ]; then
            count=$((count + 1))
        fi
    done
    echo "FMCLUSTER $node efa_devices $count"
}

find_all_reduce() {
    local candidate
    for candidate in "${FMC_NCCL_TESTS:-}" "$(command -v all_reduce_perf 2>/dev/null)" \
        /opt/nccl-tests/build/all_reduce_perf /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

nodes="${SLURM_JOB_NUM_NODES:-1}"
srun --ntasks-per-node=1 --nodes="$nodes" --ntasks="$nodes" bash -c "$(declare -f node_checks); node_checks"

if ! binary="$(find_all_reduce)"; then
    echo "FMCLUSTER - nccl absent all_reduce_perf not found on $(hostname -s) (name it with --nccl-tests PATH, or use an image with nccl-tests such as the DLAMI)"
    exit 0
fi
ranks="${FMC_RANKS_PER_NODE:-1}"
echo "FMCLUSTER-NCCL-BEGIN $binary on $nodes node(s) x $ranks rank(s)"
if command -v mpirun >/dev/null 2>&1; then
    mpirun -n "$((nodes * ranks))" -N "$ranks" --bind-to none \
        -x FI_PROVIDER=efa -x LD_LIBRARY_PATH \
        --mca pml '^ucx' --mca btl tcp,self \
        "$binary" -b 8M -e 4G -f 2 -g 1 -c 1 2>&1
else
    FI_PROVIDER=efa srun --mpi=pmix --ntasks-per-node="$ranks" "$binary" -b 8M -e 4G -f 2 -g 1 -c 1 2>&1
fi
rc=$?
echo "FMCLUSTER-NCCL-END"
echo "FMCLUSTER - nccl ran $rc"
