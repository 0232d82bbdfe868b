"""JIT caches kept between runs (``--jit-cache DIR``), one folder per candidate content and setting.

A worker's JIT caches (Triton, Inductor, CuPy, CUDA, torch extensions) live in its own folder and
go with it. With a store, the parent copies the folder of the worker's key (the candidate's source
hash, its problem, the device and the compiler versions: :func:`cache_key`) into the worker's folder
before the worker starts, and copies the worker's caches back after the worker and everything it
started are gone. So a candidate only ever loads what an earlier worker of the same candidate
compiled: nothing another candidate wrote reaches it (a shared cache would let one plant a kernel
binary under another kernel's key). The store itself is the parent's; no worker opens it.

The copy back takes regular files only: no links, no hard-linked files, no devices or sockets. It
takes nothing when they add up to more than ``MAX_BYTES``, so a candidate cannot fill the disk.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

MAX_BYTES = 1 << 30
_CHUNK = 1 << 20


def cache_key(*parts: str) -> str:
    """A folder name for these parts (candidate sha256, problem, device, versions)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def restore(store: Path, key: str, dest: Path, account: tuple[int, int] | None = None) -> int:
    """Copy the store's folder for ``key`` to ``dest`` (made if missing, the worker user's); its bytes."""
    dest.mkdir(parents=True, exist_ok=True)
    src = store / key
    if src.is_dir() and not src.is_symlink():
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)  # save() put regular files only there
    total = 0
    for root, dirs, files in os.walk(dest):
        for name in files:
            total += os.lstat(os.path.join(root, name)).st_size
        if account is not None:
            for name in (*dirs, *files):
                os.lchown(os.path.join(root, name), *account)
    if account is not None:
        os.chown(dest, *account)
    return total


def save(src: Path, store: Path, key: str) -> int:
    """Copy the regular files below ``src`` to the store's folder for ``key``, replacing it; the bytes
    copied (0: nothing to keep, or over ``MAX_BYTES``). Call only once the worker is gone."""
    files = _regular_files(src)
    if not files:
        return 0
    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    fresh = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=store))
    total = sum(_copy_file(src / rel, fresh / rel) for rel in files)
    _replace(fresh, store / key)
    return total


def _regular_files(src: Path) -> list[str]:
    """Paths (relative) of the regular, singly linked files below ``src``; [] when over the cap."""
    if not src.is_dir() or src.is_symlink():
        return []
    found, total = [], 0
    for root, _, files in os.walk(src):  # does not enter linked folders
        for name in files:
            path = os.path.join(root, name)
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
                found.append(os.path.relpath(path, src))
                total += info.st_size
                if total > MAX_BYTES:
                    return []
    return found


def _copy_file(src: Path, dst: Path) -> int:
    """Copy one file without following a link at its place; its bytes (0 if it changed into something else)."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return 0
    dst.parent.mkdir(parents=True, exist_ok=True)
    copied = 0
    with os.fdopen(fd, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(_CHUNK):
            fout.write(chunk)
            copied += len(chunk)
    return copied


def _replace(fresh: Path, target: Path) -> None:
    """Put ``fresh`` at ``target`` (a whole folder at once); a concurrent save of the same key may win."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old.{os.getpid()}")
        try:
            target.rename(old)
        except OSError:
            old = None
    try:
        fresh.rename(target)
    except OSError:  # another executor saved this key in between: keep theirs
        shutil.rmtree(fresh, ignore_errors=True)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
