"""JIT caches kept between runs (``--jit-cache DIR``), one folder per candidate content and setting.

A worker's JIT caches (Triton, Inductor, CuPy, CUDA, torch extensions) live in its own folder and
go with it. With a store, the parent copies the folder of the worker's key (the candidate's source:
its path and every file of its folder, :func:`source_digest`; its problem, the device and the
compiler versions: :func:`cache_key`) into the worker's folder before the worker starts, and copies
the worker's caches back after the worker and everything it started are gone. So a candidate only
ever loads what an earlier worker of the same candidate, with the same helper files, compiled:
nothing another candidate wrote reaches it (a shared cache would let one plant a kernel binary or an
Inductor module under another kernel's key), not even one whose entry file is byte-identical but
whose siblings (``load_sibling``) differ. The store itself is the parent's; no worker opens it.

The copy back takes regular files only: no links, no hard-linked files, no devices or sockets, no
folder deeper than ``MAX_DEPTH``. It takes nothing when they add up to more than ``MAX_BYTES``, so a
candidate cannot fill the disk. Each saved folder has a manifest (every file's sha256); a restored
copy that does not match it, file for file, is thrown away with the store's folder: the worker
compiles afresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

MAX_BYTES = 1 << 30
MAX_DEPTH = 32  # JIT caches are a few levels deep; a deeper tree is a candidate's, and not kept
MAX_SOURCE_FILES = 5000  # a candidate's folder hashed for its key; a larger one gets no store
MAX_SOURCE_BYTES = 256 << 20
MANIFEST = "manifest.json"
FILES = "files"
_CHUNK = 1 << 20


def cache_key(*parts: str) -> str:
    """A folder name for these parts (candidate source digest, problem, device, versions)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def source_digest(candidate: Path) -> str | None:
    """The sha256 of everything a candidate can load from its own folder: its resolved path and the
    names and contents of every file below its folder (helpers loaded with ``load_sibling`` or
    imported, data files). None when the folder is too large to hash (``MAX_SOURCE_*``): no store."""
    path = candidate.resolve()
    digest = hashlib.sha256(str(path).encode() + b"\0")
    count = size = 0
    for rel, full in _walk(path.parent):
        count += 1
        try:
            data = full.read_bytes() if full.is_file() else b"<not a file>"
        except OSError as err:
            data = f"<unreadable: {err.errno}>".encode()
        size += len(data)
        if count > MAX_SOURCE_FILES or size > MAX_SOURCE_BYTES:
            return None
        digest.update(rel.encode(errors="surrogateescape") + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def _walk(top: Path) -> Iterator[tuple[str, Path]]:
    """(relative path, path) of the files and links below ``top``, sorted, at most ``MAX_DEPTH`` deep;
    linked folders are not entered."""
    for root, dirs, files in os.walk(top):
        depth = len(Path(root).relative_to(top).parts)
        if depth >= MAX_DEPTH:
            dirs[:] = []
        else:
            dirs.sort()
            files += [d for d in dirs if os.path.islink(os.path.join(root, d))]
        for name in sorted(files):
            full = Path(root) / name
            yield os.path.relpath(full, top), full


def restore(store: Path, key: str, dest: Path, account: tuple[int, int] | None = None) -> int:
    """Copy the store's folder for ``key`` to ``dest`` (made if missing, the worker user's); its bytes.
    A copy that does not match the manifest recorded at save is discarded (0 bytes), store and all."""
    from solbench.worker.cleanup import remove_tree

    dest.mkdir(parents=True, exist_ok=True)
    src = store / key
    if src.is_dir() and not src.is_symlink():
        if (src / FILES).is_dir():  # an older layout (no manifest) is a mismatch below
            shutil.copytree(src / FILES, dest, symlinks=True, dirs_exist_ok=True)  # regular files only (save)
        if _digests(dest) != _manifest(src):
            remove_tree(src)
            remove_tree(dest)
            dest.mkdir()
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


def _manifest(folder: Path) -> dict[str, str] | None:
    try:
        found = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _digests(folder: Path) -> dict[str, str]:
    """sha256 of every entry below ``folder`` (a link or other non-file counts as a mismatch)."""
    found = {}
    for rel, full in _walk(folder):
        info = full.lstat()
        found[rel] = _file_sha256(full) if stat.S_ISREG(info.st_mode) else "not a regular file"
    return found


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def save(src: Path, store: Path, key: str) -> int:
    """Copy the regular files below ``src`` to the store's folder for ``key`` with their manifest,
    replacing it; the bytes copied (0: nothing to keep, or over ``MAX_BYTES``). Call only once the
    worker is gone."""
    files = _regular_files(src)
    if not files:
        return 0
    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    fresh = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=store))
    manifest, total = {}, 0
    for rel in files:
        copied = _copy_file(src / rel, fresh / FILES / rel)
        if copied is not None:
            manifest[rel], size = copied
            total += size
    (fresh / MANIFEST).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
    _replace(fresh, store / key)
    return total


def _regular_files(src: Path) -> list[str]:
    """Paths (relative) of the regular, singly linked files below ``src``; [] when over the cap."""
    if not src.is_dir() or src.is_symlink():
        return []
    found, total = [], 0
    for rel, path in _walk(src):
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            found.append(rel)
            total += info.st_size
            if total > MAX_BYTES:
                return []
    return found


def _copy_file(src: Path, dst: Path) -> tuple[str, int] | None:
    """Copy one file without following a link at its place; the sha256 and size of what was
    copied (None if it changed into something else)."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fin:
        if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
            return None
        dst.parent.mkdir(parents=True, exist_ok=True)
        digest, copied = hashlib.sha256(), 0
        with open(dst, "wb") as fout:
            while chunk := fin.read(_CHUNK):
                fout.write(chunk)
                digest.update(chunk)
                copied += len(chunk)
    return digest.hexdigest(), copied


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
