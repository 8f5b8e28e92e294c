"""``CalibrationStore`` in a JSON file of the data directory (``ragchat calibrate`` locally)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragchat.adapters.local.files import private_dir


class FileCalibration:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, model_id: str, entry: Mapping[str, Any]) -> None:
        data = self.load()
        data[model_id] = dict(entry)
        private_dir(self.path.parent)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)
