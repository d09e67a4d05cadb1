#!/bin/bash
# fmcluster burn-in all-reduce job: submitted by fmcluster/backends/slurm/burn_in.py with sbatch into the burn-in
# reservation over every node of the runs. Runs nccl-tests' all_reduce_perf on each run's nodes side by side (one
# srun per run, --nodelist), each run's output to its own file on this host; when all have ended, prints per run
#   FMCLUSTER-NCCL-RUN <index> <exit code> <output bytes> <output base64>
# in turn, so concurrent runs never mix their tables. When no all_reduce_perf is found:
#   FMCLUSTER-NCCL-ABSENT <why>
#
# Settings come from the environment (sbatch --export):
#   FMC_RUNS            the runs, space-separated; a run's nodes joined with ':' (sbatch --export splits on commas)
#   FMC_RANKS_PER_NODE  ranks per node (the accelerators the catalog expects)
#   FMC_NCCL_ITERS      timed iterations per size (all_reduce_perf -n)
#   FMC_STEP_MINUTES    each run's time limit (srun --time)
#   FMC_NCCL_TESTS      optional path to all_reduce_perf
#   FMC_MPI             srun --mpi (how the ranks find each other); empty: the cluster's MpiDefault
set -u

export PATH="${PATH}:/opt/amazon/efa/bin:/opt/amazon/openmpi/bin"

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

if ! binary="$(find_all_reduce)"; then
    echo "FMCLUSTER-NCCL-ABSENT all_reduce_perf not found on $(hostname -s)"
    exit 0
fi
mpi=()
if [ -n "${FMC_MPI:-}" ]; then
    mpi=(--mpi="$FMC_MPI")
fi
ranks="${FMC_RANKS_PER_NODE:-1}"
dir="$(mktemp -d)"
pids=()
index=0
for run in ${FMC_RUNS}; do
    count=$(($(tr -cd ':' <<<"$run" | wc -c) + 1))
    FI_PROVIDER=efa srun "${mpi[@]}" --nodes="$count" --ntasks-per-node="$ranks" --ntasks="$((count * ranks))" \
        --nodelist="${run//:/,}" --time="${FMC_STEP_MINUTES:-10}" \
        "$binary" -b 8M -e 4G -f 2 -g 1 -c 1 -n "${FMC_NCCL_ITERS:-20}" >"$dir/$index.out" 2>&1 &
    pids+=("$!")
    index=$((index + 1))
done
for index in "${!pids[@]}"; do
    wait "${pids[$index]}"
    echo "$?" >"$dir/$index.rc"
done
for index in "${!pids[@]}"; do
    printf 'FMCLUSTER-NCCL-RUN %s %s %s %s\n' "$index" "$(cat "$dir/$index.rc")" \
        "$(wc -c <"$dir/$index.out")" "$(base64 -w 0 <"$dir/$index.out")"
done
rm -rf "$dir"
