#!/bin/bash
# fmcluster burn-in check job: submitted by fmcluster/backends/slurm/burn_in.py with sbatch into the burn-in
# reservation, one task per node. Each node runs the burn-in tools and keeps what each printed; fmcluster judges.
#
# Step 1 (all nodes at once): each node writes its records to a file on its own disk (in a folder named after the
# node as well, so that nodes sharing a host or a /tmp cannot overwrite each other's),
#   FMCLUSTER-BURN-IN <node> <tool> <exit code|absent> <stdout bytes> <stdout base64> <stderr bytes> <stderr base64>
#   FMCLUSTER-BURN-IN-END <node> <records>
# Step 2 (one node after the other): a one-task srun prints that node's file into the job's output.
# Why files and not the tasks' stdout: srun forwards several tasks' output in messages of at most 1,024 bytes
# (SchedMD/slurm src/common/io_hdr.h, SLURM_IO_MAX_MSG_LEN), so a longer line (dcgmi's JSON, in base64) from one
# node could be cut by another node's. A one-task step has no one to mix with,
# the steps run in turn, and the byte counts and the END line let fmcluster refuse a record cut short (a node
# killed mid-write counts as a node that never answered). No shared filesystem is needed.
#
# Settings come from the environment (sbatch --export):
#   FMC_TOOL_NAMES     the checks to run, in order (names of fmcluster.backends.burn_in.node_outputs.TOOLS)
#   FMC_TOOL_<name>    the command of each (its level already filled in)
#   FMC_CHECK_SECONDS  the time the tools of one node may take together; a tool still running at the end is
#                      stopped by timeout(1), whose exit status 124 it gets; a tool that had no time left gets 124 too
set -u

export PATH="${PATH}:/opt/amazon/efa/bin:/usr/local/bin"
dir="/tmp/fmcluster-burn-in-${SLURM_JOB_ID}"

node_checks() {
    local node name var cmd rc out err records=0 deadline left
    node="${SLURMD_NODENAME:-$(hostname -s)}"  # Slurm's name for the node, which may not be its hostname
    mkdir -p "$dir/$node"
    out="$dir/$node/stdout"
    err="$dir/$node/stderr"
    deadline=$(($(date +%s) + ${FMC_CHECK_SECONDS:-600}))
    : >"$dir/$node/records.part"
    for name in ${FMC_TOOL_NAMES}; do
        var="FMC_TOOL_${name}"
        cmd="${!var}"
        : >"$out"
        : >"$err"
        left=$((deadline - $(date +%s)))
        if ! command -v "${cmd%% *}" >/dev/null 2>&1; then
            rc=absent
        elif [ "$left" -le 0 ]; then
            rc=124
        elif command -v timeout >/dev/null 2>&1; then
            timeout --kill-after=10 "$left" bash -c "$cmd" >"$out" 2>"$err" </dev/null
            rc=$?
        else
            bash -c "$cmd" >"$out" 2>"$err" </dev/null
            rc=$?
        fi
        printf 'FMCLUSTER-BURN-IN %s %s %s %s %s %s %s\n' "$node" "$name" "$rc" \
            "$(wc -c <"$out")" "$(base64 -w 0 <"$out")" "$(wc -c <"$err")" "$(base64 -w 0 <"$err")" \
            >>"$dir/$node/records.part"
        records=$((records + 1))
    done
    echo "FMCLUSTER-BURN-IN-END $node $records" >>"$dir/$node/records.part"
    mv "$dir/$node/records.part" "$dir/$node/records"
}

nodes="${SLURM_JOB_NUM_NODES:-1}"
# the step ends a minute before the job so that step 2 still brings home what the other nodes found
step_min=$(((${FMC_CHECK_SECONDS:-600} + 59) / 60 + 1))
srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 --time="$step_min" \
    bash -c "dir=$dir; $(declare -f node_checks); node_checks"

for node in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do
    srun --nodes=1 --ntasks=1 --nodelist="$node" --time=2 \
        bash -c "cat '$dir/$node/records' 2>/dev/null; rm -rf '$dir/$node'; rmdir '$dir' 2>/dev/null; true"
done
