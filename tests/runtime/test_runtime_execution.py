"""POST /tools/execute-python: entry detection, results, errors and input validation."""

import textwrap

import pytest


def code(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def test_main_is_called_with_the_parameters_its_signature_names(runtime, workspace):
    body = runtime.execute(
        code(
            """
            def main(city, count=1):
                print("computing")
                return {"city": city, "count": count * 2}
            """
        ),
        variables={"$city": "Paris", "count": 21, "unused": "not passed"},
        workspaceId=workspace,
    )
    assert body["success"] is True, body
    assert body["result"] == {"city": "Paris", "count": 42}
    assert body["entry"] == {"kind": "function", "name": "main"}
    assert body["stdout"] == "computing\n"
    assert body["error"] is None
    assert body["timedOut"] is False
    assert isinstance(body["durationMs"], int)
    # output is the text form of the result, for an LLM
    assert '"city": "Paris"' in body["output"]


def test_main_wins_over_pattern_functions_and_result(runtime, workspace):
    body = runtime.execute(
        code(
            """
            result = "module result"
            def run_first():
                return "pattern"
            def main():
                return "main"
            """
        ),
        workspaceId=workspace,
    )
    assert body["result"] == "main"


@pytest.mark.parametrize("prefix", ["execute_", "run_", "process_", "handle_"])
def test_first_pattern_function_in_source_order_is_the_entry(runtime, workspace, prefix):
    body = runtime.execute(
        code(
            f"""
            def helper():
                return "helper"
            def {prefix}b(x):
                return "first:" + x
            def execute_a(x):
                return "second"
            result = "ignored when a function matches"
            """
        ),
        variables={"x": "v"},
        workspaceId=workspace,
    )
    assert body["success"], body
    assert body["result"] == "first:v"
    assert body["entry"]["name"] == f"{prefix}b"


def test_module_level_result_is_the_output(runtime, workspace):
    body = runtime.execute(
        "import math\nresult = [math.factorial(5), 'ok', None, 1.5]\n", workspaceId=workspace
    )
    assert body["success"], body
    assert body["result"] == [120, "ok", None, 1.5]
    assert body["entry"] == {"kind": "result", "name": "result"}


def test_printed_output_is_the_result_when_nothing_else_applies(runtime, workspace):
    body = runtime.execute("for i in range(3):\n    print('line', i)\n", workspaceId=workspace)
    assert body["success"], body
    assert body["entry"]["kind"] == "stdout"
    assert body["result"] == "line 0\nline 1\nline 2"
    assert body["output"] == "line 0\nline 1\nline 2"


def test_async_entry_is_awaited(runtime, workspace):
    body = runtime.execute(
        code(
            """
            import asyncio
            async def main(n):
                await asyncio.sleep(0.01)
                return n + 1
            """
        ),
        variables={"n": 41},
        workspaceId=workspace,
    )
    assert body["result"] == 42, body


def test_non_json_results_are_converted_with_str(runtime, workspace):
    body = runtime.execute(
        code(
            """
            import datetime
            class Thing:
                def __str__(self):
                    return "a thing"
            def main():
                return {"when": datetime.date(2024, 1, 2), "thing": Thing(), "nan": float("nan")}
            """
        ),
        workspaceId=workspace,
    )
    assert body["success"], body
    assert body["result"] == {"when": "2024-01-02", "thing": "a thing", "nan": "nan"}


def test_exceptions_are_reported_with_type_message_and_traceback(runtime, workspace):
    body = runtime.execute(
        code(
            """
            def main():
                values = {}
                return values["missing"]
            """
        ),
        workspaceId=workspace,
    )
    assert body["success"] is False
    error = body["error"]
    assert error["type"] == "KeyError"
    assert "missing" in error["message"]
    assert 'File "<tool>", line 3, in main' in error["traceback"]
    assert "harness" not in error["traceback"]


def test_syntax_errors_are_reported(runtime, workspace):
    body = runtime.execute("def broken(:\n    pass\n", workspaceId=workspace)
    assert body["success"] is False
    assert body["error"]["type"] == "SyntaxError"


def test_missing_arguments_are_the_tools_error(runtime, workspace):
    body = runtime.execute("def main(required):\n    return required\n", workspaceId=workspace)
    assert body["success"] is False
    assert body["error"]["type"] == "TypeError"


def test_sys_exit_and_hard_exit(runtime, workspace):
    body = runtime.execute("import sys\nprint('bye')\nsys.exit(0)\n", workspaceId=workspace)
    assert body["success"] is True and body["result"] == "bye"
    body = runtime.execute("import sys\nsys.exit(3)\n", workspaceId=workspace)
    assert body["success"] is False and body["error"]["type"] == "SystemExit"
    body = runtime.execute("import os\nos._exit(7)\n", workspaceId=workspace)
    assert body["success"] is False
    assert body["error"]["type"] == "ProcessExit"
    assert "status 7" in body["error"]["message"]


def test_death_by_signal_is_reported_with_its_cause(runtime, workspace):
    body = runtime.execute("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", workspaceId=workspace)
    assert body["success"] is False
    assert body["error"]["type"] == "Killed"
    assert "SIGKILL" in body["error"]["message"]
    body = runtime.execute("import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)\n", workspaceId=workspace)
    assert "CPU time limit" in body["error"]["message"]


def test_workspace_defaults_to_default(runtime):
    body = runtime.execute("result = 1")
    assert body["workspaceId"] == "default"


@pytest.mark.parametrize(
    "body, status, needle",
    [
        ({"variables": {}}, 412, "code"),
        ({"code": 5}, 400, ""),
        ({"code": "x=1", "workspaceId": "../etc"}, 400, "workspaceId"),
        ({"code": "x=1", "workspaceId": "a" * 65}, 400, "workspaceId"),
        ({"code": "x=1", "timeout": -1}, 400, "timeout"),
        ({"code": "x=1", "timeout": "soon"}, 400, ""),
        ({"code": "x=1", "variables": [1, 2]}, 400, "variables"),
        ({"code": "x=1", "variables": {"$vars": "no"}}, 400, "$vars"),
        ({"code": "x=1", "requirements": ["--index-url=http://evil.example"]}, 400, "requirement"),
        ({"code": "x=1", "requirements": ["six @ https://evil.example/six.whl"]}, 400, "requirement"),
        ({"code": "x=1", "requirements": "six"}, 400, ""),
    ],
)
def test_bad_input_is_rejected_with_json_messages(runtime, body, status, needle):
    response = runtime.post("/tools/execute-python", body)
    assert response.status_code == status, response.text
    message = response.json()["message"]
    assert isinstance(message, str) and message
    assert needle in message


def test_framework_rejections_are_json(runtime):
    malformed = runtime.post("/tools/execute-python", None, data=b"{not json", headers={"Content-Type": "application/json"})
    assert malformed.status_code == 400 and "message" in malformed.json()
    unknown = runtime.get("/tools/nope")
    assert unknown.status_code == 404 and "message" in unknown.json()
    wrong_method = runtime.get("/tools/execute-python")
    assert wrong_method.status_code == 405 and "message" in wrong_method.json()
    too_big = runtime.post(
        "/tools/execute-python", None, data=b'{"code": "' + b"x" * (11 << 20) + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert too_big.status_code == 413 and "message" in too_big.json()
    not_json = runtime.post("/tools/execute-python", None, data=b"code=1", headers={"Content-Type": "text/plain"})
    assert not_json.status_code == 415 and "message" in not_json.json()


def test_timeout_is_capped_with_a_warning(start_runtime):
    capped = start_runtime({"PY_TOOL_MAX_TIMEOUT": "2"})
    body = capped.execute("result = 1", timeout=100)
    assert body["success"]
    assert any("capped" in w for w in body["warnings"])


def test_health_reports_interpreter_installer_and_isolation(runtime):
    response = runtime.get("/tools/health")
    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "ok"
    assert health["python"]["version"].startswith("3.")
    assert health["uv"]["available"] is True
    assert isinstance(health["workspaces"], int)
    rlimits = health["isolation"]["rlimits"]
    assert rlimits["addressSpaceBytes"] == 1 << 30
    assert rlimits["fileSizeBytes"] == 100 << 20
    assert rlimits["coreBytes"] == 0


def test_oversized_results_are_refused_cleanly(runtime, shared_workspace):
    body = runtime.execute("result = 'x' * (40 << 20)\n", workspaceId=shared_workspace)
    assert body["success"] is False
    assert body["error"]["type"] == "ResultError"
    assert "larger than" in body["error"]["message"]
    assert runtime.alive()


def test_a_forged_report_link_is_not_followed(runtime, shared_workspace):
    # The run's report lives outside its view: the link cannot even be created (the view
    # is read-only there), and a report that is not one is never read as one.
    body = runtime.execute(
        "import os\nos.symlink('/etc/hostname', '../report.json')\nos._exit(0)\n",
        workspaceId=shared_workspace,
    )
    assert body["success"] is False
    assert body["error"]["type"] in ("OSError", "PermissionError", "ResultError"), body["error"]
