"""Pieces shared by the command-line tools."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit code `exit_code`."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one line and exit code 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def parse_properties(pairs: list[str] | None, what: str = "--property") -> dict[str, str]:
    """Parse repeated `key=value` arguments."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"{what} expects key=value, got {pair!r}")
        out[key.strip()] = value
    return out
