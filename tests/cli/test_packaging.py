"""The wheel: built from the checkout, it carries the templates and the catalog, and once installed into a
fresh virtual environment it renders a spec from outside the repository using only what it shipped. Installed
without extras (the light install) it stays under 120 MB, plans and validates, and names the extra a command
needs.

The wheel is built with pip's build isolation (pip fetches hatchling from PyPI). If that cannot work (no
network) and hatchling is importable here, the build falls back to ``--no-build-isolation``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "quickstart-pcs.yaml"


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-cache-dir", "-q", "-w", str(out)]
    result = _run(*command, cwd=out)
    if result.returncode != 0 and importlib.util.find_spec("hatchling") is not None:
        result = _run(*command, "--no-build-isolation", cwd=out)
    assert result.returncode == 0, result.stdout + result.stderr
    wheels = list(out.glob("fmcluster-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_contents(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "fmcluster/templates/parallelcluster/cluster.yaml.j2" in names
    assert "fmcluster/catalog/instances.yaml" in names
    assert "fmcluster/catalog/ec2_instance_types.json.gz" in names  # every type EC2 lists, known offline
    templates = {n for n in names if n.startswith("fmcluster/templates/")}
    expected = {f"fmcluster/templates/{p.relative_to(ROOT / 'templates')}"
                for p in (ROOT / "templates").rglob("*.j2")}
    assert templates == expected
    # the eks backend's pinned scheduler and MPI Operator releases are data inside the package, with their licenses
    from fmcluster.backends.eks.software.releases import CLUSTER_AUTOSCALER, RELEASES

    shipped = [*RELEASES, *CLUSTER_AUTOSCALER.values()]  # and the Cluster Autoscaler's render per Kubernetes minor
    assert {f"fmcluster/backends/eks/software/releases/{release.path}" for release in shipped} <= names
    assert {f"fmcluster/backends/eks/software/releases/{release.folder}/LICENSE" for release in shipped} <= names
    assert "fmcluster/backends/eks/software/releases/kai-scheduler-v0.13.0/NOTICE" in names
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)
    entry_points = next(zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert "fmcluster = fmcluster.cli.app:main" in entry_points
    assert not any(n.startswith(("tests/", "configs/")) for n in names)
    # the emulator is its own distribution (sandbox/), brought by the sandbox extra
    assert not any(n.startswith(("fmcluster/sandbox/", "fmcluster_sandbox/", "sandbox/")) for n in names)


def test_the_sandbox_is_its_own_wheel(tmp_path: Path) -> None:
    """The sandbox extra's distribution: the emulator package, depending on fmcluster and moto."""
    command = [sys.executable, "-m", "pip", "wheel", str(ROOT / "sandbox"), "--no-deps", "--no-cache-dir", "-q",
               "-w", str(tmp_path)]
    result = _run(*command, cwd=tmp_path)
    if result.returncode != 0 and importlib.util.find_spec("hatchling") is not None:
        result = _run(*command, "--no-build-isolation", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = tmp_path.glob("fmcluster_sandbox-*.whl")
    names = set(zipfile.ZipFile(built).namelist())
    assert {"fmcluster_sandbox/server.py", "fmcluster_sandbox/pcs/__init__.py"} <= names
    assert not any(n.startswith("fmcluster/") for n in names)
    metadata = next(zipfile.ZipFile(built).read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert "Requires-Dist: fmcluster" in metadata and "Requires-Dist: moto[server]==5.2.5" in metadata


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the wheel installed; its dependencies resolve from this environment through a
    .pth file (so the test does not download aws-parallelcluster and its ~100 dependencies again)."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    result = _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv.parent)
    assert result.returncode == 0, result.stderr
    python = venv / "bin" / "python"
    result = _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q",
                  wheel, cwd=venv.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    site_packages = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                              cwd=venv.parent).stdout.strip())
    # Plain directory lines only: the .pth files *inside* this environment (among them the editable
    # fmcluster's, which points at the checkout) are not processed for an appended directory.
    (site_packages / "zz_deps_from_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                "AWS_EC2_METADATA_DISABLED": "true", "HOME": str(tmp_path), "NO_COLOR": "1"})
    return env


def test_installed_package_is_the_wheel(installed: Path, tmp_path: Path) -> None:
    python = installed / "bin" / "python"
    code = ("import fmcluster, fmcluster.render.templates as t, fmcluster.catalog as c;"
            "print(fmcluster.__file__); print(t.templates_dir()); print(c.instance('p5.48xlarge').accelerators)")
    result = _run(python, "-c", code, cwd=tmp_path, env=_clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    package, templates, gpus = result.stdout.split()
    assert Path(package).resolve().is_relative_to(installed.resolve())
    assert Path(templates).resolve().is_relative_to(installed.resolve())
    assert not Path(templates).resolve().is_relative_to(ROOT)
    assert gpus == "8"


def test_installed_command_renders_outside_the_repo(installed: Path, tmp_path: Path) -> None:
    command = installed / "bin" / "fmcluster"
    env = _clean_env(tmp_path)
    result = _run(command, "--version", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "fmcluster 0.1.0"

    out = tmp_path / "out"
    result = _run(command, "render", QUICKSTART, "-o", out, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    written = {p.name for p in out.iterdir()}
    assert {"cluster.yaml", "security-group.yaml", "instance-profile.yaml", "launch-template-gpu.yaml",
            "compute-node-group-gpu.yaml", "queue-gpu.yaml", "queue-burst.yaml"} <= written
    assert "clusterName: quickstart-pcs" in (out / "cluster.yaml").read_text()

    result = _run(command, "render", ROOT / "configs" / "p5en-capacity-block-parallelcluster.yaml", cwd=tmp_path,
                  env=env)
    assert result.returncode == 0, result.stderr
    assert "CapacityType: CAPACITY_BLOCK" in result.stdout

    result = _run(command, "validate", QUICKSTART, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr


# --- the light install: the wheel without extras, its dependencies resolved by pip --------------------------

LIGHT_LIMIT_MB = 120


@pytest.fixture(scope="module")
def light(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv where pip installs the wheel as `pip install fmcluster` would: no extras, every dependency
    resolved from the package index (pip's cache keeps repeated runs quick)."""
    venv = tmp_path_factory.mktemp("light") / "env"
    result = _run(sys.executable, "-m", "venv", venv, cwd=venv.parent)
    assert result.returncode == 0, result.stderr
    result = _run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel,
                  cwd=venv.parent)
    assert result.returncode == 0, "pip could not install the wheel's dependencies:\n" + result.stdout + result.stderr
    return venv


def _site_packages_mb(venv: Path) -> float:
    purelib = Path(_run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                        cwd=venv).stdout.strip())
    return sum(f.stat().st_size for f in purelib.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def test_light_install_is_small_and_leaves_the_extras_out(light: Path, tmp_path: Path) -> None:
    size = _site_packages_mb(light)
    assert size < LIGHT_LIMIT_MB, f"site-packages is {size:.0f} MB"
    probe = _run(light / "bin" / "python", "-c", "import importlib.util as u; print([m for m in ('pcluster', 'moto', "
                 "'fmcluster_sandbox') if u.find_spec(m)])", cwd=tmp_path)
    assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr


def test_light_install_plans_renders_and_validates(light: Path, tmp_path: Path) -> None:
    command = light / "bin" / "fmcluster"
    env = _clean_env(tmp_path)
    result = _run(command, "plan", QUICKSTART, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "$/hour" in result.stdout and "quickstart-pcs" in result.stdout
    result = _run(command, "validate", QUICKSTART, "--json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ok"] is True
    # a ParallelCluster spec: its schema check is skipped, and says which extra enables it
    result = _run(command, "validate", ROOT / "configs" / "quickstart-parallelcluster.yaml", "--json", cwd=tmp_path,
                  env=env)
    assert result.returncode == 0, result.stderr
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["pcluster schema"]["status"] == "skipped"
    assert "pip install 'fmcluster[parallelcluster]'" in checks["pcluster schema"]["summary"]
    result = _run(command, "render", ROOT / "configs" / "quickstart-parallelcluster.yaml", cwd=tmp_path, env=env)
    assert result.returncode == 0 and "Scheduler: slurm" in result.stdout, result.stderr


# Runs in the light environment's Python: `fmcluster COMMAND CONFIG` for each example, in one process (a process
# per command would cost seconds each here), each exit code and any traceback as JSON on the last line.
_EVERY_EXAMPLE = """
import contextlib, io, json, sys, traceback
from fmcluster.cli.app import main
results = {}
for config in sys.argv[1:]:
    for command in ("plan", "render", "validate"):
        sys.argv = ["fmcluster", command, config]
        out, err, code = io.StringIO(), io.StringIO(), 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                code, text = -1, traceback.format_exc()
                err.write(text)
        results[f"{command} {config.rsplit('/', 1)[-1]}"] = [code, err.getvalue()[-600:]]
print(json.dumps(results))
"""


def test_light_install_plans_renders_and_validates_every_example(light: Path, tmp_path: Path) -> None:
    """Issue 35: an EKS spec's rules imported the Kubernetes API client (lightkube/httpx2, the kubernetes extra),
    so every EKS example crashed plan, render and validate without it."""
    examples = sorted(str(p) for p in (ROOT / "configs").glob("*.yaml"))
    assert any(p.endswith("-eks.yaml") for p in examples)
    env = {**_clean_env(tmp_path), "FMCLUSTER_HOME": str(tmp_path / "home")}
    result = _run(light / "bin" / "python", "-c", _EVERY_EXAMPLE, *examples, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    results = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(results) == 3 * len(examples)
    # 0, or 1 for an honest validation finding; never a traceback
    bad = {what: r for what, r in results.items() if r[0] not in (0, 1) or "Traceback" in r[1]}
    assert not bad, bad
    # the manifest check names the extra it needs instead of failing the command
    result = _run(light / "bin" / "fmcluster", "validate", ROOT / "configs" / "p5-kueue-eks.yaml", "--json",
                  cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["kubernetes schemas"]["status"] == "skipped", checks
    assert "pip install 'fmcluster[kubernetes]'" in checks["kubernetes schemas"]["summary"]
    assert checks["botocore shapes"]["status"] == "passed", checks


@pytest.mark.parametrize(("args", "extra"), [
    (("sandbox", "start"), "sandbox"),
    (("sandbox",), "sandbox"),
    (("--sandbox", "status"), "sandbox"),
    (("status", "--sandbox"), "sandbox"),
    (("create", ROOT / "configs" / "quickstart-parallelcluster.yaml", "--yes"), "parallelcluster"),
    (("create", ROOT / "configs" / "p5-kueue-eks.yaml", "--yes"), "kubernetes"),
], ids=["sandbox-start", "sandbox-foreground", "global-sandbox", "sandbox-after-command", "parallelcluster-create",
        "eks-create"])
def test_light_install_names_the_missing_extra(light: Path, tmp_path: Path, args: tuple, extra: str) -> None:
    env = {**_clean_env(tmp_path), "FMCLUSTER_HOME": str(tmp_path / "home")}
    result = _run(light / "bin" / "fmcluster", *args, cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and f"pip install 'fmcluster[{extra}]'" in lines[0]


def test_light_install_reads_a_parallelcluster_clusters_own_log(light: Path, tmp_path: Path) -> None:
    env = {**_clean_env(tmp_path), "FMCLUSTER_HOME": str(tmp_path / "home")}
    seed = ("from fmcluster.state.store import StateStore; s = StateStore(); "
            "s.save_cluster('pc1', 'us-east-1', 'parallelcluster', 'name: pc1\\nqueues: [{name: q, "
            "instance_type: p5.48xlarge, nodes: 1}]\\n', None, 'ACTIVE'); "
            "s.log_event('pc1', 'us-east-1', 'pcluster_cluster:pc1', 'done', 'CREATE_COMPLETE')")
    result = _run(light / "bin" / "python", "-c", seed, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    result = _run(light / "bin" / "fmcluster", "logs", "pc1", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "fmcluster  pcluster_cluster:pc1 done CREATE_COMPLETE" in result.stdout
    assert "pip install 'fmcluster[parallelcluster]'" in result.stderr


def test_light_install_smoke_of_an_eks_cluster_names_the_extra(light: Path, tmp_path: Path) -> None:
    """smoke imported the Kubernetes API client before looking at the cluster, so on the light install it crashed
    for every cluster; now an EKS cluster's smoke names the extra, and --print (no API call) works without it."""
    env = {**_clean_env(tmp_path), "FMCLUSTER_HOME": str(tmp_path / "home")}
    spec = (ROOT / "configs" / "p5-kueue-eks.yaml").read_text()
    seed = ("import sys; from fmcluster.state.store import StateStore; "
            "StateStore().save_cluster('p5-kueue', 'us-east-1', 'eks', sys.stdin.read(), None, 'ACTIVE')")
    result = subprocess.run([str(light / "bin" / "python"), "-c", seed], input=spec, capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    result = _run(light / "bin" / "fmcluster", "smoke", "p5-kueue", cwd=tmp_path, env=env)
    lines = result.stderr.strip().splitlines()
    assert (result.returncode, len(lines)) == (2, 1), result.stderr
    assert lines[0].startswith("error: smoke on EKS cluster p5-kueue needs the kubernetes extra")
    assert "pip install 'fmcluster[kubernetes]'" in lines[0]
    result = _run(light / "bin" / "fmcluster", "smoke", "p5-kueue", "--print", cwd=tmp_path, env=env)
    assert result.returncode == 0 and "kind: MPIJob" in result.stdout, result.stderr
