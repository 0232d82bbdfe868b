"""The worker's process limits one by one, each in a child Python (they cannot be undone): Landlock
reads, the seccomp filter against mode and owner changes, the OOM preference, the private view and
the privilege drop (root only), and the account setting.

Canary files are world-readable, so only the limit under test stands between them and the child.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from solbench.errors import SolbenchError
from solbench.guards.account import resolve_account
from solbench.guards.sandbox import ETC_SECRETS, landlock_abi, python_paths, worker_readable

ROOT = Path(__file__).resolve().parents[2]
landlock = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the privilege drop)")
NOBODY = 65534


def _child(code: str, **env: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), **env), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def _canary(folder: Path, name: str = "id_rsa") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    secret = folder / name
    secret.write_text("CANARY-SECRET\n")
    secret.chmod(0o644)
    return secret


# --- Landlock reads ----------------------------------------------------------------------------

@landlock
def test_landlock_reads_only_the_given_folders(tmp_path: Path) -> None:
    readable, writable = tmp_path / "candidate", tmp_path / "work"
    allowed = _canary(readable, "helper.py")
    secret = _canary(tmp_path / "home" / ".ssh")
    out = _child(f"""
        import os
        from solbench.guards.sandbox import restrict_files, python_paths
        print(restrict_files([{str(writable)!r}], [*python_paths(), {str(readable)!r}]))
        for path in ({str(allowed)!r}, {str(secret)!r}):
            try:
                print(open(path).read().strip())
            except PermissionError:
                print("denied")
        try:
            os.listdir({str(secret.parent)!r})
            print("listed")
        except PermissionError:
            print("denied")
        open(os.path.join({str(writable)!r}, "f"), "w").write("x")
        print(open(os.path.join({str(writable)!r}, "f")).read())
    """)
    assert out[0].startswith("landlock abi") and "reads" in out[0] and "writes" in out[0]
    assert out[1:] == ["CANARY-SECRET", "denied", "denied", "x"]


@landlock
def test_the_worker_rules_deny_a_fake_home_and_keep_python_working(tmp_path: Path) -> None:
    """The worker's own rule set: the user's home (HOME points at a fake one here) is not readable,
    /etc/passwd is, /etc/shadow is not, and torch still imports its lazy modules."""
    home = tmp_path / "home"
    secret = _canary(home / ".ssh")
    work = tmp_path / "work"
    out = _child(f"""
        import os
        from solbench.guards.sandbox import restrict_worker
        print(restrict_worker({str(work)!r}))
        def read(path):
            try:
                return "read" if open(path).read() else "empty"
            except PermissionError:
                return "denied"
        print(read({str(secret)!r}), read("/etc/passwd"), read("/etc/shadow"))
        import torch._dynamo  # imported after the limits: site-packages stays readable
        print("torch ok")
    """, HOME=str(home), TMPDIR=str(work))
    assert "reads" in out[0]
    assert out[1] == "denied read denied" and out[2] == "torch ok"


def test_readable_paths_keep_secrets_and_the_checkout_out() -> None:
    paths = {str(p) for p in worker_readable()}
    assert "/etc/passwd" in paths and "/usr" in paths
    assert not any(p == f"/etc/{s}" or p.startswith(f"/etc/{s}/") for p in paths for s in ETC_SECRETS)
    assert not any(p in paths for p in ("/", "/root", "/home", "/tmp", "/etc", str(Path.home())))
    # A source checkout is on the Python path for the worker, but only its package is readable.
    assert str(ROOT / "solbench") in {str(p) for p in python_paths()}
    assert str(ROOT) not in paths and str(ROOT / "results") not in paths


# --- seccomp ------------------------------------------------------------------------------------

def test_seccomp_refuses_mode_owner_and_acl_changes_for_every_thread(tmp_path: Path) -> None:
    """chmod and chown fail with EPERM in the child and in a thread started before the filter
    (TSYNC), also on a file the child owns; writing files still works."""
    target = tmp_path / "results.jsonl"
    target.write_text("{}\n")
    target.chmod(0o644)
    out = _child(f"""
        import os, subprocess, threading
        from solbench.guards.seccomp import deny_permission_changes
        go, done = threading.Event(), []
        def early():
            go.wait()
            try:
                os.chmod({str(target)!r}, 0)
                done.append("changed")
            except PermissionError as err:
                done.append(f"EPERM {{err.errno}}")
        t = threading.Thread(target=early)
        t.start()
        print(deny_permission_changes())
        go.set(); t.join()
        print(done[0])
        for call in (lambda: os.chmod({str(target)!r}, 0), lambda: os.chown({str(target)!r}, 1, 1),
                     lambda: os.chmod({str(tmp_path)!r}, 0), lambda: os.setxattr({str(target)!r}, "user.x", b"1")):
            try:
                call()
                print("changed")
            except PermissionError as err:
                print("EPERM", err.errno)
        with open({str(target)!r}, "a") as fh:
            fh.write("more\\n")
        try:
            with open({str(target)!r}) as fh:
                os.fchmod(fh.fileno(), 0)
            print("changed")
        except PermissionError:
            print("EPERM 1")
        print(subprocess.run(["chmod", "000", {str(target)!r}]).returncode != 0)
    """)
    assert out[0].startswith("seccomp:")
    assert out[1:7] == ["EPERM 1"] * 6 and out[7] == "True"
    assert oct(target.stat().st_mode & 0o777) == "0o644" and target.read_text() == "{}\nmore\n"


# --- the OOM killer -----------------------------------------------------------------------------

def test_oom_preference_is_set_and_inherited() -> None:
    out = _child("""
        import subprocess
        from solbench.guards.account import prefer_for_oom
        print(prefer_for_oom())
        print(open("/proc/self/oom_score_adj").read().strip())
        print(subprocess.run(["cat", "/proc/self/oom_score_adj"], capture_output=True, text=True).stdout.strip())
    """)
    assert out == ["True", "1000", "1000"]


# --- the account --------------------------------------------------------------------------------

def test_account_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert resolve_account("nobody") == (NOBODY, NOBODY)
    assert resolve_account("65534:65534") == (NOBODY, NOBODY) and resolve_account("4242") == (4242, 4242)
    assert resolve_account("root") is None and resolve_account("0") is None
    with pytest.raises(SolbenchError, match="worker user 'no-such-user' does not exist"):
        resolve_account("no-such-user")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert resolve_account("nobody") is None  # not root: the workers keep this user


@as_root
def test_private_view_and_drop(tmp_path: Path) -> None:
    """As root: a 700 folder on the way to what the user needs is passable, its other entries are
    hidden, /dev/shm is the given folder, and root cannot be taken back."""
    locked = tmp_path / "locked"
    needed = locked / "venv"
    needed.mkdir(parents=True)
    (needed / "lib.py").write_text("X = 1\n")
    _canary(locked / ".ssh")
    locked.chmod(0o700)
    shm = tmp_path / "shm"
    out = _child(f"""
        import os
        from pathlib import Path
        from solbench.guards.account import drop_privileges, private_view
        from solbench.guards.sandbox import python_paths
        print(private_view([*python_paths(), {str(needed)!r}], {NOBODY}, {NOBODY}, Path({str(shm)!r})))
        drop_privileges({NOBODY}, {NOBODY})
        print(os.getuid(), os.getgid(), os.getgroups())
        print(open({str(needed / "lib.py")!r}).read().strip())
        print(sorted(os.listdir({str(locked)!r})))
        open("/dev/shm/left-behind", "w").write("x")
        try:
            os.setuid(0)
            print("root again")
        except PermissionError:
            print("stays")
        import torch
        print("torch", torch.ones(2).sum().item())
    """)
    assert str(locked) in out[0]
    assert out[1:] == [f"{NOBODY} {NOBODY} []", "X = 1", "['venv']", "stays", "torch 2.0"]
    assert (shm / "left-behind").exists() and not Path("/dev/shm/left-behind").exists()
    assert sorted(os.listdir(locked)) == [".ssh", "venv"]  # outside the view nothing changed


@as_root
def test_oom_floor_set_as_root_holds_after_the_drop() -> None:
    out = _child(f"""
        from solbench.guards.account import drop_privileges, prefer_for_oom
        prefer_for_oom()
        drop_privileges({NOBODY}, {NOBODY})
        print(prefer_for_oom(0), open("/proc/self/oom_score_adj").read().strip())
    """)
    assert out == ["False 1000"]
