"""Print a pip constraints file: every package ``pip install -e '.[test,dask,viz]'`` brings in (read from this
checkout's pyproject.toml, then the installed packages' own requirements), at the version this interpreter has.
Run it with each CI Python to move the pins on purpose:
``python .ci/pins.py > .ci/constraints-py311.txt``, ``.ci/venv-py312/bin/python .ci/pins.py > .ci/constraints-py312.txt``.
"""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

EXTRAS = ("test", "dask", "viz")


def closure(requirements: list[Requirement]) -> dict[str, str]:
    """Every installed distribution `requirements` need, directly or not: name → version."""
    found: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = list(requirements)
    while pending:
        requirement = pending.pop()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = distribution(requirement.name)
        except PackageNotFoundError:
            continue  # not for this platform or Python (its marker said so, or pip would have installed it)
        found[key[0]] = dist.version
        for text in dist.requires or []:
            needed = Requirement(text)
            extras = requirement.extras or {""}
            if needed.marker is None or any(needed.marker.evaluate({"extra": extra}) for extra in extras):
                pending.append(needed)
    return found


def main() -> None:
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    texts = project["dependencies"] + [text for extra in EXTRAS for text in project["optional-dependencies"][extra]]
    pins = closure([Requirement(text) for text in texts])
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    print(
        f"# What `pip install -e '.[{','.join(EXTRAS)}]'` installs under Python {version}, pinned: .ci/run installs with"
    )
    print("# `-c` this file, so that a new jax, numpy or pytest in CI is a deliberate change. Written by .ci/pins.py.")
    for name in sorted(pins):
        print(f"{name}=={pins[name]}")


if __name__ == "__main__":
    main()
