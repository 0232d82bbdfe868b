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
    kept = sorted(p.relative_to(store / "a").as_posix() for p in (store / "a").rglob("*"))
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
    assert sorted(p.name for p in (store / "a").iterdir()) == ["cupy"]
    assert [p.name for p in store.iterdir()] == ["a"]  # no temporary or old folder left


def test_keys_differ_by_every_part():
    base = ("sha1", "llama.rmsnorm", "cuda", "torch 2.11")
    assert jitcache.cache_key(*base) == jitcache.cache_key(*base)
    for i in range(len(base)):
        changed = (*base[:i], base[i] + "x", *base[i + 1:])
        assert jitcache.cache_key(*changed) != jitcache.cache_key(*base)
