"""What ``fmcluster burn-in`` on EKS refuses before anything is submitted (exit 2 through UsageError), offline: an
unknown level or queue, and a type with no published 2-node all-reduce floor at a level that runs NCCL
(p6e-gb200.36xlarge: nccl_floors.yaml has p5.48xlarge, p4de.24xlarge and p4d.24xlarge only), where --level quick is
suggested and accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.eks_specs import GB200_SPEC

from fmcluster.backends.eks.burn_in import checked
from fmcluster.backends.protocol import BurnInRequest
from fmcluster.errors import UsageError
from fmcluster.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]


def _spec(tmp_path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return load_spec(path).spec


def test_a_p5_queue_is_accepted_at_every_level():
    spec = load_spec(ROOT / "configs" / "p5-kueue-eks.yaml").spec
    for level in ("quick", "standard", "long"):
        choice = checked(spec, BurnInRequest(None, level))
        expect = choice.expect
        assert (expect.queue.name, choice.level, expect.accelerators, expect.efa_devices) == ("train", level, 8, 32)


@pytest.mark.parametrize(("request_", "message"), [
    (BurnInRequest(None, "xlong"), "unknown burn-in level 'xlong'; the levels: quick, standard, long"),
    (BurnInRequest("nope", "quick"), "has no queue 'nope'; its queues: train"),
])
def test_bad_input_is_refused(request_, message):
    spec = load_spec(ROOT / "configs" / "p5-kueue-eks.yaml").spec
    with pytest.raises(UsageError, match=message) as info:
        checked(spec, request_)
    assert info.value.exit_code == 2


def test_a_type_without_a_floor_is_refused_with_quick_suggested(tmp_path):
    spec = _spec(tmp_path, GB200_SPEC)
    with pytest.raises(UsageError) as info:
        checked(spec, BurnInRequest(None, "standard"))
    assert "no known 2-node all-reduce floor for p6e-gb200.36xlarge" in str(info.value)
    assert "`--level quick`" in str(info.value)
    assert checked(spec, BurnInRequest(None, "quick")).level == "quick"


@pytest.mark.parametrize("backend", ["pcs", "parallelcluster"])
def test_slurm_backends_refuse_an_image_before_anything_runs(backend):
    from fmcluster.backends import registry
    from fmcluster.backends.context import BackendContext
    from fmcluster.verbs.connect.smoke_command import SINK

    context = BackendContext("llama", "us-east-1", None)  # type: ignore[arg-type]  # refused before any call
    with pytest.raises(UsageError, match="--image is for Kubernetes clusters; llama runs its burn-in as Slurm jobs"
                       ) as info:
        registry.get(backend).burn_in(context, BurnInRequest(None, "quick", image="x"), SINK)
    assert info.value.exit_code == 2


def test_eks_refuses_the_slurm_options():
    spec = load_spec(ROOT / "configs" / "p5-kueue-eks.yaml").spec
    with pytest.raises(UsageError, match="--host is for Slurm clusters") as info:
        checked(spec, BurnInRequest(None, "quick", host="10.0.0.1"))
    assert info.value.exit_code == 2
