"""The export virtualenv runs on a Python that has a CPU build of the pinned torch on this machine
(``make install`` on a fresh machine must not pull PyPI's default torch build of several GB)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
from ragchat.adapters.local import model_prep


def _fake_python(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_minor_version_of_the_local_cpu_wheel_is_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels, bin_dir = tmp_path / "wheels", tmp_path / "bin"
    wheels.mkdir()
    bin_dir.mkdir()
    version = model_prep.TORCH_REQUIREMENT.split("==")[1]
    (wheels / f"torch-{version}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    python311 = _fake_python(bin_dir, "python3.11")
    monkeypatch.delenv("RAGCHAT_EXPORT_PYTHON", raising=False)
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))

    assert model_prep.export_python() == str(python311)


def test_pyenv_is_searched_and_an_explicit_choice_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    version = model_prep.TORCH_REQUIREMENT.split("==")[1]
    (wheels / f"torch-{version}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    pyenv_bin = tmp_path / "pyenv" / "versions" / "3.11.7" / "bin"
    pyenv_bin.mkdir(parents=True)
    python311 = _fake_python(pyenv_bin, "python3.11")
    monkeypatch.delenv("RAGCHAT_EXPORT_PYTHON", raising=False)
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    assert model_prep.export_python() == str(python311)

    monkeypatch.setenv("RAGCHAT_EXPORT_PYTHON", "/opt/python/bin/python3")
    assert model_prep.export_python() == "/opt/python/bin/python3"


def test_without_a_local_wheel_the_running_interpreter_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGCHAT_EXPORT_PYTHON", raising=False)
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    assert model_prep.export_python() == sys.executable
