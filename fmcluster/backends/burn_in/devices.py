"""Read what a node says it has: GPUs (``nvidia-smi -L``), Neuron devices (``neuron-ls``) and EFA devices
(``fi_info -p efa``), to count against the catalog.

``fi_info -p efa`` prints one block per endpoint: ``provider: efa`` then indented ``fabric:``, ``domain:``,
``version:``, ``type:`` and ``protocol:`` lines. Each EFA device shows one domain per endpoint type, named after the
device (``rdmap16s27-rdm`` for ``FI_EP_RDM``, ``rdmap16s27-dgrm`` for ``FI_EP_DGRAM``; older libfabric names them
``efa_0-rdm``), so the devices are the distinct domains of the RDM endpoints with their ``-rdm`` suffix removed.
When no provider matches, ``fi_info`` prints ``fi_getinfo: -61``: -FI_ENODATA, which ``fi_getinfo(3)`` returns
"if no matching fabric information is available" — zero EFA devices, not an unreadable answer.

``nvidia-smi -L`` prints ``GPU <i>: <name> (UUID: GPU-…)`` per GPU; under MIG each GPU is followed by indented
``MIG …`` lines, which are slices of that GPU, not more GPUs.

``neuron-ls`` prints a table, one row per Neuron device, its header in two rows (``NEURON`` over ``DEVICE``…); with
``--show-all-procs`` a device with more processes gets more rows whose device cell is blank (AWS Neuron docs,
"Neuron LS User Guide"). Newer versions print ``instance-type:`` lines before the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fmcluster.backends.burn_in.outputs import UnreadableOutput

_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
_MIG_LINE = re.compile(r"^\s+MIG\s")
_FI_NODATA = re.compile(r"^fi_getinfo:\s*-61\s*$")
# nvidia-smi's answer on a host whose driver sees no GPU (its documented return code 6, "A query to find an
# object was unsuccessful").
_NO_GPUS = "No devices were found"


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str


@dataclass(frozen=True)
class FabricEndpoint:
    provider: str
    fabric: str
    domain: str
    version: str
    type: str
    protocol: str


@dataclass(frozen=True)
class EfaInfo:
    endpoints: tuple[FabricEndpoint, ...]

    @property
    def devices(self) -> tuple[str, ...]:
        """The EFA devices with an RDM endpoint (the endpoint NCCL's OFI plugin uses), by device name."""
        names = {e.domain.removesuffix("-rdm") for e in self.endpoints
                 if e.provider == "efa" and e.type == "FI_EP_RDM"}
        return tuple(sorted(names))


def gpus(text: str) -> tuple[Gpu, ...]:
    """The GPUs ``nvidia-smi -L`` lists; raises :class:`UnreadableOutput` on anything else."""
    if text.strip() == _NO_GPUS:
        return ()
    found: list[Gpu] = []
    for line in text.splitlines():
        if not line.strip() or _MIG_LINE.match(line):
            continue
        match = _GPU_LINE.match(line)
        if match is None:
            raise UnreadableOutput("nvidia-smi -L", f"unexpected line {line.strip()!r}", text)
        found.append(Gpu(int(match.group(1)), match.group(2), match.group(3)))
    if not found:
        raise UnreadableOutput("nvidia-smi -L", "no GPU line", text)
    if len({g.index for g in found}) != len(found):
        raise UnreadableOutput("nvidia-smi -L", "a GPU index listed twice", text)
    return tuple(found)


@dataclass(frozen=True)
class NeuronDevice:
    index: int
    cores: int
    memory: str
    connected: tuple[int, ...]


def neuron_devices(text: str) -> tuple[NeuronDevice, ...]:
    """The devices ``neuron-ls`` lists; raises :class:`UnreadableOutput` on anything else."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.strip().startswith("|")]
    if len(rows) < 2 or len(rows[0]) != len(rows[1]):
        raise UnreadableOutput("neuron-ls", "no device table", text)
    names = [" ".join(pair).strip() for pair in zip(rows[0], rows[1], strict=True)]
    columns = {name: i for i, name in enumerate(names)}
    wanted = ("NEURON DEVICE", "NEURON CORES", "NEURON MEMORY", "CONNECTED DEVICES")
    if any(name not in columns for name in wanted):
        raise UnreadableOutput("neuron-ls", f"a table without the columns {', '.join(wanted)} ({names})", text)
    found: list[NeuronDevice] = []
    for row in rows[2:]:
        if len(row) != len(names):
            raise UnreadableOutput("neuron-ls", f"a row of {len(row)} cells under {len(names)} columns", text)
        cell = row[columns["NEURON DEVICE"]]
        if not cell:
            continue  # another process on the device above (--show-all-procs)
        try:
            connected = row[columns["CONNECTED DEVICES"]]
            found.append(NeuronDevice(int(cell), int(row[columns["NEURON CORES"]]), row[columns["NEURON MEMORY"]],
                                      tuple(int(c) for c in connected.split(",") if c.strip())))
        except ValueError:
            raise UnreadableOutput("neuron-ls", f"a device row that is not numbers: {row}", text) from None
    if not found:
        raise UnreadableOutput("neuron-ls", "a table without devices", text)
    return tuple(found)


def efa(text: str) -> EfaInfo:
    """The endpoints ``fi_info -p efa`` lists (none on ``fi_getinfo: -61``); raises :class:`UnreadableOutput` on
    anything else."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and _FI_NODATA.match(lines[0].strip()):
        return EfaInfo(())
    if not lines:
        raise UnreadableOutput("fi_info -p efa", "no output", text)
    blocks: list[dict[str, str]] = []
    for line in lines:
        key, sep, value = line.strip().partition(":")
        if not sep:
            raise UnreadableOutput("fi_info -p efa", f"unexpected line {line.strip()!r}", text)
        if not line[0].isspace():
            if key != "provider":
                raise UnreadableOutput("fi_info -p efa", f"a block starting with {key!r}, not provider", text)
            blocks.append({})
        elif not blocks:
            raise UnreadableOutput("fi_info -p efa", "an attribute before any provider line", text)
        blocks[-1].setdefault(key, value.strip())  # nested attribute lines (fi_info -v) keep the first value
    endpoints = []
    for block in blocks:
        missing = [k for k in ("provider", "domain", "type") if k not in block]
        if missing:
            raise UnreadableOutput("fi_info -p efa", f"an endpoint without {', '.join(missing)}", text)
        endpoints.append(FabricEndpoint(block["provider"], block.get("fabric", ""), block["domain"],
                                        block.get("version", ""), block["type"], block.get("protocol", "")))
    return EfaInfo(tuple(endpoints))
