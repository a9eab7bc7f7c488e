"""The pip-installable runtime: build the wheel with maturin, install it into a fresh
venv, start the server from the wheel's console script and run one execution."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_harness import REPO, Runtime, uv_binary


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    maturin = shutil.which("maturin") or str(Path(sys.executable).parent / "maturin")
    uv = uv_binary()
    if not Path(maturin).exists() or uv is None:
        pytest.fail("maturin and uv are needed (tests/requirements.txt installs them)")
    out = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    subprocess.run(
        [maturin, "build", "--interpreter", sys.executable, "--out", str(out)],
        cwd=REPO, env=env, check=True,
    )
    wheels = list(out.glob("weir_runtime-*.whl"))
    assert len(wheels) == 1, wheels
    venv = out / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(wheels[0])],
        check=True,
    )
    return venv


def test_wheel_installs_a_command_that_serves(wheel_venv, tmp_path):
    assert (wheel_venv / "bin" / "uv").exists(), "the wheel depends on uv"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no uv on PATH: found beside python
    runtime = Runtime([str(wheel_venv / "bin" / "weir-pyruntime")], tmp_path, env)
    try:
        health = runtime.get("/tools/health").json()
        assert health["uv"]["available"] is True
        assert health["uv"]["path"] == str(wheel_venv / "bin" / "uv")
        body = runtime.execute(
            "import six\nfrom weir_runtime import save_image_artifact\n"
            "def main(name):\n    save_image_artifact(b'data', 'out.bin')\n    return f'{name} {six.__name__}'\n",
            variables={"$name": "wheel"},
        )
        assert body["success"], body
        assert body["result"] == "wheel six"
        assert [p.split("==")[0] for p in body["installedPackages"]] == ["six"]
        assert body["artifacts"][0]["filename"] == "out.bin"
    finally:
        runtime.stop()
    assert runtime.process.returncode == 0, "SIGTERM stops the server cleanly"


def test_python_package_matches_its_stub(wheel_venv):
    python = str(wheel_venv / "bin" / "python")
    script = (
        "import ast, pathlib, weir_runtime, weir_runtime._weir_runtime as m\n"
        "stub = pathlib.Path(m.__file__).with_name('_weir_runtime.pyi').read_text()\n"
        "names = {n.name for n in ast.parse(stub).body if isinstance(n, ast.FunctionDef)}\n"
        "names |= {n.target.id for n in ast.parse(stub).body if isinstance(n, ast.AnnAssign)}\n"
        "missing = [n for n in names if not hasattr(m, n)]\n"
        "assert not missing, missing\n"
        "assert weir_runtime.__version__\n"
        "assert callable(weir_runtime.save_image_artifact)\n"
        "print('ok')\n"
    )
    result = subprocess.run([python, "-c", script], capture_output=True, text=True)
    assert result.stdout.strip() == "ok", result.stderr
    help_text = subprocess.run([python, "-m", "weir_runtime", "--help"], capture_output=True, text=True)
    assert "PY_TOOL_VENVS" in help_text.stdout
