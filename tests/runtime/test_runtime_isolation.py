"""OS isolation of tool runs, proven by attacks: each attack fails, the server stays
healthy, and the next run of the same workspace works.

A test of a layer this kernel refuses is skipped with the reason /tools/health gives,
unless PY_TOOL_REQUIRE_ISOLATION=1 (CI), where the server would not even start.
"""

import concurrent.futures
import os
import signal
import socket
import subprocess
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

SECRET = f"weir-secret-{uuid.uuid4().hex}"


def layer(runtime, name):
    return runtime.get("/tools/health").json()["isolation"]["layers"][name]


def needs(runtime, *names):
    for name in names:
        found = layer(runtime, name)
        if found["state"] != "enforced":
            pytest.skip(f"the kernel does not give the {name} layer here: {found['detail']}")


def survives(runtime, workspace):
    """The server is healthy and the workspace still runs code."""
    assert runtime.alive()
    assert runtime.get("/tools/health").json()["status"] == "ok"
    body = runtime.execute("result = 6 * 7", workspaceId=workspace)
    assert body["success"] and body["result"] == 42, body


@pytest.fixture(scope="module")
def guarded(start_runtime):
    """A server with a secret in its environment and the network denied."""
    return start_runtime({"WEIR_TEST_SECRET": SECRET, "PY_TOOL_NETWORK": "deny"})


def test_health_reports_every_layer_enforced_or_why_not(runtime):
    health = runtime.get("/tools/health").json()["isolation"]
    assert set(health["layers"]) == {
        "namespaces", "filesystem", "network", "identity", "landlock", "seccomp", "cgroups", "zygote", "disk",
    }
    for name, found in health["layers"].items():
        assert found["state"] in ("enforced", "partial", "unavailable"), name
        assert found["detail"], name
    assert health["optional"] == []
    if os.environ.get("PY_TOOL_REQUIRE_ISOLATION") == "1":
        assert health["required"] is True
        assert all(found["state"] == "enforced" for found in health["layers"].values()), health


def test_only_the_servers_own_layers_may_be_optional(start_runtime, binary, tmp_path):
    """PY_TOOL_OPTIONAL_LAYERS (what compose.yaml sets for containers without cgroup
    delegation): listed in /tools/health; a run's own layer is refused at start."""
    lenient = start_runtime({"PY_TOOL_REQUIRE_ISOLATION": "1", "PY_TOOL_OPTIONAL_LAYERS": "cgroups, disk"})
    health = lenient.get("/tools/health").json()["isolation"]
    assert health["required"] is True and health["optional"] == ["cgroups", "disk"]
    assert lenient.execute("result = 6 * 7")["result"] == 42

    env = {k: v for k, v in os.environ.items() if not k.startswith("PY_TOOL_")}
    env.update(PY_TOOL_VENVS=str(tmp_path / "v"), PY_TOOL_ARTIFACTS=str(tmp_path / "a"), PY_TOOL_PORT="0",
               PY_TOOL_API_KEY="k" * 32, PY_TOOL_REQUIRE_ISOLATION="1", PY_TOOL_OPTIONAL_LAYERS="cgroups,seccomp")
    done = subprocess.run([str(binary)], env=env, capture_output=True, timeout=60)
    assert done.returncode == 2, done
    assert "`seccomp` cannot be optional: only cgroups, zygote, disk can" in done.stderr.decode()
    assert b"listening" not in done.stdout


def test_writing_outside_its_directories_fails(runtime, workspace):
    needs(runtime, "filesystem", "landlock")
    target = runtime.data / f"pwned-{uuid.uuid4().hex}"
    body = runtime.execute(
        textwrap.dedent(
            f"""
            import os
            denied = []
            for path in ["/etc/weir-pwned", "/usr/weir-pwned", {str(target)!r},
                         {str(runtime.venvs / "weir-pwned")!r}, "/weir-pwned"]:
                try:
                    with open(path, "w") as f:
                        f.write("x")
                except OSError as e:
                    denied.append(type(e).__name__)
            with open("fine.txt", "w") as f:
                f.write("the working directory is writable")
            result = denied
            """
        ),
        workspaceId=workspace,
    )
    assert body["success"], body
    assert len(body["result"]) == 5, body["result"]
    assert not target.exists()
    assert not Path("/etc/weir-pwned").exists()
    assert [a["filename"] for a in body["artifacts"]] == ["fine.txt"]
    survives(runtime, workspace)


