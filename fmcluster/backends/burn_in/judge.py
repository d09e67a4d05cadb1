"""Judge one node's burn-in outputs (:class:`~fmcluster.backends.burn_in.node_outputs.NodeOutputs`) against what its
queue should have (:class:`~fmcluster.backends.smoke.checks.Expectations`) at a level: the per-node half of the gate,
the same for every backend.

The checks, each a smoke :class:`~fmcluster.backends.smoke.checks.Check` with found / expected / detail:

* ``gpus`` (``nvidia-smi -L``) or, on Trainium, ``neuron`` (``neuron-ls``): the device count against the catalog;
* ``efa`` (``fi_info -p efa -t FI_EP_RDM``): the EFA provider answers and its RDM devices number what the queue's
  network interfaces give (skipped when the queue has EFA off);
* ``dcgm`` (``dcgmi diag -r N -j``, N the level's, :data:`fmcluster.catalog.burn_in_levels.DCGM_LEVEL`): DCGM's own
  verdict, with the failing GPUs and DCGM's message (GPU queues only).

A check whose tool did not run, is not installed, or printed something its reader cannot read fails: a node whose
health cannot be read never passes. A node passes only when every check the level runs passed.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster.backends.burn_in import dcgm, devices
from fmcluster.backends.burn_in.node_outputs import TOOLS, NodeOutputs, ToolRun
from fmcluster.backends.burn_in.outputs import UnreadableOutput
from fmcluster.backends.smoke.checks import Check, Expectations
from fmcluster.catalog.burn_in_levels import DCGM_LEVEL, Level


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(c.status in ("passed", "skipped") for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status not in ("passed", "skipped"))


def checks_run(expect: Expectations, level: Level) -> tuple[str, ...]:
    """The per-node checks (names of :data:`TOOLS`) the level runs on the queue's nodes."""
    names = ["neuron" if expect.kind == "trainium" else "gpus"]
    if expect.efa_on:
        names.append("efa")
    if expect.kind != "trainium":
        names.append("dcgm")
    return tuple(names)


def command(check: str, level: Level) -> str:
    """The command line a backend runs on each node for ``check`` at ``level``."""
    return TOOLS[check].replace("LEVEL", str(DCGM_LEVEL[level]))


def judge(outputs: NodeOutputs, expect: Expectations, level: Level) -> NodeVerdict:
    checks = []
    for name in checks_run(expect, level):
        run = outputs.runs.get(name)
        missing = _missing(name, run, level)
        if missing is not None:
            checks.append(missing)
            continue
        assert run is not None
        try:
            checks.append(_JUDGES[name](run, expect, level))
        except UnreadableOutput as exc:
            checks.append(Check(name, "failed", str(exc), expected=_expected(name, expect, level)))
    if not expect.efa_on:
        checks.append(Check("efa", "skipped", f"EFA is off for queue {expect.queue.name}"))
    return NodeVerdict(outputs.node, tuple(checks))


def _missing(name: str, run: ToolRun | None, level: Level) -> Check | None:
    tool = command(name, level)
    if run is None:
        return Check(name, "failed", f"{tool} brought back no output from the node")
    if run.exit_code is None:
        return Check(name, "absent", f"{tool.split()[0]} is not installed on the node")
    return None


def _expected(name: str, expect: Expectations, level: Level) -> object:
    if name in ("gpus", "neuron"):
        return expect.accelerators
    if name == "efa":
        return expect.efa_devices
    return f"pass at level {DCGM_LEVEL[level]}"


def _count(name: str, found: int, expected: int | None, what: str) -> Check:
    if expected is None:
        return Check(name, "passed", f"{found} {what} (the catalog has no count to compare)", found)
    return Check(name, "passed" if found == expected else "failed", f"{found} {what}, expected {expected}", found,
                 expected)


def _gpus(run: ToolRun, expect: Expectations, level: Level) -> Check:
    # nvidia-smi exits 6 with "No devices were found" on a node whose driver sees no GPU: zero, not unreadable
    found = devices.gpus(run.stdout or run.stderr)
    return _count("gpus", len(found), expect.accelerators, "GPU(s) from nvidia-smi -L")


def _neuron(run: ToolRun, expect: Expectations, level: Level) -> Check:
    found = devices.neuron_devices(run.stdout)
    return _count("neuron", len(found), expect.accelerators, "Neuron device(s) from neuron-ls")


def _efa(run: ToolRun, expect: Expectations, level: Level) -> Check:
    # fi_info prints "fi_getinfo: -61" (no EFA provider) on stderr and exits 1: zero devices, read from stderr
    info = devices.efa(run.stdout if run.stdout.strip() else run.stderr)
    others = sorted({e.provider for e in info.endpoints if e.provider != "efa"})
    check = _count("efa", len(info.devices), expect.efa_devices, "EFA device(s) with an RDM endpoint from fi_info "
                   "-p efa")
    if others:
        return Check("efa", "failed", f"fi_info -p efa answered provider(s) {', '.join(others)}, not efa",
                     len(info.devices), expect.efa_devices)
    if not info.devices:
        return Check("efa", "failed", "the EFA provider answers nothing (fi_getinfo: -61): no EFA device", 0,
                     expect.efa_devices)
    return check


def _dcgm(run: ToolRun, expect: Expectations, level: Level) -> Check:
    report = dcgm.parse(run.stdout)
    expected = f"pass at level {DCGM_LEVEL[level]}"
    if report.passed:
        return Check("dcgm", "passed", report.summary(), "pass", expected)
    found = [f"GPU {gpu}" for gpu in report.failing_gpus] or ["did not run" if report.runtime_error else "no result"]
    return Check("dcgm", "failed", report.summary(), ", ".join(found), expected,
                 {"failing_gpus": list(report.failing_gpus)})


_JUDGES = {"gpus": _gpus, "neuron": _neuron, "efa": _efa, "dcgm": _dcgm}
