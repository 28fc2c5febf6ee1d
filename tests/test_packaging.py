"""The project's own files install everything: environment.yml matches pyproject.toml; the CLI entry points exist."""

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
    assert "-e .[test]" in pip


def test_setup_keeps_an_existing_torch_and_installs_the_cpu_build_otherwise():
    script = (ROOT / "scripts" / "setup_env.sh").read_text()
    assert "--system-site-packages" in script  # a Neuron DLC's torch and torch-neuronx are kept
    assert 'TORCH_SPEC:-torch==2.13.0' in script


def test_ci_runs_the_readmes_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make test" in (ROOT / "README.md").read_text() and "make demo" in (ROOT / "README.md").read_text()


def test_cli_help_lists_every_command():
    out = run_cli("--help").stdout
    for command in ("run", "plan", "render", "sweep", "demo", "card", "diff", "publish", "contribute", "check", "app", "twins", "cache",
                    "doctor", "rankings"):
        assert re.search(rf"\b{command}\b", out), command