def test_another_workspaces_artifact_cannot_be_read(runtime, workspace):
    needs(runtime, "filesystem")
    victim = f"victim-{uuid.uuid4().hex[:8]}"
    secret = uuid.uuid4().hex
    written = runtime.execute(
        f"open('secret.txt', 'w').write({secret!r})\nresult = 'ok'\n", workspaceId=victim
    )
    assert written["success"], written
    stored = runtime.artifacts / victim / written["artifacts"][0]["filename"]
    assert stored.read_text() == secret
    body = runtime.execute(
        textwrap.dedent(
            f"""
            import os
            found = []
            try:
                found.append(open({str(stored)!r}).read())
            except OSError as e:
                found.append(type(e).__name__)
            for root, dirs, files in os.walk({str(runtime.artifacts)!r}):
                found.extend(files)
            result = found
            """
        ),
        workspaceId=workspace,
    )
    assert body["success"], body
    assert secret not in str(body["result"])
    assert body["result"][0] in ("FileNotFoundError", "PermissionError"), body["result"]
    survives(runtime, workspace)


def test_its_own_venv_cannot_be_changed(runtime, workspace):
    needs(runtime, "filesystem")
    body = runtime.execute(
        textwrap.dedent(
            """
            import os, sys, glob
            outcomes = []
            targets = [os.path.join(sys.prefix, "pyvenv.cfg"),
                       os.path.join(sys.prefix, "bin", "python"),
                       os.path.join(sys.prefix, "bin", "poison.py")]
            targets += glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "*.pth"))[:1]
            for path in targets:
                try:
                    with open(path, "a") as f:
                        f.write("import os; os.system('echo poisoned')\\n")
                    outcomes.append("WROTE " + path)
                except OSError as e:
                    outcomes.append(type(e).__name__)
            result = outcomes
            """
        ),
        workspaceId=workspace,
    )
    assert body["success"], body
    assert not any(o.startswith("WROTE") for o in body["result"]), body["result"]
    cfg = (runtime.venvs / workspace / "pyvenv.cfg").read_text()
    assert "poisoned" not in cfg
    survives(runtime, workspace)


def test_other_processes_environments_are_invisible(guarded, workspace):
    needs(guarded, "namespaces", "filesystem")
    body = guarded.execute(
        textwrap.dedent(
            f"""
            import os
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            leaked = []
            for pid in pids:
                try:
                    if {SECRET!r}.encode() in open(f"/proc/{{pid}}/environ", "rb").read():
                        leaked.append(pid)
                except OSError:
                    pass
            result = {{"pids": sorted(map(int, pids)), "leaked": leaked, "me": os.getpid()}}
            """
        ),
        workspaceId=workspace,
    )
    assert body["success"], body
    assert body["result"]["leaked"] == []
    # Only the run's own pid namespace: its init (pid 1) and itself.
    assert body["result"]["pids"] == [1, body["result"]["me"]], body["result"]
    assert SECRET not in str(body)
    survives(guarded, workspace)


def test_ptrace_of_its_parent_fails_and_the_server_keeps_answering(runtime, workspace):
    needs(runtime, "seccomp")
    body = runtime.execute(
        textwrap.dedent(
            """
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
            outcomes = []
            for pid in {os.getppid(), 1}:
                for request in (PTRACE_ATTACH, PTRACE_SEIZE):
                    rc = libc.ptrace(request, pid, None, None)
                    outcomes.append((rc, ctypes.get_errno()))
            result = outcomes
            """
        ),
        timeout=10,
        workspaceId=workspace,
    )
    assert body["success"], body
    assert all(rc == -1 for rc, _ in body["result"]), body["result"]
    assert {errno for _, errno in body["result"]} <= {1, 3}, body["result"]  # EPERM, ESRCH
    survives(runtime, workspace)


