"""Fixtures of the API black-box suite (see weir_harness for the pieces)."""

import uuid

import pytest

from tool_runtime import start_runtime, use_runtime
from weir_harness import Api, Weir, backends


@pytest.fixture
def make_weir(tmp_path_factory):
    """Factory of fresh, unstarted installations; all are stopped afterwards."""
    made = []

    def make(backend: str = "sqlite") -> Weir:
        w = Weir(tmp_path_factory.mktemp("weir"), backend)
        made.append(w)
        return w

    yield make
    for w in made:
        w.cleanup()


@pytest.fixture(scope="session", params=backends())
def server(request, tmp_path_factory):
    """One running server per backend for the whole session."""
    w = Weir(tmp_path_factory.mktemp(f"weir-{request.param}"), request.param)
    w.start()
    yield w
    w.cleanup()


@pytest.fixture
def api(server) -> Api:
    """A client with a fresh all-permission key in a fresh workspace (tests never
    see each other's records)."""
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    return Api(server.url, server.create_key(workspace=ws))




@pytest.fixture(scope="session")
def py_runtime(tmp_path_factory):
    """The real Python tool runtime, shared by the session (runtimes are slow to start)."""
    runtime = start_runtime(tmp_path_factory.mktemp("pyruntime"))
    yield runtime
    runtime.stop()


@pytest.fixture(scope="session", params=backends())
def py_server(request, py_runtime, tmp_path_factory):
    """One weir per backend whose Python tools run on `py_runtime`. Its environment
    holds WEIR_TEST_REGION=eu-test, which a `runtime` workspace variable reads."""
    w = use_runtime(Weir(tmp_path_factory.mktemp(f"weir-py-{request.param}"), request.param), py_runtime)
    w.env["WEIR_TEST_REGION"] = "eu-test"
    w.env["WEIR_TEST_SECRET"] = "not-for-tools"
    w.env["RUNTIME_VARIABLES"] = "WEIR_TEST_REGION"
    w.start()
    yield w
    w.cleanup()


@pytest.fixture
def py_api(py_server) -> Api:
    """Like `api`, on `py_server`."""
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    return Api(py_server.url, py_server.create_key(workspace=ws))
