"""weir run harness: prepares a workspace's zygote and runs one tool execution in it.

Loaded by the zygote (`weir-pyruntime __zygote`, the embedded CPython) as module
`weir_harness`. `prepare` puts the workspace's venv on the path instead of any other
site-packages, installs the `weir_runtime` helpers and pre-imports the modules the
workspace's recent runs used. Each run is a fork of the zygote that has already confined
itself (namespaces, Landlock, seccomp: see the Rust side); it calls `child_main` with the
spec (tool code with templates already substituted, the direct tool parameters, HOME and
TMPDIR of the run) and writes one JSON report to file descriptor 3:

    {"entry": {"kind": "function"|"result"|"stdout", "name": str|null},
     "result": <JSON value>, "output": str|null,
     "error": null | {"type", "message", "traceback"}, "layers": {...}}

Entry order: a function `main`; else the first function (in source order) named
execute_*, run_*, process_*, handle_*; else a module-level `result`; else the printed
output (the server fills that in). Functions get the parameters their signature names as
keyword arguments (all of them with **kwargs); coroutine functions are awaited.
"""

import gc
import inspect
import json
import linecache
import os
import random
import sys
import tempfile
import traceback
import types

PATTERNS = ("execute_", "run_", "process_", "handle_")
TOOL_FILE = "<tool>"
HERE = __file__
REPORT_FD = 3


def _own_function(value):
    return inspect.isfunction(value) and value.__module__ == "__tool__"


def find_entry(namespace):
    main = namespace.get("main")
    if _own_function(main):
        return main
    candidates = [
        value
        for name, value in namespace.items()
        if name.startswith(PATTERNS) and _own_function(value)
    ]
    if candidates:
        return min(candidates, key=lambda fn: fn.__code__.co_firstlineno)
    return None


def call_entry(fn, params):
    signature = inspect.signature(fn)
    takes_all = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    if takes_all:
        kwargs = dict(params)
    else:
        kwargs = {
            name: params[name]
            for name, p in signature.parameters.items()
            if name in params and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
    value = fn(**kwargs)
    if inspect.isawaitable(value):
        import asyncio  # only async tools pay for it

        value = asyncio.run(_await(value))
    return value


async def _await(awaitable):
    return await awaitable


def to_json(value, depth=0):
    """The value as JSON data: dicts, lists and tuples item by item, every value JSON
    cannot carry (objects, NaN, infinities) through str."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if depth < 64 and isinstance(value, dict):
        return {str(k): to_json(v, depth + 1) for k, v in value.items()}
    if depth < 64 and isinstance(value, (list, tuple)):
        return [to_json(v, depth + 1) for v in value]
    return str(value)


def to_text(value):
    if value is None:
        return None
    if isinstance(value, str):
        return value
    data = to_json(value)
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


def describe(exc):
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == HERE:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return {"type": type(exc).__name__, "message": str(exc), "traceback": text}


def run(spec):
    code = spec["code"]
    params = spec.get("params") or {}
    linecache.cache[TOOL_FILE] = (len(code), None, code.splitlines(True), TOOL_FILE)
    module = types.ModuleType("__tool__")
    module.__file__ = TOOL_FILE
    sys.modules["__tool__"] = module
    namespace = module.__dict__

    import weir_runtime  # the helpers, installed by prepare

    namespace["save_image_artifact"] = weir_runtime.save_image_artifact
    entry = {"kind": "stdout", "name": None}
    try:
        exec(compile(code, TOOL_FILE, "exec"), namespace)
        fn = find_entry(namespace)
        if fn is not None:
            entry = {"kind": "function", "name": fn.__name__}
            value = call_entry(fn, params)
        elif "result" in namespace:
            entry = {"kind": "result", "name": "result"}
            value = namespace["result"]
        else:
            value = None
    except SystemExit as exc:
        if exc.code not in (None, 0):
            return {"entry": entry, "result": None, "output": None, "error": describe(exc)}
        value = None
    except BaseException as exc:  # noqa: BLE001 - report everything the tool raised
        return {"entry": entry, "result": None, "output": None, "error": describe(exc)}
    return {"entry": entry, "result": to_json(value), "output": to_text(value), "error": None}


def prepare(site_packages, venv_dir, executable, helpers_source, preload):
    """Runs once in the zygote: the venv's packages instead of any other site-packages,
    the helpers as `weir_runtime`, and `preload` imported when importable (errors are
    ignored: a module that fails to import simply is not warm). Returns what was
    imported."""
    import site
    import threading

    # Imported here so that no run pays for them (modules tool code commonly uses).
    import datetime, decimal, math, re, collections, itertools, functools, dataclasses  # noqa: E401, F401

    if sys.flags.no_site:
        # The builtins `site` would have added (`exit()` is common in scripts).
        site.setquit()
        site.sethelper()
    sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith(("site-packages", "dist-packages"))]
    if site_packages:
        site.addsitedir(site_packages)
    if executable:
        sys.executable = executable
    if venv_dir:
        sys.prefix = sys.exec_prefix = venv_dir
    helpers = types.ModuleType("weir_runtime")
    helpers.__file__ = "<weir_runtime>"
    exec(compile(helpers_source, "<weir_runtime>", "exec"), helpers.__dict__)
    sys.modules["weir_runtime"] = helpers
    imported = []
    for name in preload:
        try:
            __import__(name)
        except BaseException:  # noqa: BLE001 - a module that fails stays cold
            continue
        if threading.active_count() > 1:
            raise RuntimeError(f"importing {name} started a thread: the zygote cannot fork safely")
        imported.append(name)
    # Every object so far is the zygote's: a collection in a run must not walk (and so
    # copy, page by page) the heap it shares with the zygote. (No collection first: it
    # would cost the first run its time, and the zygote's garbage is small.)
    gc.freeze()
    return imported


def child_main(spec_json, layers_json):
    """Runs in the forked, confined child: one execution, its report on fd 3."""
    spec = json.loads(spec_json)
    if spec.get("exec"):
        # A package install: the installer replaces this process, confined as a run is.
        os.close(REPORT_FD)
        os.execve(spec["exec"][0], spec["exec"], spec["env"])
    os.environ["HOME"] = spec["home"]
    os.environ["TMPDIR"] = spec["tmp"]
    tempfile.tempdir = None
    random.seed()
    sys.argv = ["tool"]
    report = run(spec)
    report["layers"] = json.loads(layers_json)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream must not lose the report
            pass
    data = json.dumps(report, ensure_ascii=False).encode("utf-8")
    view = memoryview(data)
    while view:
        written = os.write(REPORT_FD, view)
        view = view[written:]
    os.close(REPORT_FD)


def refuse(layers_json, missing):
    """Writes the report of a run that was refused because a layer is missing."""
    report = {
        "entry": {"kind": "stdout", "name": None},
        "result": None,
        "output": None,
        "error": {
            "type": "IsolationError",
            "message": f"refused to run: PY_TOOL_REQUIRE_ISOLATION=1 and {missing}",
            "traceback": "",
        },
        "layers": json.loads(layers_json),
    }
    os.write(REPORT_FD, json.dumps(report).encode("utf-8"))
