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
* ``dcgmi diag -r LEVEL -j``: DCGM 4.x's JSON (see :func:`dcgmi`), one result per GPU per test of the level, a test
  failing on a GPU the node's ``dcgm_failures`` fault names.
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


# dcgmi diag's suites, from NVIDIA/DCGM at commit 28bfbd4c97413d4aec249cdd9543a67d24f95b78:
# nvvs/src/NvidiaValidationSuite.cpp FillTestVectors (each suite adds tests to the one below) and
# nvvs/include/PluginStrings.h (each test's name and category). Left out: ``eud`` (level 3 only as root with NVIDIA's
# separate EUD package installed, which a node image need not have) and ``cpu_eud`` (Grace CPUs).
DCGM_LEVELS: dict[int, tuple[tuple[str, str], ...]] = {
    1: (("Deployment", "software"),),
    2: (("Hardware", "memory"), ("Integration", "pcie")),
    3: (("Hardware", "diagnostic"), ("Hardware", "nvbandwidth"), ("Stress", "memory_bandwidth"),
        ("Stress", "targeted_stress"), ("Stress", "targeted_power")),
    4: (("Hardware", "pulse_test"), ("Stress", "memtest")),
}
DCGM_TESTS = tuple(test for level in DCGM_LEVELS.values() for _, test in level)
# The level names dcgmi also accepts (DCGM docs, "dcgmi diag" reference, -r: "quick and short, medium, long, and
# xlong are aliases for levels 1 through 4").
DCGM_ALIASES = {"quick": 1, "short": 1, "medium": 2, "long": 3, "xlong": 4}
# What a failing test reports, in DCGM's message shape: (DCGM_FR_* error_id, its message format, error_category).
# Codes and formats: dcgmlib/dcgm_errors.h (commit ffde4e54bc7249a6039a5e6b45b395141e1217f9); every one is
# DCGM_ERROR_ISOLATE (severity 2) in dcgmlib/src/dcgm_errors.c's table (commit 28bfbd4c). Which code each test
# reports and the category (dcgmErrorCategory_t) are the sandbox's choice: messages that carry no figure.
DCGM_FAILURES: dict[str, tuple[int, str, int]] = {
    "software": (85, "GPU {gpu} had memory errors and row remappings are pending", 10),
    "memory": (52, "Found 1 faulty memory elements on GPU {gpu}", 10),
    "memtest": (58, "A memory mismatch was detected on GPU {gpu}, but no error was reported by CUDA or NVML.", 10),
    "pcie": (86, "GPU {gpu} was unsuccessfully written to in a peer-to-peer test: broken_p2p", 13),
}
CUDA_DBE = (57, "CUDA APIs have indicated that a double-bit ECC error has occured on GPU {gpu}.", 10)
# The PCI device id DCGM lists per GPU (entity_groups): PCI ID Repository, vendor 10de, 2330 "GH100 [H100 SXM5 80GB]".
# A GPU not listed gets no entity_groups (the schema does not require them) rather than an invented id.
DEVICE_IDS = {"NVIDIA H100 80GB HBM3": "2330"}
DCGM_VERSION = "4.x-sandbox"  # says the JSON is not a capture; the reader only shows it


def _styled(document: dict) -> None:
    # jsoncpp's toStyledString: keys sorted (Json::Value objects are std::map), three-space indent, " : "
    print(json.dumps(document, indent=3, sort_keys=True, separators=(",", " : ")) + "\n")


def dcgmi(args: list[str]) -> int:
    """``dcgmi diag -r LEVEL -j`` as DCGM 4.x prints it (key names: nvvs/include/NvvsJsonStrings.h; shape: NVIDIA's
    testing/python3/dcgm_diag_schema.json, tests/data/burn-in/). Exit codes are dcgmi's ``main`` returning
    dcgmReturn_t (dcgmi/main_dcgmi.cpp), so the shell sees it modulo 256: a failure of DCGM_ERROR_ISOLATE severity is
    DCGM_ST_NVVS_ISOLATE_ERROR (-51, 205), another DCGM_ST_NVVS_ERROR (-30, 226) (dcgmi/Diag.cpp GetFailureResult;
    dcgmlib/dcgm_structs.h)."""
    if args[:1] != ["diag"] or "-j" not in args and "--json" not in args:
        print(f"sandbox: only `dcgmi diag -r LEVEL -j` is emulated, not `dcgmi {' '.join(args)}`", file=sys.stderr)
        return 1
    run = _option(args, "-r", "--run") or "1"
    if len(run) == 1 and run not in "1234":
        # modules/diag/DcgmDiagCommon.cpp dcgm_diag_common_populate_run_diag's error, thrown as a TCLAP parse
        # error by dcgmi/CommandLineParser.cpp (commit 1477d8785e899ab3450fdff2b486102e9bed096b), which prints it
        # with "Error: " and a "." of its own, main_dcgmi.cpp the runtime_error, and exits -2
        print(f"Error: Invalid value '{run}' specified for -r..\n"
              "An error occurred trying to parse the command line.", file=sys.stderr)
        return 254
    level = int(run) if len(run) == 1 else DCGM_ALIASES.get(run.lower())
    if level is None:
        # dcgmi takes it for test names (nvvs looks them up); the sandbox runs whole levels only
        print(f"sandbox: dcgmi diag -r {run!r} is not emulated: levels 1-4 and {', '.join(DCGM_ALIASES)} are",
              file=sys.stderr)
        return 254
    node = _node(_world())
    if not node["gpus"]:
        # Diag::RunDiagOnce's message for a diagnostic that could not run, with DCGM_ST_GROUP_IS_EMPTY's
        # errorString (dcgmlib/src/dcgm_errors.c), as HelperDisplayFailureMessage prints it under -j
        _styled({"DCGM Diagnostic": {"version": DCGM_VERSION, "runtime_error": (
            "Error: Unable to complete diagnostic for entities *,cpu:*. Return: (-35) : The specified group is "
            "empty, and this operation is incompatible with an empty group\n")}})
        return 221
    failing = {(f["gpu"], f["test"]) for f in node.get("dcgm_failures", [])}
    categories: dict[str, list[dict]] = {}
    worst = 0
    for category, test in (pair for lv in sorted(DCGM_LEVELS) if lv <= level for pair in DCGM_LEVELS[lv]):
        results = []
        for gpu in range(node["gpus"]):
            result: dict = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": "Pass"}
            if (gpu, test) in failing:
                code, message, error_category = DCGM_FAILURES.get(test, CUDA_DBE)
                result.update(status="Fail", warnings=[{"error_category": error_category, "error_id": code,
                                                        "error_severity": 2, "warning": message.format(gpu=gpu)}])
                worst = 205
            results.append(result)
        summary = "Fail" if any(r["status"] == "Fail" for r in results) else "Pass"
        categories.setdefault(category, []).append({"name": test, "results": results,
                                                    "test_summary": {"status": summary}})
    document: dict = {"DCGM Diagnostic": {"test_categories": [{"category": c, "tests": t}
                                                              for c, t in categories.items()]},
                      "metadata": {"version": DCGM_VERSION}}
    device = DEVICE_IDS.get(node["gpu_name"])
    if device:
        document["entity_groups"] = [{"entity_group": "GPU", "entity_group_id": 1, "entities": [
            {"device_id": device, "entity_id": gpu} for gpu in range(node["gpus"])]}]
    _styled(document)
    return worst


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
         "all_reduce_perf": all_reduce_perf, "dcgmi": dcgmi}

if __name__ == "__main__":
    sys.exit(TOOLS[sys.argv[1]](sys.argv[2:]))
