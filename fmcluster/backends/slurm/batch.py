"""A Slurm batch job driven over ssh from here: submit (script on stdin), wait, collect its output.

The output file is written on the job's batch host. Where /home is shared the login node reads it directly;
where it is not, a one-task ``srun`` on the batch host prints it.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from fmcluster.aws.login import SshTarget, ssh_argv
from fmcluster.errors import FmclusterError

FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE"}


class SlurmError(FmclusterError):
    exit_code = 1


@dataclass
class JobState:
    job_id: str
    state: str = "UNKNOWN"
    reason: str = ""
    batch_host: str = ""
    nodes: str = ""


class Remote:
    """Runs shell commands on the login node through ssh (BatchMode: never waits at a prompt)."""

    def __init__(self, target: SshTarget, timeout: float = 120):
        self.target = target
        self.timeout = timeout

    def run(self, command: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = ssh_argv(self.target, [command], batch=True)
        try:
            result = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=self.timeout)
        except FileNotFoundError:
            raise SlurmError("ssh is not installed here (the OpenSSH client is needed)") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"`{command.split()[0]}` over ssh to {self.target.host} took over "
                             f"{self.timeout:.0f} s") from None
        if result.returncode == 255:  # ssh's own failure, not the remote command's
            raise SlurmError(f"ssh to {self.target.user}@{self.target.host} failed: "
                             f"{_last_line(result.stderr) or 'exit 255'}")
        return result


def submit(remote: Remote, script: str, sbatch_options: list[str], environment: dict[str, str],
           what: str = "the smoke job") -> str:
    exports = ",".join(["ALL", *(f"{k}={v}" for k, v in environment.items())])
    command = "sbatch --parsable " + shlex.join([*sbatch_options, f"--export={exports}"])
    result = remote.run(command, stdin=script)
    job_id = result.stdout.strip().split(";")[0]
    if result.returncode != 0 or not job_id.isdigit():
        raise SlurmError(f"sbatch refused {what}: {_last_line(result.stderr) or result.stdout.strip()}")
    return job_id


def state(remote: Remote, job_id: str) -> JobState:
    result = remote.run(f"scontrol show job -o {job_id}")
    if result.returncode != 0:  # purged after MinJobAge: it ended; the output file tells how
        return JobState(job_id, "GONE")
    fields = dict(item.split("=", 1) for item in result.stdout.split() if "=" in item)
    return JobState(job_id, fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""),
                    fields.get("BatchHost", ""), fields.get("NodeList", ""))


def wait(remote: Remote, job_id: str, timeout_s: float, on_poll: Callable[[JobState, float], None],
         interval: float = 5.0) -> JobState:
    started = time.monotonic()
    last = JobState(job_id)
    while True:
        current = state(remote, job_id)
        if current.batch_host:
            last = current
        elapsed = time.monotonic() - started
        on_poll(current, elapsed)
        if current.state in FINISHED or current.state == "GONE":
            return current if current.state != "GONE" else JobState(job_id, "GONE", "", last.batch_host, last.nodes)
        if elapsed > timeout_s:
            cancel(remote, job_id)
            raise SlurmError(f"job {job_id} did not finish within {timeout_s / 60:.0f} min (last state "
                             f"{current.state}{f' ({current.reason})' if current.reason not in ('', 'None') else ''}"
                             "); it was cancelled")
        time.sleep(interval)


def cancel(remote: Remote, job_id: str) -> None:
    try:
        remote.run(f"scancel {job_id}")
    except SlurmError:
        pass  # best effort: the job's time limit ends it anyway


def collect(remote: Remote, path: str, job: JobState, partition: str, reservation: str | None = None) -> str:
    """The job's output file; ``reservation``: the one its batch host is held in (the fetch must run there too)."""
    result = remote.run(f"cat {path}")
    if result.returncode == 0:
        return result.stdout
    if job.batch_host:
        fetch = shlex.join(["srun", "--quiet", f"--partition={partition}", f"--nodelist={job.batch_host}",
                            *([f"--reservation={reservation}"] if reservation else []),
                            "--nodes=1", "--ntasks=1", "--time=5", "cat", path])
        result = remote.run(fetch)
        if result.returncode == 0:
            return result.stdout
    raise SlurmError(f"could not read the job's output {path} (on {job.batch_host or 'its batch host'}): "
                     f"{_last_line(result.stderr)}")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
