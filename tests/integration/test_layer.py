"""The shared layer's contents (issue 18): ``layers/ragchat/requirements.txt`` is the complete set the
layer's Makefile installs with ``--no-deps``. Checked against the packages' metadata in the test
venv: every requirement of every listed package is listed (nothing missing at import time on
Lambda) in a version it accepts, boto3 comes whole with its own botocore, and nothing unused (gRPC)
is bundled. One Python minor version: the layer's wheels, every function's runtime,
the venv ``make install`` creates (CI runs ``make test`` in it) and the type check."""

from __future__ import annotations

import re
from importlib import metadata

from packaging.requirements import Requirement

from tests.integration.test_template import FUNCTIONS, ROOT, effective

LAYER = ROOT / "layers" / "ragchat"
# never imported by ragchat: opensearch-py's gRPC transport (opensearch-protobufs -> grpcio, protobuf)
LEFT_OUT = {"opensearch-protobufs", "grpcio", "protobuf"}
# what Lambda's python3.12 on Linux evaluates environment markers with
LAMBDA = {"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "aarch64", "os_name": "posix", "extra": "",
          "implementation_name": "cpython", "platform_python_implementation": "CPython"}  # fmt: skip


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned() -> dict[str, str]:
    pins = {}
    for line in (LAYER / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"unpinned: {line}"
            pins[norm(name)] = version
    return pins


def test_the_layer_lists_every_package_its_packages_need() -> None:
    """Read from the venv's metadata of each package (the pinned release when the venv has it, else
    the release the venv resolved: then only the names are compared, not the version ranges)."""
    pins = pinned()
    for name, version in pins.items():
        same_release = metadata.version(name) == version
        for spec in metadata.requires(name) or []:
            req = Requirement(spec)
            if req.marker and not req.marker.evaluate(LAMBDA):
                continue
            needed = norm(req.name)
            if needed in LEFT_OUT:
                continue
            assert needed in pins, f"{name} needs {needed}, which the layer lacks"
            if same_release:
                assert req.specifier.contains(pins[needed], prereleases=True), (name, str(req), pins[needed])


def test_the_layer_pins_exactly_the_versions_the_tests_run() -> None:
    """The venv the suite runs in is the lock: Lambda must get the very releases the tests passed on
    (a layer pin behind it ships code nothing tested)."""
    differ = {name: (version, metadata.version(name)) for name, version in pinned().items()
              if metadata.version(name) != version}  # fmt: skip
    assert not differ, f"layer pin vs the tested venv: {differ}"


def test_boto3_is_bundled_whole_and_nothing_unused_is() -> None:
    pins = pinned()
    assert pins["boto3"] == pins["botocore"]  # one release: botocore never shadows the runtime's alone
    assert {"s3transfer", "jmespath"} <= set(pins)
    assert not LEFT_OUT & set(pins)
    # the app's own imports of opensearch-py never reach its gRPC transport
    sources = "\n".join(p.read_text() for p in (LAYER / "ragchat").rglob("*.py"))
    assert not re.search(r"^\s*(import|from)\s+(grpc|google\.protobuf|opensearch_protobufs)\b", sources, re.M)
    makefile = (LAYER / "Makefile").read_text()
    assert "--no-deps" in makefile and "-r requirements.txt" in makefile


def test_one_python_minor_version_for_the_layer_and_every_function() -> None:
    res = effective()
    makefile = (LAYER / "Makefile").read_text()
    (version,) = set(re.findall(r"--python-version (3\.\d+)", makefile))
    runtime = f"python{version}"
    (layer,) = [v for v in res.values() if v["Type"] == "AWS::Lambda::LayerVersion"]
    assert layer["Properties"]["CompatibleRuntimes"] == [runtime]
    for fn in FUNCTIONS:
        assert res[fn]["Properties"]["Runtime"] == runtime, fn
    # `make install` (the venv CI's `make test` runs in) and the type check use the same minor version
    (venv,) = re.findall(r"^PYTHON_MINOR := (3\.\d+)$", (ROOT / "Makefile").read_text(), re.M)
    (typed,) = re.findall(r'^python_version = "(3\.\d+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert venv == typed == version
