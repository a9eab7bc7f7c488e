"""Shared helpers of the benchmark scripts (scripts/bench/run, scripts/bench/triggers).

Nothing here measures by itself: it builds the release binaries, starts and stops
`weir serve` and the fake OpenAI-compatible provider (api/examples/fake_provider.rs)
on free loopback ports, creates chatflows over the HTTP API, runs wrk (installed from
Debian when missing) and parses its report, writes wrk's Lua request scripts, seeds a
store directly (SQLite with python's sqlite3, PostgreSQL with psql) and reads a
process's memory from /proc. Standard library only.
"""

import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def log(message):
    """Progress goes to stderr so that stdout stays the result."""
    print(message, file=sys.stderr, flush=True)


# --- building -------------------------------------------------------------------------


def target_dir():
    """Cargo's target directory: CARGO_TARGET_DIR when set, else ./target."""
    configured = os.environ.get("CARGO_TARGET_DIR")
    return Path(configured) if configured else ROOT / "target"


def bin_dir():
    """Where the binaries are taken from: the snapshot of this run (WEIR_BENCH_BIN_DIR,
    inherited by the scripts it runs), else the target directory's release/."""
    snapshot = os.environ.get("WEIR_BENCH_BIN_DIR")
    return Path(snapshot) if snapshot else target_dir() / "release"


def release_bin(name, example=False):
    base = bin_dir()
    return base / "examples" / name if example else base / name


def snapshot_binaries(names):
    """Copies the built binaries (paths under release/) to a private directory used for
    the rest of the run, so that a build sharing the target directory cannot swap them
    in the middle of a run. Returns the directory (the caller removes it)."""
    snapshot = Path(tempfile.mkdtemp(prefix="weir-bench-bin-"))
    (snapshot / "examples").mkdir()
    for name in names:
        shutil.copy2(target_dir() / "release" / name, snapshot / name)
    os.environ["WEIR_BENCH_BIN_DIR"] = str(snapshot)
    return snapshot


def source_version():
    """The commit of the tree the binaries are built from, and whether its Rust sources
    have uncommitted changes (with --no-build, whoever built last decides)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--", "*.rs", "Cargo.toml", "Cargo.lock")
    return commit + (" with uncommitted Rust changes" if changed else "")
