"""The project's own files install everything: environment.yml matches pyproject.toml, doctor checks what pyproject
requires; the CLI lists every command with its own help."""

import os
import re

import pytest
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


@pytest.mark.slow
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


def test_setup_says_in_one_line_when_the_disk_cannot_hold_torch(tmp_path):
    """A CI run once died 32 s into pip with "No space left on device": setup checks the free space first and names
    what it needs, what is free and the smaller choice, before pip writes anything."""
    import subprocess
    import sys

    base = getattr(sys, "_base_executable", sys.executable)
    if subprocess.run([base, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("the base interpreter has torch: setup keeps it and installs none")
    venv = tmp_path / "venv"
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "setup_env.sh"), str(venv)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHON": base, "PIP_NO_INDEX": "1",
                                                       "NEURONHELPERS_SETUP_NEEDS_GB": "1000000"})
    assert proc.returncode == 1
    assert "needs about 1000000 GB free under" in proc.stderr and 'TORCH_SPEC="torch==2.13.0"' in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "installing" not in proc.stdout
    assert not list((venv / "lib").glob("python*/site-packages/torch"))


def test_ci_runs_the_readmes_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make test" in (ROOT / "README.md").read_text() and "make demo" in (ROOT / "README.md").read_text()


COMMANDS = ("run", "plan", "sweep", "demo", "causes", "diff", "publish", "contribute", "check", "app", "cache",
            "rankings", "snapshot", "doctor", "card", "render", "twins", "checkpoints", "repro", "rerun")


def _listed_commands(help_text: str) -> dict[str, str]:
    """{command: its summary} from the COMMAND list of `neuronhelpers --help` (a summary may wrap, or start on the
    line after a long name)."""
    section = help_text.split("\n  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    listed, name = {}, None
    for line in section.splitlines():
        entry = re.match(r"    (\S+)(?:\s{2,}(.*))?$", line)
        if entry:
            name = entry.group(1)
            listed[name] = entry.group(2) or ""
        else:
            listed[name] = f"{listed[name]} {line.strip()}".strip()
    return listed


def _words(text: str) -> str:
    return " ".join(text.split())


def test_cli_help_lists_every_command_with_the_summary_its_own_help_opens_with(capsys):
    from neuronhelpers.cli import main as cli_main

    listed = _listed_commands(run_cli("--help").stdout)
    assert sorted(listed) == sorted(COMMANDS)
    for command in COMMANDS:
        with pytest.raises(SystemExit) as done:
            cli_main.main([command, "--help"])
        own = capsys.readouterr().out
        assert done.value.code == 0 and own.startswith(f"usage: neuronhelpers {command} ["), own[:200]
        description = own.split("\n\n", 2)[1]  # after the usage: the command's own description
        assert listed[command] and _words(description) == _words(listed[command]), command


def test_doctor_checks_exactly_what_pyproject_requires():
    """The installed metadata doctor reads is pyproject's [project].dependencies (a stale install fails here: run
    `pip install -e .`), each requirement is one check, and a missing or too old package is a FAIL."""
    from importlib import metadata

    from neuronhelpers.cli import doctor

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    checks = doctor.requirement_checks()
    assert _names(what for _, what, _ in checks) == _names(project["dependencies"])
    assert len(checks) == len(project["dependencies"])
    statuses = {what: status for status, what, _ in checks}
    assert set(statuses.values()) == {"OK"}, statuses  # this environment has everything pyproject requires

    real_version = metadata.version

    def version(name):
        if name == "diffusers":
            raise metadata.PackageNotFoundError(name)
        return "0.1" if name == "pillow" else real_version(name)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(doctor.metadata, "version", version)
        checks = {what: (status, detail) for status, what, detail in doctor.requirement_checks()}
    assert checks["diffusers"] == ("FAIL", "not installed: run `make install`")
    assert checks["pillow"][0] == "FAIL" and "0.1 installed, >=10 needed" in checks["pillow"][1]
    assert checks["torch"][0] == "OK"
