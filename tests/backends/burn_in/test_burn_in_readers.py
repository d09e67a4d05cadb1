"""The burn-in readers on real tool outputs (tests/data/burn-in/README.md says where each comes from; files named
``*-derived-*`` are built by hand and say so). Expected values are typed from the captures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fmcluster.backends.burn_in import dcgm, devices
from fmcluster.backends.burn_in.outputs import UnreadableOutput

DATA = Path(__file__).resolve().parents[2] / "data" / "burn-in"


def _read(name: str) -> str:
    return (DATA / name).read_text()


# --- dcgmi diag -j ---------------------------------------------------------------------------------------------

def test_dcgm_real_3_1_output_passes_with_every_result_read() -> None:
    report = dcgm.parse(_read("dcgm-3.1.0-nvidia-real-output.json"))
    assert report.version == "3.1.0"
    # 9 Deployment checks for GPUs 0-7 together (the nulls between them skipped) + 8 per-GPU "software" results.
    assert len(report.results) == 17
    first = report.results[0]
    assert (first.category, first.test, first.gpus, first.status) == (
        "Deployment", "Denylist", (0, 1, 2, 3, 4, 5, 6, 7), "pass")
    assert report.results[-1] == dcgm.DiagResult("Custom", "software", (7,), "pass")
    assert report.passed and report.failures == () and report.failing_gpus == ()


def test_dcgm_banner_before_the_json_is_skipped() -> None:
    # NVIDIA's own test puts this line before the same document to check exactly this.
    report = dcgm.parse("WARNING: THIS SHOULD NOT HAPPEN\n" + _read("dcgm-3.1.0-nvidia-real-output.json"))
    assert report.passed and len(report.results) == 17


def test_dcgm_a_failing_gpu_is_named_with_its_message() -> None:  # derived fixture, see the README
    report = dcgm.parse(_read("dcgm-derived-3.x-gpu3-memory-fail.json"))
    assert not report.passed
    assert report.failing_gpus == (3,)
    (failure,) = report.failures
    assert (failure.category, failure.test, failure.status) == ("Hardware", "GPU Memory", "fail")
    assert failure.messages == ("derived fixture, not DCGM's wording: GPU 3 memory fault",)
    assert "GPU Memory on GPU 3: fail (derived fixture" in report.summary()


def test_dcgm_4_derived_fixture_has_the_shape_nvidia_tests_dcgm_against() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    # The schema's "$schema" (json-schema.org/schema#) names no draft; its keywords are all in draft 7.
    validator = jsonschema.Draft7Validator(json.loads(_read("dcgm_diag_schema-nvidia.json")))
    validator.validate(json.loads(_read("dcgm-derived-4.x-gpu1-memory-fail.json")))
    with pytest.raises(jsonschema.ValidationError, match="'DCGM Diagnostic' is a required property"):
        validator.validate(json.loads(_read("dcgm-3.1.0-nvidia-real-output.json")))


def test_dcgm_4_shape_reads_entities_and_metadata_version() -> None:  # derived fixture, see the README
    report = dcgm.parse(_read("dcgm-derived-4.x-gpu1-memory-fail.json"))
    assert report.version == "4.0-derived"
    assert [(r.test, r.gpus, r.status) for r in report.results] == [
        ("software", (0,), "pass"), ("software", (1,), "pass"), ("memory", (0,), "pass"), ("memory", (1,), "fail")]
    assert report.failing_gpus == (1,)


@pytest.mark.parametrize("status, kind", [("Warn", "warn"), ("SKIPPED", "skip"), ("Not Run", "not_run"),
                                          ("Inconclusive", "unknown")])
def test_dcgm_statuses_other_than_pass(status: str, kind: str) -> None:
    text = _read("dcgm-3.1.0-nvidia-real-output.json").replace('"PASS"', f'"{status}"', 1)
    report = dcgm.parse(text)
    assert report.results[0].status == kind
    # A warning or a skip is DCGM's, not a failure; a status no one knows is never read as a pass.
    assert report.passed is (kind != "unknown")


def test_dcgm_runtime_error_is_not_a_pass() -> None:
    report = dcgm.parse('{"DCGM GPU Diagnostic": {"runtime_error": "no GPUs found", "version": "3.3.8"}}')
    assert not report.passed and report.runtime_error == "no GPUs found"
    assert report.summary() == "DCGM 3.3.8 did not run: no GPUs found"


@pytest.mark.parametrize("text, why", [
    ("", "no JSON document"),
    ("Error: Unable to connect to host engine", "no JSON document"),
    ('{"DCGM GPU Diagnostic": {"test_categories": [', "broken JSON"),
    ('{"something": {}}', "no 'DCGM GPU Diagnostic' or 'DCGM Diagnostic' key"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": [{}]}]}]}}',
     "a result of 't' without a status"),
    ('{"DCGM GPU Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": '
     '[{"gpu_ids": "a,b", "status": "Pass"}]}]}]}}', "GPU ids 'a,b' are not numbers"),
])
def test_dcgm_unreadable_output_says_why(text: str, why: str) -> None:
    with pytest.raises(UnreadableOutput, match="cannot read dcgmi diag -j output: " + why.replace("(", r"\(")):
        dcgm.parse(text)


# --- fi_info -p efa ----------------------------------------------------------------------------------------------

def test_fi_info_p4de_shows_its_four_efa_devices() -> None:
    info = devices.efa(_read("fi_info-p4de.24xlarge-4-devices.txt"))
    assert info.devices == ("rdmap144s27", "rdmap160s27", "rdmap16s27", "rdmap32s27")
    assert {(e.fabric, e.version, e.type, e.protocol) for e in info.endpoints} == {
        ("efa", "119.0", "FI_EP_RDM", "FI_PROTO_EFA")}


def test_fi_info_counts_a_device_once_across_its_rdm_and_dgram_endpoints() -> None:
    info = devices.efa(_read("fi_info-libfabric-efa-one-device.txt"))
    assert len(info.endpoints) == 2
    assert info.devices == ("efa_0",)
    assert info.endpoints[0].fabric == "EFA-fe80::df:57ff:fe1a:beb3"  # colons in the value survive


def test_fi_info_no_matching_provider_is_zero_devices() -> None:
    assert devices.efa(_read("fi_info-no-efa.txt")).devices == ()


@pytest.mark.parametrize("text", ["", "bash: fi_info: command not found", "fi_getinfo: -22",
                                  "    domain: rdmap16s27-rdm", "provider: efa\n    fabric: efa\n"])
def test_fi_info_unreadable_output(text: str) -> None:
    with pytest.raises(UnreadableOutput, match="cannot read fi_info -p efa output"):
        devices.efa(text)


# --- nvidia-smi -L ----------------------------------------------------------------------------------------------

def test_nvidia_smi_lists_eight_a100s() -> None:
    gpus = devices.gpus(_read("nvidia-smi-L-8x-a100.txt"))
    assert [g.index for g in gpus] == list(range(8))
    assert gpus[0] == devices.Gpu(0, "NVIDIA A100-SXM4-40GB", "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c")
    assert gpus[7].uuid == "GPU-b1028956-cfa2-0990-bf4a-5da9abb51763"


def test_nvidia_smi_in_a_pod_given_two_gpus() -> None:
    assert len(devices.gpus(_read("nvidia-smi-L-2x-a100-pod.txt"))) == 2


def test_nvidia_smi_mig_slices_are_not_more_gpus() -> None:
    text = _read("nvidia-smi-L-2x-a100-pod.txt").replace(
        ")\nGPU 1", ")\n  MIG 7g.40gb     Device  0: (UUID: MIG-0)\nGPU 1", 1)
    assert len(devices.gpus(text)) == 2


def test_nvidia_smi_no_devices_is_zero_gpus() -> None:
    assert devices.gpus("No devices were found\n") == ()


@pytest.mark.parametrize("text", [
    "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-4cf8db2d)\nGPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-4404041a)",
])
def test_nvidia_smi_unreadable_output(text: str) -> None:
    with pytest.raises(UnreadableOutput, match="cannot read nvidia-smi -L output"):
        devices.gpus(text)


# --- neuron-ls ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["neuron-ls-trn2n.48xlarge.txt", "neuron-ls-trn2n.48xlarge-show-all-procs.txt"])
def test_neuron_ls_lists_sixteen_trainium2_devices(name: str) -> None:
    found = devices.neuron_devices(_read(name))
    assert [d.index for d in found] == list(range(16))  # the process rows under each device are not devices
    assert found[0] == devices.NeuronDevice(0, 8, "96 GB", (12, 3, 4, 1))
    assert found[14].connected == (10, 13, 2, 15)


def test_neuron_ls_before_its_table_and_with_a_missing_device() -> None:
    lines = _read("neuron-ls-trn2n.48xlarge.txt").splitlines()
    text = "instance-type: trn2n.48xlarge\n" + "\n".join(line for line in lines if "| 7  " not in line)
    assert len(devices.neuron_devices(text)) == 15


@pytest.mark.parametrize("text", ["", "neuron-ls: command not found", "| NEURON |\n| DEVICE |\n",
                                  "| NEURON | NEURON |\n| DEVICE | CORES |\n| 0 | 8 |\n"])
def test_neuron_ls_unreadable_output(text: str) -> None:
    with pytest.raises(UnreadableOutput, match="cannot read neuron-ls output"):
        devices.neuron_devices(text)


def test_dcgm_everything_skipped_checked_nothing() -> None:
    report = dcgm.parse(_read("dcgm-3.1.0-nvidia-real-output.json").replace('"PASS"', '"SKIPPED"'))
    assert len(report.skipped) == 17 and report.failures == ()
    assert not report.passed
