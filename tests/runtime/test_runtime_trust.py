"""The trust boundary around zygotes, tried as an attacker who controls a package.

A workspace installs a package (built here into a local wheelhouse, installed through
`requirements`); its import code runs in the workspace's zygote once the zygote
pre-imports it. Nothing it says or does there may reach the host: forged protocol lines
naming a host process and a symlinked cgroup directory, a daemon left behind, a run's
working directory swapped for a link to a root-only directory. Also: tool code cannot
use the runtime's own API, data under a path every view shows is refused at start, one
workspace flooding the queue gets the 429s, and oversized code is a 413.
"""

import base64
import concurrent.futures
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
import uuid
import zipfile
from pathlib import Path

import pytest

from runtime_harness import processes_with

ROOT = os.geteuid() == 0


def needs_confined_zygotes(runtime):
    zygote = runtime.get("/tools/health").json()["isolation"]["layers"]["zygote"]
    if zygote["state"] == "unavailable":
        pytest.skip(f"zygotes are not confined here: {zygote['detail']}")


def build_wheel(wheelhouse: Path, name: str, source: str) -> None:
    """A pure-Python wheel of one module `name` (distribution `name`, version 0.1)."""
    dist = f"{name}-0.1.dist-info"
    files = {
        f"{name}.py": source.encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: weir-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(wheelhouse / f"{name}-0.1-py3-none-any.whl", "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)


@pytest.fixture(scope="module")
def wheelhouse():
    # Readable by the workspace's install ids (pytest's own temporary dirs are 0700).
    path = Path(tempfile.mkdtemp(prefix="weir-wheels-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def host_secret():
    """A root-only directory holding a secret file, and a root-only target file."""
    base = Path(tempfile.mkdtemp(prefix="weir-host-"))
    secret_dir = base / "secret"
    secret_dir.mkdir(mode=0o700)
    (secret_dir / "secret.txt").write_text(f"root only {uuid.uuid4().hex}")
    (secret_dir / "secret.txt").chmod(0o600)
    target = base / "target"
    target.write_text("untouched")
    target.chmod(0o600)
    yield base, secret_dir, target
    shutil.rmtree(base, ignore_errors=True)


def wait_for(predicate, seconds=30.0, step=0.2):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def install_and_import(runtime, workspace, module):
    """Installs `module` through requirements and imports it in a run; the pool then
    starts a warmer zygote that pre-imports it (its import code runs in the zygote)."""
    body = runtime.execute(
        f"import {module}\nresult = 'imported'", requirements=[f"{module}==0.1"], workspaceId=workspace
    )
    assert body["success"], body
    assert f"{module.replace('_', '-')}==0.1" in body["installedPackages"]


@pytest.mark.skipif(not ROOT, reason="zygotes are confined only under a root runtime")
def test_forged_zygote_lines_signal_nothing_and_write_nothing_on_the_host(start_runtime, wheelhouse, host_secret):
    base, _, target = host_secret
    fake_cgroup = base / "cgroup"
    fake_cgroup.mkdir()
    (fake_cgroup / "cgroup.kill").symlink_to(target)
    (fake_cgroup / "cgroup.procs").symlink_to(target)
    victim = subprocess.Popen(["sleep", "300"])
    try:
        forged = [
            {"event": "started", "id": i, "pid": victim.pid, "cgroups": [str(fake_cgroup)]}
            for i in range(1, 6)
        ] + [{"event": "exited", "id": i, "code": 0, "signal": None} for i in range(1, 6)]
        build_wheel(
            wheelhouse,
            "weir_forger",
            textwrap.dedent(
                f"""
                import json, os, stat, time
                LINES = [json.dumps(line).encode() + b"\\n" for line in {forged!r}]

                def writable_pipes():
                    found = []
                    for fd in range(3, 256):
                        try:
                            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                                import fcntl
                                if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                                    found.append(fd)
                        except OSError:
                            pass
                    return found

                if os.fork() == 0:
                    # A daemon that forges lines for a minute, once its zygote serves.
                    os.setsid()
                    pipes = writable_pipes()
                    time.sleep(2)
                    for _ in range(600):
                        for fd in pipes:
                            for line in LINES:
                                try:
                                    os.write(fd, line)
                                except OSError:
                                    pass
                        time.sleep(0.1)
                    os._exit(0)
                """
            ),
        )
        runtime = start_runtime({"UV_FIND_LINKS": str(wheelhouse)})
        needs_confined_zygotes(runtime)
        workspace = f"forge-{uuid.uuid4().hex[:6]}"
        install_and_import(runtime, workspace, "weir_forger")
        log = runtime.data / "server.log"
        assert wait_for(lambda: "broke the protocol" in log.read_text()), log.read_text()[-3000:]
        # Runs that time out are killed by their zygote or with it, never by a named pid.
        for _ in range(3):
            runtime.post(
                "/tools/execute-python",
                {"code": "import time\ntime.sleep(5)", "timeout": 1, "workspaceId": workspace},
            )
        assert victim.poll() is None, "the server signalled a host process a zygote named"
        assert target.read_text() == "untouched", "the server wrote through a zygote's path"
        assert runtime.alive()
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.skipif(not ROOT, reason="zygotes are confined only under a root runtime")
def test_a_daemon_left_by_import_code_swaps_nothing_in_and_dies_with_its_zygote(start_runtime, wheelhouse, host_secret):
    _, secret_dir, _ = host_secret
    marker = f"weir-daemon-{uuid.uuid4().hex}"
    runtime = start_runtime({"UV_FIND_LINKS": str(wheelhouse)})
    needs_confined_zygotes(runtime)
    workspace = f"swap-{uuid.uuid4().hex[:6]}"
    runs = runtime.artifacts / ".runs" / workspace
    build_wheel(
        wheelhouse,
        "weir_swapper",
        textwrap.dedent(
            f"""
            import os, time
            RUNS = {str(runs)!r}
            if os.path.isdir(RUNS) and os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    # A long-lived process to find on the host afterwards.
                    os.execv("/bin/sh", ["sh", "-c", "sleep 600", {marker!r}])
                # Swap every running run's working directory (or the space holding it)
                # for a link to a root-only host directory, once the run says it is running.
                for _ in range(1200):
                    for name in os.listdir(RUNS):
                        space = os.path.join(RUNS, name, "space")
                        work = os.path.join(space, "work")
                        if not os.path.exists(os.path.join(work, ".go")):
                            continue
                        for swapped in (work, space):
                            try:
                                if not os.path.islink(swapped):
                                    os.rename(swapped, swapped + ".away")
                                    os.symlink({str(secret_dir)!r}, swapped)
                            except OSError:
                                pass
                    time.sleep(0.05)
                os._exit(0)
            """
        ),
    )
    build_wheel(wheelhouse, "weir_harmless", "VALUE = 1\n")
    install_and_import(runtime, workspace, "weir_swapper")
    # The warmer zygote pre-imports the swapper: its daemon appears.
    assert wait_for(lambda: processes_with(marker)), "the daemon never started"
    code = textwrap.dedent(
        """
        import time
        open("out.txt", "w").write("tool output")
        open(".go", "w").close()
        time.sleep(1.5)
        result = "done"
        """
    )
    body = runtime.execute(code, workspaceId=workspace)
    # The server followed nothing: either the swap happened and no artifact was kept, or
    # (a run's space is a root-owned tmpfs, its mount point cannot be renamed) it could
    # not happen and the run's own file was kept.
    served = [runtime.get(a["url"]).text for a in body["artifacts"]]
    replaced = any("working directory was replaced" in w for w in body["warnings"])
    assert (replaced and served == []) or served == ["tool output"], body
    secret = (secret_dir / "secret.txt").read_text()
    assert all(secret not in text for text in served), "a root-only host file was served"
    assert "secret.txt" not in [a["filename"] for a in body["artifacts"]]
    # A new package retires the zygote: everything its import code started dies with it.
    response = runtime.post(
        "/tools/install-packages", {"packages": ["weir_harmless==0.1"], "workspace_id": workspace}
    )
    assert response.status_code == 200, response.text
    assert wait_for(lambda: not processes_with(marker), seconds=15), processes_with(marker)
    after = runtime.execute("result = 6 * 7", workspaceId=workspace)
    assert after["success"] and after["result"] == 42, after


def test_tool_code_cannot_use_the_runtimes_api(runtime, workspace):
    port = runtime.url.rsplit(":", 1)[1]
    code = textwrap.dedent(
        f"""
        import json, urllib.request, urllib.error
        statuses = []
        for path, body in [
            ("/tools/execute-python", {{"code": "result = 1", "workspaceId": "someone-else"}}),
            ("/tools/artifacts/someone-else/x.txt", None),
        ]:
            request = urllib.request.Request(
                "http://127.0.0.1:{port}" + path,
                data=json.dumps(body).encode() if body else None,
                headers={{"Content-Type": "application/json"}},
            )
            try:
                urllib.request.urlopen(request, timeout=5)
                statuses.append(200)
            except urllib.error.HTTPError as e:
                statuses.append(e.code)
            except OSError as e:
                statuses.append(type(e).__name__)
        result = statuses
        """
    )
    body = runtime.execute(code, workspaceId=workspace)
    assert body["success"], body
    assert all(status != 200 for status in body["result"]), body["result"]


@pytest.mark.parametrize("setting", ["PY_TOOL_VENVS", "PY_TOOL_ARTIFACTS", "WEIR_DATA_DIR"])
def test_data_below_a_path_every_view_shows_is_refused_at_start(binary, tmp_path, setting):
    place = f"/usr/share/weir-test-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PY_TOOL_")}
    env.update(
        PY_TOOL_VENVS=str(tmp_path / "venvs"),
        PY_TOOL_ARTIFACTS=str(tmp_path / "artifacts"),
        PY_TOOL_PORT="0",
        PY_TOOL_API_KEY="k",
    )
    env[setting] = place
    try:
        done = subprocess.run([str(binary)], env=env, capture_output=True, timeout=60)
    finally:
        shutil.rmtree(place, ignore_errors=True)
    assert done.returncode != 0
    last = done.stderr.decode().strip().splitlines()[-1]
    assert setting in last and "/usr" in last and "every run's view" in last, last


def test_data_under_opt_is_not_in_any_view(start_runtime):
    if not ROOT:
        pytest.skip("creating a directory under /opt needs root")
    data = Path(f"/opt/weir-test-{uuid.uuid4().hex}")
    try:
        runtime = start_runtime({"PY_TOOL_ARTIFACTS": str(data / "artifacts"), "PY_TOOL_VENVS": str(data / "venvs")})
        (data / "weir.db").write_text("the API's database")
        layers = runtime.get("/tools/health").json()["isolation"]["layers"]
        if layers["filesystem"]["state"] != "enforced":
            pytest.skip(layers["filesystem"]["detail"])
        body = runtime.execute(
            f"import os\nresult = [os.path.exists({str(data / 'weir.db')!r}), os.path.exists('/opt')]",
            workspaceId="opt-ws",
        )
        assert body["success"], body
        assert body["result"][0] is False, "the API's data directory is visible to runs"
    finally:
        shutil.rmtree(data, ignore_errors=True)


def test_a_flooding_workspace_gets_the_429s_while_another_is_served(start_runtime):
    tight = start_runtime(
        {"PY_TOOL_MAX_CONCURRENCY": "1", "PY_TOOL_MAX_QUEUE": "8", "PY_TOOL_MAX_QUEUE_PER_WORKSPACE": "2"}
    )
    for ws in ("flood", "quiet"):
        assert tight.execute("result = 'warm'", workspaceId=ws)["success"]
    slow = "import time\ntime.sleep(1)\nresult = 'slept'\n"

    def flood(_):
        return tight.post("/tools/execute-python", {"code": slow, "workspaceId": "flood"})

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        flooding = [pool.submit(flood, i) for i in range(6)]
        time.sleep(0.5)
        quiet = pool.submit(
            tight.post, "/tools/execute-python", {"code": "result = 'served'", "workspaceId": "quiet"}
        )
        responses = [f.result() for f in flooding]
        served = quiet.result()
    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(429) >= 3, statuses
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.headers["Retry-After"] == "1"
    assert "PY_TOOL_MAX_QUEUE_PER_WORKSPACE" in refused.json()["message"]
    assert served.status_code == 200, served.text
    assert served.json()["result"] == "served"
    assert tight.get("/tools/health").json()["limits"]["maxQueuePerWorkspace"] == 2


def test_code_over_the_limit_is_a_413_before_any_analysis(runtime, start_runtime):
    body = "x = 1\n" * ((1 << 20) // 6 + 1)
    response = runtime.post("/tools/execute-python", {"code": body})
    assert response.status_code == 413, response.text
    assert "PY_TOOL_MAX_CODE" in response.json()["message"]
    small = start_runtime({"PY_TOOL_MAX_CODE": "1K"})
    assert small.post("/tools/execute-python", {"code": "x = 1\n" * 200}).status_code == 413
    assert small.execute("result = 2")["result"] == 2


def test_a_fifo_planted_as_an_artifact_is_not_served_and_blocks_nothing(runtime, workspace):
    body = runtime.execute("import os\nos.mkfifo('pipe.txt')\nresult = 1", workspaceId=workspace)
    assert body["success"] and body["artifacts"] == [], body
    started = time.monotonic()
    response = runtime.get(f"/tools/artifacts/{workspace}/pipe.txt")
    assert response.status_code == 404, response.text
    assert time.monotonic() - started < 5


def test_a_fifo_planted_as_package_metadata_blocks_nothing(runtime, workspace):
    assert runtime.execute("result = 1", workspaceId=workspace)["success"]
    site = next((runtime.venvs / workspace / "lib").glob("python*/site-packages"))
    info = site / "weir_fifo-1.0.dist-info"
    info.mkdir()
    os.mkfifo(info / "METADATA")
    (site / "shadow-1.0.dist-info").symlink_to("/etc")
    started = time.monotonic()
    body = runtime.execute("result = 2", requirements=["six"], workspaceId=workspace)
    assert body["success"] and body["result"] == 2, body
    assert time.monotonic() - started < 60


def test_a_pathological_body_is_a_400_and_does_not_slow_another_workspace(start_runtime):
    # Half a second: the body below takes CPython's tokenizer and ast about two seconds
    # here, and 2 s was once not enough to time it out on a quiet machine.
    server = start_runtime({"PY_TOOL_ANALYSIS_TIMEOUT": "0.5"})
    # Just under 1 MiB, and seconds of CPython's tokenizer and ast (analysed elsewhere).
    hard = "f(" * 150 + ")" * 150 + "\n" + "y = [1, 2, 3]\n" * 70000
    assert len(hard) < 1 << 20

    def trivial():
        started = time.monotonic()
        assert server.execute("result = 1", workspaceId="bystander")["result"] == 1
        return time.monotonic() - started

    trivial()  # the bystander's venv and zygote
    baseline = max(trivial() for _ in range(5))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        started = time.monotonic()
        refused = pool.submit(server.post, "/tools/execute-python", {"code": hard, "workspaceId": "hard"})
        time.sleep(0.3)
        during = [trivial() for _ in range(5)]
        response = refused.result()
    assert response.status_code == 400, response.text
    assert "PY_TOOL_ANALYSIS_TIMEOUT" in response.json()["message"]
    assert time.monotonic() - started < 10
    # The analysis never stalls the server: typical runs stay within 100 ms of the
    # baseline, and none waits anywhere near the analysis itself (one sample may meet a
    # scheduling hiccup of this 2-core machine).
    assert sorted(during)[len(during) // 2] < baseline + 0.1, (baseline, during)
    assert max(during) < baseline + 0.5, (baseline, during)
    assert server.execute("result = 3", workspaceId="hard")["result"] == 3
