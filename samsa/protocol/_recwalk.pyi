# The compiled record walker (_recwalk.c); record_walk.py documents it.
from typing import Any

Result = tuple[str | None, int, list[int] | None, list[int] | None]

def walk(data: Any, count: int, base_timestamp: int, lo: int, hi: int, need_key: bool, /) -> Result: ...
