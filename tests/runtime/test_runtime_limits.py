"""Limits and isolation of a run: timeout, memory, file size, processes, output, env."""

import textwrap
import time
import uuid

from runtime_harness import processes_with


def assert_healthy(runtime):
    assert runtime.alive()
    assert runtime.get("/tools/health").json()["status"] == "ok"


def test_infinite_loop_is_killed_at_the_timeout(runtime, shared_workspace):
    started = time.monotonic()
    body = runtime.execute("while True:\n    pass\n", timeout=2, workspaceId=shared_workspace)
    elapsed = time.monotonic() - started
    assert elapsed < 2 + 3, f"took {elapsed:.1f} s"
    assert body["timedOut"] is True
    assert body["success"] is False
    assert body["error"]["type"] == "TimeoutError"
    assert "2" in body["error"]["message"]
    assert_healthy(runtime)


def test_output_printed_before_a_timeout_is_kept(runtime, shared_workspace):
    body = runtime.execute("import time\nprint('started')\ntime.sleep(60)\n", timeout=1, workspaceId=shared_workspace)
    assert body["timedOut"] is True
    assert body["stdout"] == "started\n"


def test_memory_bomb_fails_cleanly(runtime, shared_workspace):
    body = runtime.execute(
        "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024 * 1024))\n",
        timeout=30,
        workspaceId=shared_workspace,
    )
    assert body["success"] is False
    assert body["timedOut"] is False
    assert body["error"]["type"] in ("MemoryError", "Killed"), body["error"]
    assert any("memory limit" in w for w in body["warnings"]) or "memory" in body["error"]["message"]
    assert_healthy(runtime)


def test_memory_limit_is_configurable(start_runtime):
    small = start_runtime({"PY_TOOL_MAX_MEM": "512M"})
    body = small.execute(
        "import resource\nresult = resource.getrlimit(resource.RLIMIT_AS)\n"
        "x = bytearray(700 * 1024 * 1024)\n"
    )
    assert body["success"] is False
    assert body["error"]["type"] == "MemoryError"
    fits = small.execute("x = bytearray(300 * 1024 * 1024)\nresult = len(x)\n")
    assert fits["success"], fits


def test_rlimits_and_process_group_of_the_child(runtime, shared_workspace):
    body = runtime.execute(
        textwrap.dedent(
            """
            import os, resource
            result = {
                "cpu": resource.getrlimit(resource.RLIMIT_CPU)[0],
                "as": resource.getrlimit(resource.RLIMIT_AS)[0],
                "fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0],
                "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
                "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
                "session_leader": os.getsid(0) == os.getpid(),
                "group_leader": os.getpgid(0) == os.getpid(),
            }
            """
        ),
        timeout=5,
        workspaceId=shared_workspace,
    )
    assert body["result"] == {
        "cpu": 7,
        "as": 1 << 30,
        "fsize": 100 << 20,
        "core": 0,
        "nproc": 1024,
        "session_leader": True,
        "group_leader": True,
    }


def test_a_200_mib_file_write_is_stopped_and_reported(runtime, shared_workspace):
    body = runtime.execute(
        textwrap.dedent(
            """
            block = b"x" * (1 << 20)
            with open("huge.bin", "wb") as f:
                for _ in range(200):
                    f.write(block)
            result = "wrote everything"
            """
        ),
        timeout=60,
        workspaceId=shared_workspace,
    )
    assert body["success"] is False
    assert body["result"] != "wrote everything"
    assert any("file size limit" in w for w in body["warnings"]), body["warnings"]
    assert all(a["filename"] != "huge.bin" for a in body["artifacts"])
    assert_healthy(runtime)


def test_a_swallowed_file_size_error_is_still_reported(runtime, shared_workspace):
    body = runtime.execute(
        textwrap.dedent(
            """
            try:
                with open("big.bin", "wb") as f:
                    f.write(b"y" * (120 << 20))
            except OSError:
                pass
            result = "ignored the error"
            """
        ),
        timeout=60,
        workspaceId=shared_workspace,
    )
    assert body["success"] is True
    assert any("big.bin" in w and "file size limit" in w for w in body["warnings"]), body["warnings"]


def test_background_processes_and_forks_die_with_the_run(runtime, shared_workspace):
    marker = f"{1000 + uuid.uuid4().int % 9000}.{uuid.uuid4().int % 1000:03d}7"
    body = runtime.execute(
        textwrap.dedent(
            f"""
            import os, time
            for _ in range(20):
                if os.fork() == 0:
                    os.system("sleep {marker} &")
                    time.sleep(600)
                    os._exit(0)
            os.system("sleep {marker} &")
            os.system("nohup sleep {marker} > /dev/null 2>&1 &")
            while True:
                time.sleep(1)
            """
        ),
        timeout=3,
        workspaceId=shared_workspace,
    )
    assert body["timedOut"] is True
    deadline = time.monotonic() + 5
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker) == []
    assert_healthy(runtime)


def test_a_finished_run_leaves_no_background_process(runtime, shared_workspace):
    marker = f"{1000 + uuid.uuid4().int % 9000}.{uuid.uuid4().int % 1000:03d}3"
    body = runtime.execute(f"import os\nos.system('sleep {marker} &')\nresult = 'done'\n", workspaceId=shared_workspace)
    assert body["success"], body
    time.sleep(0.5)
    assert processes_with(marker) == []


def test_output_is_capped_and_flagged(runtime, shared_workspace):
    body = runtime.execute(
        "import sys\nsys.stdout.write('o' * (3 << 20))\nsys.stderr.write('e' * 100)\nresult = 1\n",
        workspaceId=shared_workspace,
    )
    assert body["success"], body
    assert body["truncated"] is True
    assert len(body["stdout"]) == 1 << 20
    assert body["stderr"] == "e" * 100


def test_environment_is_scrubbed(start_runtime, tmp_path):
    secured = start_runtime({"PY_TOOL_API_KEY": "server-key-123", "WEIR_SECRET_TOKEN": "hunter2"})
    body = secured.execute("import os\nresult = dict(os.environ)\n")
    env = body["result"]
    assert "PY_TOOL_API_KEY" not in env
    assert "WEIR_SECRET_TOKEN" not in env
    assert all("server-key-123" not in v and "hunter2" not in v for v in env.values())
    assert env["MPLBACKEND"] == "Agg"
    assert "/venvs/default/bin" in env["PATH"]
    # The child runs in its own working directory, not the server's.
    cwd = secured.execute("import os\nresult = os.getcwd()\n")["result"]
    assert cwd != str(secured.data)


def test_executions_beyond_the_concurrency_cap_wait_their_turn(start_runtime):
    import concurrent.futures

    serial = start_runtime({"PY_TOOL_MAX_CONCURRENCY": "1"})
    code = "import time\ntime.sleep(1)\nresult = 'slept'\n"
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        bodies = list(pool.map(lambda _: serial.execute(code, timeout=1.8), range(3)))
    elapsed = time.monotonic() - started
    assert [b["result"] for b in bodies] == ["slept"] * 3, bodies
    assert not any(b["timedOut"] for b in bodies), "the timeout starts when the run starts"
    assert elapsed >= 3, f"runs overlapped: {elapsed:.1f} s"
