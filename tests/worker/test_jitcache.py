"""JIT caches kept between runs: a worker's regular cache files go back to its key's folder, and
nothing else does (links, hard links, an oversized cache); the next worker of the key gets a copy."""

from __future__ import annotations

import os
from pathlib import Path

from solbench.worker import jitcache


def _cache(root: Path) -> Path:
    (root / "inductor" / "fx").mkdir(parents=True)
    (root / "inductor" / "fx" / "graph.bin").write_bytes(b"g" * 1000)
    (root / "triton" / "k").mkdir(parents=True)
    (root / "triton" / "k" / "kernel.cubin").write_bytes(b"k" * 24)
    return root


def test_a_saved_cache_comes_back_for_its_key_only(tmp_path):
    store = tmp_path / "store"
    assert jitcache.save(_cache(tmp_path / "w1"), store, "a") == 1024
    dest = tmp_path / "w2" / "jit-cache"
    assert jitcache.restore(store, "a", dest) == 1024
    assert (dest / "inductor" / "fx" / "graph.bin").read_bytes() == b"g" * 1000
    other = tmp_path / "w3" / "jit-cache"
    assert jitcache.restore(store, "b", other) == 0 and other.is_dir() and not any(other.iterdir())


def test_links_and_hard_links_are_not_carried(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("password")
    cache = _cache(tmp_path / "w1")
    (cache / "triton" / "link").symlink_to(secret)
    (cache / "linked_dir").symlink_to(tmp_path)
    os.link(secret, cache / "hard")
    store = tmp_path / "store"
    jitcache.save(cache, store, "a")
    kept = sorted(p.relative_to(store / "a" / "files").as_posix() for p in (store / "a" / "files").rglob("*"))
    assert kept == ["inductor", "inductor/fx", "inductor/fx/graph.bin", "triton", "triton/k", "triton/k/kernel.cubin"]


def test_an_oversized_cache_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(jitcache, "MAX_BYTES", 1000)
    store = tmp_path / "store"
    assert jitcache.save(_cache(tmp_path / "w1"), store, "a") == 0
    assert not (store / "a").exists()


def test_a_later_save_replaces_the_folder_whole(tmp_path):
    store = tmp_path / "store"
    jitcache.save(_cache(tmp_path / "w1"), store, "a")
    newer = tmp_path / "w2"
    (newer / "cupy").mkdir(parents=True)
    (newer / "cupy" / "k.cubin").write_bytes(b"new")
    assert jitcache.save(newer, store, "a") == 3
    assert sorted(p.name for p in (store / "a" / "files").iterdir()) == ["cupy"]
    assert [p.name for p in store.iterdir()] == ["a"]  # no temporary or old folder left


def test_keys_differ_by_every_part():
    base = ("sha1", "llama.rmsnorm", "cuda", "torch 2.11")
    assert jitcache.cache_key(*base) == jitcache.cache_key(*base)
    for i in range(len(base)):
        changed = (*base[:i], base[i] + "x", *base[i + 1:])
        assert jitcache.cache_key(*changed) != jitcache.cache_key(*base)


def test_a_stored_file_changed_after_save_discards_the_cache(tmp_path):
    """An Inductor module edited in the store (code appended) no longer matches the manifest recorded
    at save: nothing is restored, and the store's folder is gone."""
    store = tmp_path / "store"
    cache = _cache(tmp_path / "w1")
    (cache / "inductor" / "fx" / "module.py").write_text("def call(args):\n    return args\n")
    jitcache.save(cache, store, "a")
    stored = store / "a" / "files" / "inductor" / "fx" / "module.py"
    stored.write_text(stored.read_text() + "import os; os.system('id')\n")
    dest = tmp_path / "w2" / "jit-cache"
    assert jitcache.restore(store, "a", dest) == 0
    assert dest.is_dir() and not any(dest.iterdir()) and not (store / "a").exists()
    size = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    for extra in ("planted.so", "files/planted.so"):  # a file added below files/ is a mismatch too
        jitcache.save(cache, store, "a")
        (store / "a" / extra).parent.mkdir(exist_ok=True)
        (store / "a" / extra).write_bytes(b"x")
        assert jitcache.restore(store, "a", tmp_path / extra / "d") == (0 if extra.startswith("files") else size)


def test_a_deep_tree_is_not_kept_and_does_not_crash(tmp_path):
    cache = _cache(tmp_path / "w1")
    deep = cache / "inductor"
    for _ in range(jitcache.MAX_DEPTH + 3):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "buried.py").write_text("x")
    assert jitcache.save(cache, tmp_path / "store", "a") == 1024


def _candidate_folder(root, sibling: str):
    root.mkdir(parents=True)
    (root / "torch_compile.py").write_text("import solbench\nrun = solbench.load_sibling(__file__, 'torch_eager.py').run\n")
    (root / "torch_eager.py").write_text(sibling)
    return root / "torch_compile.py"


def test_the_key_covers_the_candidates_siblings_and_place(tmp_path):
    """Byte-identical entry files whose siblings differ (or that lie elsewhere) never share a key."""
    honest = _candidate_folder(tmp_path / "honest", "def run(x):\n    return x\n")
    attacker = _candidate_folder(tmp_path / "attacker", "def run(x):\n    return x\n# plant\n")
    assert honest.read_bytes() == attacker.read_bytes()
    assert jitcache.source_digest(honest) != jitcache.source_digest(attacker)
    before = jitcache.source_digest(honest)
    assert jitcache.source_digest(honest) == before
    (honest.parent / "torch_eager.py").write_text("def run(x):\n    return x + 0\n")
    assert jitcache.source_digest(honest) != before
    twin = _candidate_folder(tmp_path / "twin", "def run(x):\n    return x + 0\n")
    assert jitcache.source_digest(twin) != jitcache.source_digest(honest)  # same files, another place


def test_a_folder_too_large_to_hash_gets_no_key(tmp_path, monkeypatch):
    monkeypatch.setattr(jitcache, "MAX_SOURCE_FILES", 3)
    entry = _candidate_folder(tmp_path / "c", "x")
    assert jitcache.source_digest(entry) is not None
    for i in range(3):
        (tmp_path / "c" / f"data{i}.bin").write_bytes(b"d")
    assert jitcache.source_digest(entry) is None


def test_a_folder_of_the_older_layout_is_discarded(tmp_path):
    """A store folder without files/ and manifest (what --jit-cache kept before the manifest): not
    restored, removed; the next save writes the new layout."""
    old = _cache(tmp_path / "store" / "a")
    dest = tmp_path / "w" / "jit-cache"
    assert jitcache.restore(tmp_path / "store", "a", dest) == 0 and not old.exists()
