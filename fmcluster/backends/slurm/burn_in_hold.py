"""The burn-in gate's hold on a Slurm cluster (issue 37; PCS and ParallelCluster): the nodes under test sit in a
maintenance reservation, so no other job lands on them, and leave it passed or drained.

Written for and run on Debian 12's Slurm 22.05.8 (``tests/backends/slurm/test_burn_in_slurm.py``), in the syntax of
that release's scontrol(1) (Debian's slurm-client 22.05.8-4+deb12u3, its reservation and node update
specifications; ``MAINT``: "Maintenance mode ... permitted to use resources that are already in another
reservation"):

* ``scontrol create reservation ReservationName=N StartTime=now Duration=MIN Users=U Flags=MAINT Nodes=a,b
  PartitionName=P``. Without ``IGNORE_JOBS`` Slurm refuses a node that runs a job ("Requested nodes are busy"), so a
  job that starts between the listing and the reservation is caught by Slurm itself; the listing is read again.
  A job outside the reservation then waits with ``ReqNodeNotAvail, Reserved for maintenance``.
* ``Duration`` bounds the hold: a run killed with SIGKILL (nothing can clean up after that) leaves a reservation
  that ends by itself; the next run removes it first, found by its name (:func:`reservation_name`).
* ``scontrol delete reservation`` refuses a reservation a job still runs in ("Requested reservation is in use"), so
  removal cancels the jobs in it (``scancel --reservation``) and retries until they are gone.
* A failed node: ``scontrol update NodeName=n State=DRAIN Reason=...``. scontrol 22.05.8 took a 2,000-character
  reason here, but slurmdbd keeps a node event's reason in a MySQL ``tinytext`` column (SchedMD/slurm
  ``src/plugins/accounting_storage/mysql/accounting_storage_mysql.c``, ``event_table_fields``), 255 bytes at most,
  so a reason is cut to that and stays whole in ``sacctmgr show event`` as in ``sinfo -R``.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from fmcluster.aws.login import SshTarget
from fmcluster.backends.slurm import batch
from fmcluster.backends.smoke.termination import ends_like_ctrl_c

REASON_PREFIX = "fmcluster burn-in: "
REASON_MAX_BYTES = 255  # slurmdbd's tinytext (module docstring)
_BUSY_STATES = ("ALLOCATED", "MIXED", "COMPLETING")  # a job runs or is ending there
_TAKE_ATTEMPTS = 3
_DELETE_PATIENCE_S = 60.0


@dataclass(frozen=True)
class Hold:
    """The nodes a burn-in holds in its reservation, and those of the partition it did not take, with why."""

    remote: batch.Remote
    partition: str
    reservation: str
    nodes: tuple[str, ...]  # idle when asked; in the reservation now
    busy: tuple[str, ...] = ()  # a job runs there: never taken
    unavailable: Mapping[str, str] = field(default_factory=dict)  # node -> its Slurm state (down, drained, ...)
    home: str = "/tmp"  # the login user's home: where the jobs' output files go


def reservation_name(partition: str) -> str:
    """One name per partition, so a reservation a killed run left behind is found and removed by the next run."""
    return f"fmcluster-burn-in-{partition}"


def drain_reason(why: str) -> str:
    """``fmcluster burn-in: <why>`` on one line, cut to :data:`REASON_MAX_BYTES` bytes of UTF-8."""
    text = REASON_PREFIX + " ".join(why.split())
    data = text.encode()
    if len(data) <= REASON_MAX_BYTES:
        return text
    return data[:REASON_MAX_BYTES - 3].decode(errors="ignore") + "..."


@contextlib.contextmanager
def hold(ssh: SshTarget | batch.Remote, partition: str, minutes: int,
         nodes: Iterable[str] | None = None) -> Iterator[Hold]:
    """Hold the IDLE nodes of ``partition`` (only those of ``nodes`` when given) in a maintenance reservation for at
    most ``minutes``, and remove it when the block ends, however it ends: an error, a timeout, Ctrl-C, SIGTERM or
    SIGHUP (which raise as Ctrl-C does within the block). A node running a job is never taken (``Hold.busy``).
    Within the block, :func:`release` drains the failed nodes and lets the rest go; a block left without it lets every
    held node go unjudged (the caller gave up on the burn-in).

    A reservation of the same name is removed first: it is a killed run's leftover (or a burn-in of the same
    partition still running elsewhere, which this one replaces)."""
    remote = ssh if isinstance(ssh, batch.Remote) else batch.Remote(ssh)
    name = reservation_name(partition)
    with ends_like_ctrl_c():
        try:
            remove(remote, name)
            taken = _take(remote, partition, name, minutes, None if nodes is None else set(nodes))
            yield taken
        except BaseException:
            # The hold must not outlive the error, but a failing removal must not hide it either: the reservation's
            # Duration ends it in any case.
            with contextlib.suppress(batch.SlurmError):
                remove(remote, name)
            raise
        remove(remote, name)


def release(hold: Hold, passed: Iterable[str], failed: Mapping[str, str]) -> None:
    """Drain each failed node with a reason naming its check and figure (``failed``: node -> e.g. ``"dcgm level 2:
    GPU 3 failed Memory"``), then end the reservation so the passed nodes take jobs again. A held node in neither is
    drained too ("no verdict"): no node joins without passing. Drains come first so a failed node is never free."""
    held = set(hold.nodes)
    strangers = (set(passed) | set(failed)) - held
    if strangers:
        raise ValueError(f"not held by this burn-in: {', '.join(sorted(strangers))}")
    verdicts = dict(failed) | {node: "no verdict" for node in held - set(passed) - set(failed)}
    for node, why in sorted(verdicts.items()):
        result = hold.remote.run(_as_admin(f"scontrol update NodeName={shlex.quote(node)} State=DRAIN "
                                           f"Reason={shlex.quote(drain_reason(why))}"))
        if result.returncode != 0:
            raise batch.SlurmError(f"could not drain {node}: {_last_line(result.stderr)}; the reservation "
                                   f"{hold.reservation} still holds it")
    remove(hold.remote, hold.reservation)


def resume(ssh: SshTarget | batch.Remote, nodes: Iterable[str]) -> None:
    """Put drained nodes back in service (``State=RESUME``): after a repair, or when told a failure was wrong."""
    remote = ssh if isinstance(ssh, batch.Remote) else batch.Remote(ssh)
    names = sorted(set(nodes))
    if not names:
        return
    result = remote.run(_as_admin(f"scontrol update NodeName={shlex.quote(','.join(names))} State=RESUME"))
    if result.returncode != 0:
        raise batch.SlurmError(f"could not resume {', '.join(names)}: {_last_line(result.stderr)}")


def remove(remote: batch.Remote, name: str) -> None:
    """End the reservation ``name`` and the jobs in it; nothing to do when there is none."""
    deadline = time.monotonic() + _DELETE_PATIENCE_S
    while True:
        result = remote.run(_as_admin(f"scontrol delete reservation {shlex.quote(name)}"))
        if result.returncode == 0 or "invalid" in result.stderr.lower():  # deleted, or none of that name
            return
        if "in use" not in result.stderr.lower() or time.monotonic() > deadline:
            raise batch.SlurmError(f"could not delete the reservation {name}: {_last_line(result.stderr)}; it "
                                   "ends by itself at its EndTime (`scontrol show reservation`)")
        remote.run(_as_admin(f"scancel --reservation={shlex.quote(name)}"))
        time.sleep(1.0)


def _take(remote: batch.Remote, partition: str, name: str, minutes: int, wanted: set[str] | None) -> Hold:
    who = remote.run('id -un && printf %s "$HOME"').stdout.splitlines()
    if not who or not who[0].strip():
        raise batch.SlurmError("could not tell which user the login node runs as (`id -un` printed nothing)")
    user, home = who[0].strip(), (who[1].strip() if len(who) > 1 and who[1].strip() else "/tmp")
    for attempt in range(_TAKE_ATTEMPTS):
        idle, busy, unavailable = _partition_nodes(remote, partition, wanted)
        if not idle:
            return Hold(remote, partition, name, (), busy, unavailable, home)
        command = shlex.join(["scontrol", "create", "reservation", f"ReservationName={name}", "StartTime=now",
                              f"Duration={max(1, minutes)}", f"Users={user}", "Flags=MAINT",
                              f"Nodes={','.join(idle)}", f"PartitionName={partition}"])
        result = remote.run(_as_admin(command))
        if result.returncode == 0:
            return Hold(remote, partition, name, idle, busy, unavailable, home)
        # A job started on one of them after the listing: Slurm said so; list again.
        if "busy" not in result.stderr.lower() or attempt == _TAKE_ATTEMPTS - 1:
            raise batch.SlurmError(f"Slurm refused the burn-in reservation on {','.join(idle)}: "
                                   f"{_last_line(result.stderr) or result.stdout.strip()}")
    raise AssertionError("unreachable")


def _partition_nodes(remote: batch.Remote, partition: str,
                     wanted: set[str] | None) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]:
    """(idle, busy, unavailable with state) among the partition's nodes, read from ``scontrol show node -o``: a node
    is taken only in state ``IDLE`` with no flag (not ``IDLE+DRAIN``, ``IDLE+RESERVED``, ``IDLE+POWERED_DOWN``, ...)."""
    result = remote.run("scontrol show node -o")
    if result.returncode != 0:
        raise batch.SlurmError(f"could not list the nodes: {_last_line(result.stderr)}")
    idle: list[str] = []
    busy: list[str] = []
    unavailable: dict[str, str] = {}
    seen: set[str] = set()
    for line in result.stdout.splitlines():
        node, state, partitions = (_field(line, key) for key in ("NodeName", "State", "Partitions"))
        if not node or partition not in partitions.split(",") or (wanted is not None and node not in wanted):
            continue
        seen.add(node)
        if state == "IDLE":
            idle.append(node)
        elif any(part in _BUSY_STATES for part in state.split("+")):
            busy.append(node)
        else:
            unavailable[node] = state
    for node in sorted((wanted or set()) - seen):
        unavailable[node] = f"not a node of partition {partition}"
    return tuple(sorted(idle)), tuple(sorted(busy)), unavailable


def _as_admin(command: str) -> str:
    """``command`` as a Slurm administrator: scontrol(1), DESCRIPTION: "Most of the commands can only be executed by
    user root or an Administrator" (creating a reservation, draining a node among them). A login user other than
    root runs it through ``sudo -n``, which fails at once, with its reason in the error, rather than wait for a
    password."""
    return f'$([ "$(id -u)" = 0 ] || echo sudo -n) {command}'


def _field(line: str, key: str) -> str:
    match = re.search(rf"(?:^| ){key}=(\S+)", line)
    return match.group(1) if match else ""


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