def test_unshare_and_mount_fail(runtime, workspace):
    needs(runtime, "seccomp")
    body = runtime.execute(
        textwrap.dedent(
            """
            import ctypes, os, subprocess
            libc = ctypes.CDLL(None, use_errno=True)
            CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
            import threading
            outcomes = {
                "unshare": libc.unshare(CLONE_NEWUSER | CLONE_NEWNS),
                "mount": libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None),
                "cli": subprocess.run(["unshare", "-r", "-m", "true"], capture_output=True).returncode,
            }
            libc.syscall.restype = ctypes.c_long
            outcomes["clone3"] = (libc.syscall(435, None, 0), ctypes.get_errno())
            outcomes["tiocsti"] = (libc.ioctl(1, 0x5412, b"x"), ctypes.get_errno())
            seen = []
            worker = threading.Thread(target=lambda: seen.append("thread ran"))
            worker.start(); worker.join()
            outcomes["threads"] = seen
            outcomes["fork"] = subprocess.run(["true"]).returncode
            result = outcomes
            """
        ),
        workspaceId=workspace,
    )
    assert body["success"], body
    assert body["result"]["unshare"] == -1
    assert body["result"]["mount"] == -1
    assert body["result"]["cli"] != 0
    # clone3 answers ENOSYS so that glibc falls back to clone: threads and forks work.
    assert body["result"]["clone3"] == [-1, 38]
    assert body["result"]["tiocsti"] == [-1, 1]  # EPERM before any tty check
    assert body["result"]["threads"] == ["thread ran"]
    assert body["result"]["fork"] == 0
    survives(runtime, workspace)


def test_a_fork_bomb_is_contained(runtime, workspace):
    needs(runtime, "namespaces")
    started = time.monotonic()
    body = runtime.execute(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        timeout=4,
        workspaceId=workspace,
    )
    assert time.monotonic() - started < 4 + 6
    assert body["success"] is False
    survives(runtime, workspace)


def test_killing_its_parent_and_every_visible_process_harms_nothing(runtime, workspace):
    needs(runtime, "namespaces")
    body = runtime.execute(
        textwrap.dedent(
            """
            import os, signal
            tried = []
            for pid in [os.getppid(), 1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
                if pid != os.getpid():
                    try:
                        os.kill(pid, signal.SIGKILL)
                        tried.append(pid)
                    except OSError:
                        pass
            result = "still here"
            """
        ),
        workspaceId=workspace,
    )
    assert body["success"], body
    assert body["result"] == "still here"
    survives(runtime, workspace)


