"""Templates in tool code: every group, and values that try to become code."""

import datetime
import textwrap

import pytest

VARIABLES = {
    "$city": "Paris",
    "count": 3,
    "$vars": {"greeting": "hello", "limits": {"max": 10}},
    "$flow": {
        "input": "What is the weather?",
        "chatHistory": [{"type": "userMessage", "message": "hi"}],
        "sessionId": "session-1",
        "workspaceId": "ws-flow",
    },
    "$form": {"email": "a@example.com"},
}


def run(runtime, workspace, code, variables=VARIABLES):
    return runtime.execute(textwrap.dedent(code).lstrip(), variables=variables, workspaceId=workspace)


def test_every_template_group_is_substituted(runtime, shared_workspace):
    body = run(
        runtime,
        shared_workspace,
        """
        result = {
            "param": "{{$city}}",
            "param_literal": {{$count}} * 2,
            "vars": "{{$vars.greeting}} world",
            "vars_nested": {{$vars.limits.max}},
            "vars_whole": {{$vars}},
            "flow": '{{$flow.sessionId}}',
            "form": "{{$form.email}}",
            "question": "{{question}}",
            "history": {{chat_history}},
            "now": "{{current_date_time}}",
            "spaced": "{{ $city }}",
        }
        """,
    )
    assert body["success"], body
    r = body["result"]
    assert r["param"] == "Paris"
    assert r["param_literal"] == 6
    assert r["vars"] == "hello world"
    assert r["vars_nested"] == 10
    assert r["vars_whole"] == {"greeting": "hello", "limits": {"max": 10}}
    assert r["flow"] == "session-1"
    assert r["form"] == "a@example.com"
    assert r["question"] == "What is the weather?"
    assert r["history"] == [{"type": "userMessage", "message": "hi"}]
    assert r["spaced"] == "Paris"
    now = datetime.datetime.fromisoformat(r["now"].replace("Z", "+00:00"))
    assert abs((datetime.datetime.now(datetime.timezone.utc) - now).total_seconds()) < 60
    assert body["warnings"] == []


def test_unknown_templates_become_none_with_a_warning(runtime, shared_workspace):
    body = run(runtime, shared_workspace, 'result = [{{$nope}}, "{{$vars.absent}}"]\n')
    assert body["success"], body
    assert body["result"] == [None, ""]
    assert any("{{$nope}}" in w for w in body["warnings"])
    assert any("{{$vars.absent}}" in w for w in body["warnings"])


def test_other_braces_are_left_alone(runtime, shared_workspace):
    body = run(runtime, shared_workspace, 'name = "x"\nresult = f"{{literal}} {name}"\n')
    assert body["result"] == "{literal} x"


INJECTIONS = [
    "\"; import os; open('pwned', 'w').write('x'); \"",
    "'; import os; open('pwned', 'w').write('x'); '",
    '""" + open("pwned", "w").write("x") + """',
    "''' + open('pwned', 'w').write('x') + '''",
    "\\\"; open('pwned','w') #",
    "{open('pwned', 'w')}",
    "x\nopen('pwned', 'w').write('x')\n",
    "\r\nimport os\r\nopen('pwned', 'w')",
    "\u2028open('pwned','w')\x00\x0c",
]

SITES = {
    "double": 'result = "{{question}}"\n',
    "single": "result = '{{question}}'\n",
    "triple": 'result = """{{question}}"""\n',
    "triple_single": "result = '''{{question}}'''\n",
    "fstring": 'result = f"{{question}}"\n',
    "fstring_field": 'result = f"{ {{question}} }"\n',
    "fstring_after_field": 'n = 1\nresult = f"{n!r:>1}{{question}}"[1:]\n',
    "fstring_raw": 'result = rf"{{question}}"\n',
    "raw": 'result = r"{{question}}"\n',
    "raw_triple": 'result = r"""{{question}}"""\n',
    "bare": "result = {{question}}\n",
    "prefixed": 'result = "Q: {{question}}!"\n',
    "after_backslash": 'result = "C:\\{{question}}"[3:]\n',
}


@pytest.mark.parametrize("site", sorted(SITES))
@pytest.mark.parametrize("payload", INJECTIONS, ids=range(len(INJECTIONS)))
def test_injection_attempts_stay_text(runtime, shared_workspace, site, payload):
    body = run(runtime, shared_workspace, SITES[site], variables={"$flow": {"input": payload}})
    assert body["success"], body
    expected = f"Q: {payload}!" if site == "prefixed" else payload
    assert body["result"] == expected
    assert body["artifacts"] == [], "the payload must not have run"


def test_injection_in_a_comment_stays_in_the_comment(runtime, shared_workspace):
    payload = "x\nopen('pwned', 'w').write('x')\nresult = 'owned'"
    body = run(runtime, shared_workspace, "# asked: {{question}}\nresult = 'safe'\n", variables={"question": payload})
    assert body["result"] == "safe"
    assert body["artifacts"] == []


def test_injection_through_a_parameter_used_as_code(runtime, shared_workspace):
    payload = "__import__('os').system('touch pwned')"
    body = run(runtime, shared_workspace, "result = {{$cmd}}\n", variables={"cmd": payload})
    assert body["result"] == payload
    assert body["artifacts"] == []


CODE_PAYLOADS = [
    "exec(chr(111)+chr(112)+chr(101)+chr(110)+chr(40)+chr(39)+chr(112)+chr(39)+chr(44)+chr(39)+chr(119)+chr(39)+chr(41))",
    "__import__('os').system('touch pwned')",
    "open(\"pwned\", \"w\")",
]


@pytest.mark.parametrize("payload", CODE_PAYLOADS, ids=range(len(CODE_PAYLOADS)))
def test_values_in_f_string_fields_stay_values(runtime, shared_workspace, payload):
    body = run(
        runtime, shared_workspace, 'result = f"<{ {{$x}} }>"\n', variables={"x": payload}
    )
    assert body["success"], body
    assert body["result"] == f"<{payload}>"
    assert body["artifacts"] == []


def test_structured_values_in_f_string_fields(runtime, shared_workspace):
    body = run(
        runtime, shared_workspace,
        'result = f"{ {{$vars}}[bytes([107]).decode()] } { len({{$list}}) }"\n',
        variables={"$vars": {"k": "v'\"{}"}, "list": [1, None, True, 2.5, {"a": []}]},
    )
    assert body["success"], body
    assert body["result"] == "v'\"{} 5"


def test_strings_nested_in_f_string_fields_refuse_unsafe_values(runtime, shared_workspace):
    code = "result = f\"{'{{question}}'.upper()}\"\n"
    safe = run(runtime, shared_workspace, code, variables={"question": "hello world"})
    assert safe["result"] == "HELLO WORLD"
    unsafe = run(runtime, shared_workspace, code, variables={"question": "'+open('pwned','w').name+'"})
    assert unsafe["success"], unsafe
    assert unsafe["result"] == ""
    assert unsafe["artifacts"] == []
    assert any("f-string" in w for w in unsafe["warnings"])


def test_a_value_cannot_complete_broken_code(runtime, shared_workspace):
    # The author forgot a quote; a crafted value must not turn that into running code.
    payload = "\"+str(open('pwned','w'))+\""
    body = run(runtime, shared_workspace, 'x = "abc{{question}}\nresult = 1\n', variables={"question": payload})
    assert body["success"] is False
    assert body["error"]["type"] == "SyntaxError"
    assert body["artifacts"] == []
    assert any("does not parse" in w for w in body["warnings"])
