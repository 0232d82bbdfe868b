"""Rewrite a Ray wheel without its Java jars (a third of its size), so it fits what is carried to the GPU machine.

    python scripts/slim_ray_wheel.py .whl/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl

The jars (``ray/jars/``) serve Ray's Java API only; solbench's actors are Python. The wheel is
rewritten in place, its RECORD without the removed files.
"""

from __future__ import annotations

import argparse
import os
import zipfile
from pathlib import Path

DROP = ("ray/jars/",)


def slim(path: Path) -> tuple[int, int]:
    """Rewrite the wheel without DROP; returns (bytes before, bytes after)."""
    before = path.stat().st_size
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename.startswith(DROP):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if not line.startswith(DROP)).encode()
            dst.writestr(info, data)
    os.replace(tmp, path)
    return before, path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheels", nargs="+", type=Path)
    for wheel in ap.parse_args().wheels:
        before, after = slim(wheel)
        print(f"{wheel}: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
