"""The wheel: built from the checkout, it carries the templates and the catalog, and once installed into a
fresh virtual environment it renders a spec from outside the repository using only what it shipped.

The wheel is built with pip's build isolation (pip fetches hatchling from PyPI). If that cannot work (no
network) and hatchling is importable here, the build falls back to ``--no-build-isolation``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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
    templates = {n for n in names if n.startswith("fmcluster/templates/")}
    expected = {f"fmcluster/templates/{p.relative_to(ROOT / 'templates')}"
                for p in (ROOT / "templates").rglob("*.j2")}
    assert templates == expected
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)
    entry_points = next(zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert "fmcluster = fmcluster.cli:main" in entry_points
    assert not any(n.startswith(("tests/", "configs/")) for n in names)


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
