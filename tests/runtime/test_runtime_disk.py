"""The disk a run can fill: PY_TOOL_RUN_DISK bounds its work, home and tmp together (a
tmpfs of its own), each run starts with all of it again, the artifact directory is not
writable by runs (files reach it only through collection, which the quota counts), and
none of these mounts shows on the host or outlives the run.
"""

import errno
import os
import time
from pathlib import Path

import pytest

ROOT = os.geteuid() == 0

pytestmark = pytest.mark.skipif(not ROOT, reason="the runtime mounts a run's tmpfs only as root")

FILL = """
import os, tempfile
written = 0
failure = None
targets = [os.getcwd(), tempfile.gettempdir(), os.path.expanduser("~")]
try:
    for i in range(64):
        target = targets[i % 3]
        with open(os.path.join(target, f"part{i}.bin"), "wb") as f:
            f.write(b"x" * (1 << 20))
        written += 1
except OSError as err:
    failure = err.errno
result = {"written": written, "errno": failure}
"""


def disk_layer(runtime) -> dict:
    return runtime.get("/tools/health").json()["isolation"]["layers"]["disk"]


def mounts_of(pid: int) -> str:
    return Path(f"/proc/{pid}/mountinfo").read_text()


def test_a_run_fills_its_own_space_and_the_next_run_has_all_of_it_again(start_runtime):
    runtime = start_runtime({"PY_TOOL_RUN_DISK": "8M"})
    layer = disk_layer(runtime)
    assert layer["state"] == "enforced", layer
    assert "8 MiB" in layer["detail"]
    for _ in range(2):
        body = runtime.execute(FILL, workspaceId="disk-fill")
        assert body["success"], body
        assert body["result"]["errno"] == errno.ENOSPC, body["result"]
        # work, /tmp and home share the 8 MiB: at most 7 whole MiB fit beside the dirs.
        assert 4 <= body["result"]["written"] <= 8, body["result"]
        assert any("PY_TOOL_RUN_DISK" in w for w in body["warnings"]), body["warnings"]
    small = runtime.execute("open('small.txt', 'w').write('fits')\nresult = 1", workspaceId="disk-fill")
    assert small["success"] and not any("PY_TOOL_RUN_DISK" in w for w in small["warnings"]), small


def test_runs_read_but_never_write_the_artifact_directory(runtime, workspace):
    saved = runtime.execute("open('kept.txt', 'w').write('from an earlier run')\nresult = 1", workspaceId=workspace)
    (artifact,) = saved["artifacts"]
    directory = runtime.artifacts / workspace
    code = f"""
import os
directory = {str(directory)!r}
seen = open(os.path.join(directory, {artifact["filename"]!r})).read()
try:
    open(os.path.join(directory, "planted.bin"), "wb").write(b"x" * 4096)
    wrote = None
except OSError as err:
    wrote = err.errno
result = [seen, wrote]
"""
    body = runtime.execute(code, workspaceId=workspace)
    assert body["success"], body
    if disk_layer(runtime)["state"] != "enforced":
        pytest.skip(disk_layer(runtime)["detail"])
    assert body["result"][0] == "from an earlier run"
    assert body["result"][1] in (errno.EROFS, errno.EACCES, errno.EPERM), body["result"]
    assert not (directory / "planted.bin").exists()


def test_no_run_mount_shows_on_the_host_or_stays_in_a_zygote(start_runtime):
    runtime = start_runtime({"PY_TOOL_RUN_DISK": "16M"})
    assert disk_layer(runtime)["state"] == "enforced"
    runs = runtime.artifacts / ".runs"
    for i in range(6):
        body = runtime.execute(f"open('f{i}.txt', 'w').write('x')\nresult = {i}", workspaceId="disk-mounts")
        assert body["success"] and body["result"] == i, body
    assert str(runs) not in mounts_of(os.getpid()), "the runtime's mounts show on the host"

    # The server's namespace holds the runs directory, the workspace's cache and its
    # zygote's home, but no run's tmpfs once the run is over (it is unmounted right after
    # the answer).
    def run_mounts():
        points = [line.split()[4] for line in mounts_of(runtime.process.pid).splitlines()]
        return [p for p in points if "/.runs/disk-mounts/" in p and "/zygote-" not in p]

    deadline = time.monotonic() + 5
    while run_mounts() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run_mounts() == []
    zygotes = [
        int(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit() and _is_zygote_of(int(pid), "disk-mounts")
    ]
    assert zygotes, "the workspace's zygote is gone"
    for pid in zygotes:
        points = [line.split()[4] for line in mounts_of(pid).splitlines()]
        left = [p for p in points if "/.runs/disk-mounts/" in p and "/zygote-" not in p]
        assert left == [], f"a run's tmpfs stayed in zygote {pid}: {left}"


def _is_zygote_of(pid: int, workspace: str) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return b"__zygote" in command and f"/venvs/{workspace}/".encode() in environ
