"""The real Python tool runtime beside weir: `weir-pyruntime` started as the
runtime suite starts it (tests/runtime/runtime_harness.py, reused from there: the
binary from WEIR_BIN_DIR, uv beside the test interpreter), with a key, and a weir
that sends its Python tools there (`PYTHON_RUNTIME` and the same `PY_TOOL_API_KEY`).
Fixtures are in conftest.py."""

import secrets
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

from runtime_harness import Runtime, runtime_binary, uv_binary  # noqa: E402

from weir_harness import Weir  # noqa: E402

PY_TOOL_API_KEY = f"pytool-{secrets.token_hex(16)}"


def start_runtime(data_dir: Path) -> Runtime:
    """A running runtime on a free port that requires PY_TOOL_API_KEY."""
    env = {"PY_TOOL_API_KEY": PY_TOOL_API_KEY}
    uv = uv_binary()
    if uv:
        env["PY_TOOL_UV"] = uv
    return Runtime([str(runtime_binary())], data_dir, env)


def use_runtime(weir: Weir, runtime: Runtime) -> Weir:
    """Points an unstarted weir at `runtime`."""
    weir.env.update(PYTHON_RUNTIME=runtime.url, PY_TOOL_API_KEY=PY_TOOL_API_KEY)
    return weir
