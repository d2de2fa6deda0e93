"""Subprocess worker for the corpus tests: XLA parses and converts each file it is given.

A few inputs crash jaxlib outright, so XLA runs here, one batch per process;
the parent reads one JSON line per file: {"path", "ok", "error"}.
"""
from __future__ import annotations

import json
import sys

import xla_helper


def main() -> None:
    for path in sys.stdin.read().split("\n"):
        if not path:
            continue
        try:
            with open(path) as handle:
                xla_helper.to_stablehlo(handle.read())
            result = {"path": path, "ok": True, "error": ""}
        except Exception as err:  # XLA's errors come as several exception types
            result = {"path": path, "ok": False, "error": str(err).splitlines()[0][:300] if str(err) else repr(err)}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