def test_tcp_is_denied_with_network_deny(guarded, workspace):
    # `allow` reaching the same listener is test_runtime_network's control.
    needs(guarded, "network", "landlock")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]

    def accept_until_closed():
        # The listener's shutdown at the end wakes a pending accept with an error.
        try:
            for _ in range(2):
                listener.accept()
        except OSError:
            pass

    accepting = threading.Thread(target=accept_until_closed, daemon=True)
    accepting.start()
    code = textwrap.dedent(
        f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
            result = "connected"
        except OSError as e:
            result = type(e).__name__
        """
    )
    try:
        denied = guarded.execute(code, workspaceId=workspace)
        assert denied["success"], denied
        assert denied["result"] != "connected", denied
        assert guarded.get("/tools/health").json()["isolation"]["network"] == "deny"
    finally:
        # shutdown wakes the pending accept (close alone would not, on Linux).
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        accepting.join(timeout=5)
    survives(guarded, workspace)


def test_a_2_gib_allocation_fails_cleanly(runtime, workspace):
    body = runtime.execute("x = bytearray(2 << 30)\nresult = len(x)\n", workspaceId=workspace)
    assert body["success"] is False
    assert body["error"]["type"] in ("MemoryError", "Killed"), body["error"]
    survives(runtime, workspace)


def test_the_run_has_no_privileges(runtime, workspace):
    needs(runtime, "identity")
    body = runtime.execute(
        textwrap.dedent(
            """
            import os
            status = open("/proc/self/status").read()
            caps = {l.split(":")[0]: int(l.split()[1], 16) for l in status.splitlines() if l.startswith("Cap")}
            result = {"uid": os.getuid(), "gid": os.getgid(), "caps": caps,
                      "nnp": [l for l in status.splitlines() if l.startswith("NoNewPrivs")][0].split()[1],
                      "seccomp": [l for l in status.splitlines() if l.startswith("Seccomp:")][0].split()[1]}
            """
        ),
        workspaceId=workspace,
    )
    assert body["success"], body
    result = body["result"]
    assert result["uid"] != 0 and result["gid"] != 0
    assert result["caps"]["CapEff"] == 0 and result["caps"]["CapPrm"] == 0
    assert result["nnp"] == "1" and result["seccomp"] == "2"


def children_of(pid):
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            if int(next(l for l in status.splitlines() if l.startswith("PPid:")).split()[1]) == pid:
                found.append(int(entry.name))
    return found


def zygotes_of(runtime, workspace):
    """The keepers of the workspace's zygotes (the runtime's own children)."""
    venv = str(runtime.venvs / workspace)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"__zygote" in cmdline and f"VIRTUAL_ENV={venv}\0".encode() in environ:
            # The zygote itself, not the spare run processes forked from it.
            status = (entry / "status").read_text()
            parent = int(next(l for l in status.splitlines() if l.startswith("PPid:")).split()[1])
            if parent == runtime.process.pid:
                found.append(int(entry.name))
    return found


def test_a_crashed_zygote_is_replaced(runtime, workspace):
    assert runtime.execute("result = 1", workspaceId=workspace)["success"]
    zygotes = zygotes_of(runtime, workspace)
    assert len(zygotes) == 1, zygotes
    os.kill(zygotes[0], signal.SIGKILL)
    time.sleep(0.2)
    body = runtime.execute("result = 'again'", workspaceId=workspace)
    assert body["success"] and body["result"] == "again", body
    assert zygotes_of(runtime, workspace) not in ([], zygotes)


def test_50_concurrent_runs_across_3_workspaces_never_mix(runtime):
    workspaces = [f"mix-{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    code = textwrap.dedent(
        """
        import os, time
        def main(token, workspace):
            with open("mine.txt", "w") as f:
                f.write(token)
            time.sleep(0.05)
            return {"token": token, "workspace": workspace, "files": sorted(os.listdir("."))}
        """
    )

    def one(i):
        workspace = workspaces[i % 3]
        token = uuid.uuid4().hex
        body = runtime.execute(code, variables={"token": token, "workspace": workspace}, workspaceId=workspace)
        return workspace, token, body

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(one, range(50)))
    for workspace, token, body in results:
        assert body["success"], body
        assert body["workspaceId"] == workspace
        assert body["result"] == {"token": token, "workspace": workspace, "files": ["mine.txt"]}
        (artifact,) = body["artifacts"]
        assert artifact["url"].startswith(f"/tools/artifacts/{workspace}/")
        assert runtime.get(artifact["url"]).text == token


def test_a_saturated_runtime_answers_429_with_retry_after(start_runtime):
    tight = start_runtime({"PY_TOOL_MAX_CONCURRENCY": "1", "PY_TOOL_MAX_QUEUE": "1"})
    tight.execute("result = 'warm'", workspaceId="busy")
    code = "import time\ntime.sleep(1.5)\nresult = 'slept'\n"

    def one(_):
        return tight.post("/tools/execute-python", {"code": code, "workspaceId": "busy"})

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        responses = list(pool.map(one, range(4)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(200) >= 2 and 429 in statuses, statuses
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.headers["Retry-After"] == "1"
    assert "busy" in refused.json()["message"]
    assert tight.execute("result = 'after'", workspaceId="busy")["result"] == "after"


def evil_sdist(directory: Path, target: Path) -> None:
    """An sdist whose setup.py writes `target` (outside any venv) when it is built."""
    import io
    import tarfile

    setup = textwrap.dedent(
        f"""
        from setuptools import setup
        with open({str(target)!r}, "w") as handle:
            handle.write("pwned by setup.py")
        setup(name="weir-evil", version="0.1", py_modules=[])
        """
    )
    info = "Metadata-Version: 2.1\nName: weir-evil\nVersion: 0.1\n"
    with tarfile.open(directory / "weir_evil-0.1.tar.gz", "w:gz") as archive:
        for name, text in [("setup.py", setup), ("PKG-INFO", info)]:
            data = text.encode()
            entry = tarfile.TarInfo(f"weir_evil-0.1/{name}")
            entry.size = len(data)
            archive.addfile(entry, io.BytesIO(data))


def test_an_install_that_writes_outside_the_venv_fails_and_leaves_it_usable(start_runtime, tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    target = tmp_path / f"evil-{uuid.uuid4().hex}"
    evil_sdist(links, target)
    server = start_runtime({"UV_FIND_LINKS": str(links)})
    needs(server, "filesystem", "landlock")
    workspace = "evil"
    assert server.execute("import six\nresult = six.__name__", workspaceId=workspace)["result"] == "six"
    response = server.post(
        "/tools/install-packages", {"packages": ["weir-evil==0.1"], "workspace_id": workspace}
    )
    assert response.status_code == 400, response.text
    # It got as far as running setup.py, which the sandbox stopped at its write.
    message = response.json()["message"]
    assert str(target) in message and ("Permission denied" in message or "Read-only" in message), message
    assert not target.exists(), "setup.py wrote outside the venv"
    body = server.execute("import six\nresult = six.__name__", workspaceId=workspace)
    assert body["success"] and body["result"] == "six", body
    survives(server, workspace)


def test_modules_a_zygote_preimports_run_unprivileged_in_its_view(runtime, workspace):
    """A zygote pre-imports what the workspace's runs imported: that import runs package
    code outside any run, so the zygote itself must be confined."""
    assert runtime.execute("result = 1", workspaceId=workspace)["success"]
    site = next((runtime.venvs / workspace / "lib").glob("python*/site-packages"))
    target = runtime.data / f"zygote-pwned-{uuid.uuid4().hex}"
    (site / "weir_probe_mod.py").write_text(
        textwrap.dedent(
            f"""
            import os
            facts = {{"uid": os.getuid()}}
            try:
                open({str(target)!r}, "w").write("written at import")
            except OSError as e:
                facts["write"] = type(e).__name__
            """
        )
    )
    first = zygotes_of(runtime, workspace)
    body = runtime.execute("import weir_probe_mod\nresult = weir_probe_mod.facts", workspaceId=workspace)
    assert body["success"], body
    deadline = time.monotonic() + 20
    # The warmer zygote replaces the first: for a moment both are there.
    while ((seen := zygotes_of(runtime, workspace)) in ([], first) or len(seen) > 1) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    (keeper,) = zygotes_of(runtime, workspace)
    assert keeper not in first, "a warmer zygote replaced the first one"
    keeper_status = Path(f"/proc/{keeper}/status").read_text()
    assert int(next(l for l in keeper_status.splitlines() if l.startswith("Uid:")).split()[1]) != 0
    assert int(next(l for l in keeper_status.splitlines() if l.startswith("CapEff:")).split()[1], 16) == 0
    zygote = children_of(keeper)[0]
    assert "NSpid:" in (s := Path(f"/proc/{zygote}/status").read_text())
    assert next(l for l in s.splitlines() if l.startswith("NSpid:")).split()[-1] == "1", "pid 1 of its own namespace"
    status = Path(f"/proc/{zygote}/status").read_text()
    uid = int(next(l for l in status.splitlines() if l.startswith("Uid:")).split()[1])
    assert uid != 0, "the zygote is not root on the host"
    caps = int(next(l for l in status.splitlines() if l.startswith("CapEff:")).split()[1], 16)
    assert caps == (1 << 6) | (1 << 7) | (1 << 31), f"only setgid, setuid, setfcap: {caps:#x}"
    assert not target.exists(), "code imported by the zygote wrote outside its view"
    survives(runtime, workspace)


def test_a_module_that_starts_a_thread_at_import_never_breaks_the_workspace(runtime, workspace):
    """A zygote must be single-threaded to fork: a learned module that starts a thread
    when imported cannot be pre-imported, and the workspace keeps working."""
    assert runtime.execute("result = 1", workspaceId=workspace)["success"]
    site = next((runtime.venvs / workspace / "lib").glob("python*/site-packages"))
    (site / "weir_thread_mod.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n"
        "value = 7\n"
    )
    code = "import weir_thread_mod\nresult = weir_thread_mod.value"
    assert runtime.execute(code, workspaceId=workspace)["result"] == 7
    time.sleep(1)  # the warmer zygote it asked for fails in the background
    for pid in zygotes_of(runtime, workspace):
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    body = runtime.execute(code, workspaceId=workspace)
    assert body["success"] and body["result"] == 7, body
    survives(runtime, workspace)
