"""Stopping the server: SIGTERM (or Ctrl-C) ends it cleanly and takes running code along."""

import signal
import threading
import time
import uuid

from runtime_harness import processes_with


def test_idle_server_stops_at_once(start_runtime):
    runtime = start_runtime()
    started = time.monotonic()
    runtime.process.send_signal(signal.SIGTERM)
    assert runtime.process.wait(10) == 0
    assert time.monotonic() - started < 3


def test_running_code_is_killed_after_the_grace_period(start_runtime):
    runtime = start_runtime()
    marker = f"{1000 + uuid.uuid4().int % 9000}.{uuid.uuid4().int % 1000:03d}9"
    thread = threading.Thread(
        target=lambda: _swallow(runtime.execute, f"import os\nos.system('sleep {marker}')\n", timeout=200),
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + 20
    while not processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(marker), "the run did not start"
    started = time.monotonic()
    runtime.process.send_signal(signal.SIGINT)
    assert runtime.process.wait(30) == 0
    assert 8 < time.monotonic() - started < 20, "in-flight runs get about 10 s"
    time.sleep(0.5)
    assert processes_with(marker) == []


def _swallow(function, *args, **kwargs):
    try:
        function(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the connection is cut by the shutdown
        pass
