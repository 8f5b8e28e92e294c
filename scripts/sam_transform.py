"""Print the CloudFormation that CloudFormation's AWS::Serverless transform makes of template.yaml.

Runs with the SAM virtualenv's Python (``.venv-sam/bin/python``: aws-sam-translator pins a pydantic
the app can't use), offline, no credentials:

    .venv-sam/bin/python scripts/sam_transform.py template.yaml [Name=Value ...] > transformed.json

``tests/integration/test_template.py`` asserts on the result: what API Gateway, Lambda and IAM would
really get (methods, authorizers, API keys, streaming integrations, roles), not the SAM shorthand.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

LOCAL_PATH_PROPERTIES = ("CodeUri", "ContentUri", "DefinitionUri")


def as_packaged(template: dict[str, Any]) -> dict[str, Any]:
    """Local code/definition paths replaced by S3 locations, as ``sam package`` would."""
    for logical_id, resource in (template.get("Resources") or {}).items():
        props = resource.get("Properties") or {}
        for name in LOCAL_PATH_PROPERTIES:
            if isinstance(props.get(name), str) and not props[name].startswith("s3://"):
                props[name] = f"s3://packaged-artifacts/{logical_id}/{props[name].strip('/')}"
    return template


class NoManagedPolicies:
    """The template names no AWS managed policy by name (only SAM policy templates and inline
    statements), so there is nothing to look up in IAM."""

    def load(self) -> dict[str, str]:
        return {}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")  # the translator asks boto for a region
    template: dict[str, Any] = yaml_parse(Path(argv[0]).read_text())
    params = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws"}
    for pair in argv[1:]:
        name, _, value = pair.partition("=")
        params[name] = value
    out = transform(as_packaged(template), params, NoManagedPolicies())  # type: ignore[arg-type,unused-ignore]
    json.dump(out, sys.stdout, indent=1, sort_keys=True, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
