"""weir run harness: runs one tool execution inside the sandboxed child process.

Started by the server as `python -s harness.py spec.json` with the workspace venv's
interpreter, a scrubbed environment, rlimits and the run's working directory as cwd.
spec.json holds the tool code (templates already substituted), the direct tool
parameters and the path of the result file. The harness executes the code as module
`__tool__`, picks the entry point, calls it and writes one JSON report:

    {"entry": {"kind": "function"|"result"|"stdout", "name": str|null},
     "result": <JSON value>, "output": str|null,
     "error": null | {"type", "message", "traceback"}}

Entry order: a function `main`; else the first function (in source order) named
execute_*, run_*, process_*, handle_*; else a module-level `result`; else the printed
output (the server fills that in). Functions get the parameters their signature names as
keyword arguments (all of them with **kwargs); coroutine functions are awaited.
"""

import asyncio
import inspect
import json
import linecache
import os
import sys
import traceback
import types

PATTERNS = ("execute_", "run_", "process_", "handle_")
TOOL_FILE = "<tool>"
HERE = os.path.abspath(__file__)


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
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) == HERE:
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

    import weir_runtime  # the helpers shipped beside this file

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


def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    sys.argv = ["tool"]
    report = run(spec)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream must not lose the report
            pass
    result_path = spec["resultPath"]
    partial = result_path + ".part"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(report, handle, ensure_ascii=False)
    os.replace(partial, result_path)


if __name__ == "__main__":
    main()
