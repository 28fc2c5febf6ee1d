"""The project's own files install everything: environment.yml matches pyproject.toml; the CLI entry points exist."""

import os
import re
import tomllib

import yaml

from conftest import ROOT, run_cli


def _names(requirements):
    return {re.split(r"[<>=!~\[ ]", r.strip(), maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    listed = _names(p for p in pip if not p.startswith("-"))
    assert listed == _names(project["dependencies"])
    assert "-e .[test,models]" in pip


def test_setup_keeps_the_torch_a_python_already_has(tmp_path):
    """As on a Neuron Deep Learning Container: the Python running setup has torch (and torch-neuronx); the
    venv must see that torch, not install another (a reinstall would break the SDK)."""
    import subprocess
    import sys

    venv = tmp_path / "venv"
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "setup_env.sh"), str(venv)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHON": sys.executable,
                                                       "NEURONHELPERS_SETUP_ONLY": "torch", "PIP_NO_INDEX": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "already has torch" in proc.stdout and "installing" not in proc.stdout
    import torch

    seen = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__file__)"],
                          capture_output=True, text=True, timeout=120).stdout.strip()
    assert seen == torch.__file__  # the parent's torch, through --system-site-packages
    assert not list((venv / "lib").glob("python*/site-packages/torch"))  # nothing installed into the venv


def test_ci_runs_the_readmes_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make test" in (ROOT / "README.md").read_text() and "make demo" in (ROOT / "README.md").read_text()


def test_cli_help_lists_every_command():
    out = run_cli("--help").stdout
    for command in ("run", "plan", "render", "sweep", "demo", "card", "diff", "publish", "contribute", "check", "app", "twins", "cache",
                    "doctor", "rankings"):
        assert re.search(rf"\b{command}\b", out), command
