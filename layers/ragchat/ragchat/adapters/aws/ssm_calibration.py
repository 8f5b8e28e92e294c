"""``CalibrationStore`` in one SSM parameter (a JSON object keyed by embedding model id): what
``ragchat calibrate`` writes after a deploy and the chat functions read at their first question."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class SsmCalibration:
    def __init__(self, client: Any, name: str) -> None:
        self._client = client  # a boto3 ``ssm`` client
        self.name = name

    def load(self) -> dict[str, dict[str, Any]]:
        try:
            value = self._client.get_parameter(Name=self.name)["Parameter"]["Value"]
        except self._client.exceptions.ParameterNotFound:
            return {}
        try:
            data = json.loads(value)
        except ValueError:
            return {}  # the stack's placeholder ("{}" or "none"): not calibrated yet
        return data if isinstance(data, dict) else {}

    def save(self, model_id: str, entry: Mapping[str, Any]) -> None:
        data = self.load()
        data[model_id] = dict(entry)
        self._client.put_parameter(
            Name=self.name, Value=json.dumps(data, sort_keys=True), Type="String", Overwrite=True
        )
