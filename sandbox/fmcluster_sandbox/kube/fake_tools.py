"""The tools an emulated GPU node's container finds, printing what the real ones print for that node's health.

Run as a script (``python -S -I fake_tools.py TOOL ARGS…``) by the small wrappers :mod:`.launcher_run` puts first on
the launcher's PATH and at the image's paths; it imports nothing of the sandbox (it runs inside the launcher's mount
namespace, with only the standard library). What each node has comes from the world file (``FMCLUSTER_SANDBOX_WORLD``,
written by :mod:`.launcher_run` from :mod:`.node_health`); the node a process runs on from ``FMCLUSTER_SANDBOX_HOST``
(set by the fake ``mpirun`` for each rank, the launcher pod's own name outside it).

* ``hostname [-s]``: the pod's hostname (the MPI Operator sets each worker pod's ``hostname`` to its pod name).
* ``nvidia-smi -L``: one line per GPU in NVIDIA's format, ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)``; no GPU:
  ``No devices were found``, exit 6 (nvidia-smi's documented return code 6, "A query to find an object was
  unsuccessful").
* ``fi_info -p efa -t FI_EP_RDM``: one ``provider: efa`` block per EFA device, as AWS's "Get started with EFA"
  page shows it; none: ``fi_getinfo: -61 (No data available)``, exit 1.
* ``mpirun -np N -N M CMD…`` (Open MPI's meaning: N processes in all, M per node, nodes in the hostfile's order,
  ``OMPI_MCA_orte_default_hostfile`` as the MPI Operator sets it): each rank runs CMD with Open MPI's
  ``OMPI_COMM_WORLD_*`` variables, as its node's hostname, in its own mount namespace where its node's
  ``/sys/class/infiniband`` is mounted; a rank exiting non-zero ends the job with Open MPI's message.
* ``all_reduce_perf -b MIN -e MAX -f F -g 1``: rank 0 prints nccl-tests' device list and table (the layout of
  tests/data/nccl-tests/2x-h100-full-run.txt) with the measured rows for the job's instance type and node count,
  scaled by the health model's factor; other ranks print nothing. A rank whose GPU is missing fails as CUDA does
  (``invalid device ordinal``); a node that never finishes hangs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

SIZE_SUFFIX = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


def _world() -> dict:
    with open(os.environ["FMCLUSTER_SANDBOX_WORLD"], encoding="utf-8") as handle:
        world: dict = json.load(handle)
    return world


def _host() -> str:
    return os.environ.get("FMCLUSTER_SANDBOX_HOST", "localhost")


def _node(world: dict) -> dict:
    node: dict = world["hosts"].get(_host(), {"gpus": 0, "efa": 0, "gpu_name": "", "never_finishes": False})
    return node


def hostname(args: list[str]) -> int:
    name = _host()
    print(name.split(".")[0] if "-s" in args or "--short" in args else name)
    return 0


def nvidia_smi(args: list[str]) -> int:
    node = _node(_world())
    if not node["gpus"]:
        print("No devices were found")
        return 6
    for index in range(node["gpus"]):
        uid = uuid.uuid5(uuid.NAMESPACE_DNS, f"{_host()}/gpu{index}")
        print(f"GPU {index}: {node['gpu_name']} (UUID: GPU-{uid})")
    return 0


def fi_info(args: list[str]) -> int:
    node = _node(_world())
    if not node["efa"]:
        print("fi_getinfo: -61 (No data available)", file=sys.stderr)
        return 1
    for index in range(node["efa"]):
        print(f"provider: efa\n    fabric: efa\n    domain: rdmap{index}s0-rdm\n    version: 122.0\n"
              "    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA")
    return 0


def _option(args: list[str], *names: str) -> str | None:
    for index, arg in enumerate(args[:-1]):
        if arg in names:
            return args[index + 1]
    return None


def mpirun(args: list[str]) -> int:
    world = _world()
    rest = list(args)
    np_, per_node, exports = 1, 1, {}
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag in ("-np", "-n"):
            np_ = int(rest.pop(0))
        elif flag in ("-N", "--npernode"):
            per_node = int(rest.pop(0))
        elif flag in ("--bind-to", "--map-by"):
            rest.pop(0)
        elif flag == "--mca":
            del rest[:2]
        elif flag == "-x":
            name, _, value = rest.pop(0).partition("=")
            if value:
                exports[name] = value
    with open(os.environ["OMPI_MCA_orte_default_hostfile"], encoding="utf-8") as handle:
        hosts = [line.split()[0].split(".")[0] for line in handle if line.strip()]
    if np_ > len(hosts) * per_node:
        print("There are not enough slots available in the system to satisfy the "
              f"{np_} slots that were requested by the application:\n  {rest[0]}", file=sys.stderr)
        return 1
    procs = []
    for rank in range(np_):
        host = hosts[rank // per_node]
        env = {**os.environ, **exports, "FMCLUSTER_SANDBOX_HOST": host, "OMPI_COMM_WORLD_RANK": str(rank),
               "OMPI_COMM_WORLD_SIZE": str(np_), "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % per_node),
               "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_node)}
        # the rank's node's devices: its own mount namespace, its /sys/class
        wrapped = ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /sys/class && exec "$@"',
                   world["sys_class"][host], *rest]
        procs.append(subprocess.Popen(wrapped, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    failed = None
    for rank, proc in enumerate(procs):
        out, _ = proc.communicate()
        sys.stdout.write(out.decode(errors="replace"))
        if proc.returncode and failed is None:
            failed = (rank, proc.returncode)
    sys.stdout.flush()
    if failed is None:
        return 0
    bar = "-" * 74
    print(f"{bar}\nPrimary job  terminated normally, but 1 process returned\na non-zero exit code. Per user-direction, "
          f"the job has been aborted.\n{bar}\n{bar}\nmpirun detected that one or more processes exited with non-zero "
          "status, thus causing\nthe job to be terminated. The first process to do so was:\n\n"
          f"  Process name: [[4242,1],{failed[0]}]\n  Exit code:    {failed[1]}\n{bar}")
    return failed[1]


def _size(text: str) -> int:
    suffix = text[-1:].upper()
    return int(float(text[:-1]) * SIZE_SUFFIX[suffix]) if suffix in SIZE_SUFFIX else int(text)


def _time(us: float) -> str:
    # nccl-tests' time column: fewer decimals as the figure grows (see the captures)
    return f"{us:7.0f}" if us >= 10000 else f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"


def all_reduce_perf(args: list[str]) -> int:
    world = _world()
    node = _node(world)
    rank, local = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")), int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK",
                                                                                           "0"))
    if node["never_finishes"]:
        while True:
            time.sleep(3600)
    if local >= node["gpus"]:
        print(f"{_host()}: Test CUDA failure common.cu:1080 'invalid device ordinal'\n"
              f" .. {_host()} pid {os.getpid()}: Test failure common.cu:1164", flush=True)
        return 1
    if rank != 0:
        return 0
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    per_node = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
    with open(os.environ["OMPI_MCA_orte_default_hostfile"], encoding="utf-8") as handle:
        nodes = [line.split()[0].split(".")[0] for line in handle if line.strip()]
    hosts = [nodes[index // per_node] for index in range(size)]
    low, high = _size(_option(args, "-b") or "32M"), _size(_option(args, "-e") or "32M")
    factor = int(_option(args, "-f") or "2")
    print(f"# nThread 1 nGpus 1 minBytes {low} maxBytes {high} step: {factor}(factor) warmup iters: 5 iters: 20 "
          "agg iters: 1 validation: 1 graph: 0\n#\n# Using devices")
    for index, host in enumerate(hosts):
        device = index % max(1, world["hosts"][host]["gpus"])
        print(f"#  Rank {index:2d} Group  0 Pid {1000 + index:6d} on {host} device {device:2d} "
              f"[0000:{device:02x}:00] {world['hosts'][host]['gpu_name']}")
    if any(world["hosts"][host]["gpus"] <= hosts[:i].count(host) for i, host in enumerate(hosts)):
        return 1  # a rank without its GPU: the collective never forms (that rank printed CUDA's error)
    measured = world["nccl"]
    if measured["rows"] is None:
        print(f"sandbox: {measured['missing']}", file=sys.stderr)
        return 1
    rows = {int(row[0]): row for row in measured["rows"]}
    scale = measured["factor"]
    print("#\n#                                                              out-of-place                       "
          "in-place          \n#       size         count      type   redop    root     time   algbw   busbw "
          "#wrong     time   algbw   busbw #wrong\n#        (B)    (elements)                               (us)  "
          "(GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ")
    total, count, current = 0.0, 0, low
    while current <= high:
        row = rows.get(current)
        if row is None:
            print(f"sandbox: {measured['source']} has no row for {current} bytes", file=sys.stderr)
            return 1
        cells = [f"{current:12d}", f"{int(row[1]):12d}", f"{'float':>8}", f"{'sum':>6}", f"{-1:6d}"]
        for time_us, algbw, busbw in ((row[2], row[3], row[4]), (row[5], row[6], row[7])):
            cells += [_time(time_us / scale), f"{algbw * scale:6.2f}", f"{busbw * scale:6.2f}", f"{0:5d}"]
            total += float(f"{busbw * scale:.2f}")
            count += 1
        print("  ".join(cells))
        current *= factor
    print(f"# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {total / max(count, 1):g} \n#")
    return 0


TOOLS = {"hostname": hostname, "nvidia-smi": nvidia_smi, "fi_info": fi_info, "mpirun": mpirun,
         "all_reduce_perf": all_reduce_perf}

if __name__ == "__main__":
    sys.exit(TOOLS[sys.argv[1]](sys.argv[2:]))
