"""Names are printed as they are: rich reads ``:train:`` as an emoji code and ``[bold]`` as markup, so a queue named
``train`` once showed as 🚆 and a name holding ``[bold]`` would vanish into style. And Kubernetes objects show as
kubectl names them, ``Kind/name (namespace)``, not as fmcluster's internal keys."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

from rich.console import Console

from fmcluster.cost_report.figures import plan_report
from fmcluster.cost_report.report import render
from fmcluster.engine import Event
from fmcluster.output import ui
from fmcluster.output.progress import ProgressView
from fmcluster.pricing.rates import PriceBook
from fmcluster.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
TRAIN_EMOJI = "\N{STEAM LOCOMOTIVE}"  # what rich's :train: code becomes
CRD_KEY = "kube_object:CustomResourceDefinition__resourceflavors_kueue_x-k8s_io__apiextensions_k8s_io__v1"
LOCAL_QUEUE_KEY = "kube_object:LocalQueue__train__kueue_x-k8s_io__v1beta2__default"


def _plain_console() -> tuple[Console, io.StringIO]:
    """The console fmcluster prints with, writing to a buffer."""
    out = io.StringIO()
    console = ui._console(stderr=True)
    console.file = out
    return console, out


def test_progress_lines_show_names_literally_and_objects_as_kubectl_does():
    console, out = _plain_console()
    with ProgressView("Creating [bold]x", ["eks_nodegroup:train", CRD_KEY, LOCAL_QUEUE_KEY], console=console) as view:
        view.handle(Event("eks_nodegroup:train", "started", "CREATING", "queue :train: and [bold]x"))
        view.handle(Event(CRD_KEY, "done", "ACTIVE"))
        view.handle(Event(LOCAL_QUEUE_KEY, "done", "ACTIVE"))
    text = out.getvalue()
    assert "Creating [bold]x" in text
    assert "queue :train: and [bold]x" in text and TRAIN_EMOJI not in text
    assert "CustomResourceDefinition/resourceflavors.kueue.x-k8s.io" in text
    assert "LocalQueue/train (default)" in text
    assert "kube_object:" not in text


def test_the_live_progress_view_shows_objects_as_kubectl_does():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200, emoji=False)
    view = ProgressView("Creating", [CRD_KEY], console=console)
    console.print(view._render())
    assert "CustomResourceDefinition/resourceflavors.kueue.x-k8s.io" in out.getvalue()


def test_plan_shows_queue_names_literally():
    spec = load_spec(ROOT / "configs" / "quickstart-pcs.yaml").spec
    data = spec.model_dump(mode="json", exclude_none=True)
    data["queues"][0]["name"] = "train"
    spec = type(spec).model_validate(data)
    report = plan_report(spec, PriceBook(spec.region))
    # No backend accepts "[bold]x" as a queue name; the report must still print whatever name it holds.
    odd = dataclasses.replace(report, queues=[dataclasses.replace(report.queues[1], name="[bold]x"),
                                              *report.queues[:1]])
    console, out = _plain_console()
    console.print(render(report))
    console.print(render(odd))
    text = out.getvalue()
    assert "train" in text and TRAIN_EMOJI not in text
    assert "[bold]x" in text
    assert "  train:" in text  # the price note, as "  <queue>:"


def test_status_shows_names_literally_and_objects_as_kubectl_does():
    report = {"name": "c1", "backend": "eks", "region": "us-east-1", "status": "ACTIVE",
              "queues": [{"name": "[bold]x", "instance_type": "p5.48xlarge", "min": 1, "max": 1,
                          "running_instances": 1, "status": "ACTIVE"}],
              "resources": [{"type": "kube_object", "id": CRD_KEY.removeprefix("kube_object:"), "status": "present"},
                            {"type": "eks_nodegroup", "id": "train", "status": "ACTIVE"}],
              "drift": [{"resource": f"{LOCAL_QUEUE_KEY}.spec.clusterQueue", "expected": ":train:",
                         "actual": "missing"}]}
    console, out = _plain_console()
    console.print(ui.status_view(report))
    text = out.getvalue()
    assert "[bold]x" in text and TRAIN_EMOJI not in text and ":train:" in text
    assert "CustomResourceDefinition/resourceflavors.kueue.x-k8s.io" in text
    assert "LocalQueue/train (default) spec.clusterQueue: expected :train:" in text


def test_resource_labels():
    assert ui.resource_label(CRD_KEY) == "CustomResourceDefinition/resourceflavors.kueue.x-k8s.io"
    assert ui.resource_label(LOCAL_QUEUE_KEY) == "LocalQueue/train (default)"
    assert ui.resource_label("ConfigMap__settings__core__v1__team") == "ConfigMap/settings (team)"
    for other in ("eks_nodegroup:train", "vpc:vpc", "security_group:cluster", "kube_object:not-a-key"):
        assert ui.resource_label(other) == other
