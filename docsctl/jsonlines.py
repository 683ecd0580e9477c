"""One line of a JSON Lines file a user hands docsctl (judged queries, an export), read as an object."""

from __future__ import annotations

import json
from typing import Any

from docsctl.errors import ConfigError


def json_object(line: str, where: str) -> dict[str, Any]:
    """`line` as a JSON object; ConfigError naming `where` (file:line) when it is not one."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: not a JSON object")
    return data
