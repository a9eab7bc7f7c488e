"""Fixtures of the Python tool runtime's black-box suite (see runtime_harness)."""

import uuid
from pathlib import Path

import pytest

from runtime_harness import Runtime, runtime_binary, uv_binary


@pytest.fixture(scope="session")
def binary() -> Path:
    return runtime_binary()


@pytest.fixture(scope="session")
def start_runtime(binary, tmp_path_factory):
    """Factory: start_runtime(env=...) -> a running Runtime, stopped at session end."""
    started: list[Runtime] = []

    def start(env: dict[str, str] | None = None, command: list[str] | None = None) -> Runtime:
        env = dict(env or {})
        uv = uv_binary()
        if uv and "PY_TOOL_UV" not in env:
            env["PY_TOOL_UV"] = uv
        runtime = Runtime(command or [str(binary)], tmp_path_factory.mktemp("rt"), env)
        started.append(runtime)
        return runtime

    yield start
    for runtime in started:
        runtime.stop()


@pytest.fixture(scope="session")
def runtime(start_runtime) -> Runtime:
    """The shared server of the suite (open, default limits)."""
    return start_runtime()


@pytest.fixture
def workspace() -> str:
    """A fresh workspace id: a test that installs sees only its own packages."""
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def plot_workspace(runtime) -> str:
    """One workspace with matplotlib installed once per session."""
    ws = "plots"
    response = runtime.post(
        "/tools/install-packages", {"packages": ["matplotlib"], "workspace_id": ws}, timeout=600
    )
    assert response.status_code == 200, response.text
    return ws


@pytest.fixture(scope="session")
def shared_workspace() -> str:
    """A workspace for tests that install nothing (saves creating a venv per test)."""
    return "shared"
