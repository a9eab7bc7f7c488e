"""Import detection, the import → distribution table, requirements, install-packages.

These install real (small) packages from the package registry into fresh workspaces.
"""

import concurrent.futures


def installed_names(body) -> set[str]:
    return {spec.split("==")[0] for spec in body["installedPackages"]}


def test_imports_are_detected_and_installed_once(runtime, workspace):
    code = "import six\nfrom six.moves import range as r\nresult = six.__name__\n"
    first = runtime.execute(code, workspaceId=workspace)
    assert first["success"], first
    assert first["result"] == "six"
    assert installed_names(first) == {"six"}
    second = runtime.execute(code, workspaceId=workspace)
    assert second["success"], second
    assert second["installedPackages"] == [], "the venv persists between executions"


def test_stdlib_and_relative_imports_install_nothing(runtime, workspace):
    body = runtime.execute(
        "import os, json, sys, asyncio\nfrom collections import OrderedDict\n"
        "try:\n    from . import sibling\nexcept ImportError:\n    pass\nresult = 'ok'\n",
        workspaceId=workspace,
    )
    assert body["success"], body
    assert body["installedPackages"] == []


def test_mapping_table_installs_the_right_distribution(runtime, workspace):
    body = runtime.execute(
        "import yaml\nresult = yaml.safe_dump({'a': 1}).strip()\n", workspaceId=workspace
    )
    assert body["success"], body
    assert body["result"] == "a: 1"
    assert "pyyaml" in installed_names(body)


def test_requirements_with_a_version_constraint_take_precedence(runtime, workspace):
    body = runtime.execute(
        "import six\nresult = six.__version__\n",
        requirements=["six==1.16.0"],
        workspaceId=workspace,
    )
    assert body["success"], body
    assert body["result"] == "1.16.0"
    assert body["installedPackages"] == ["six==1.16.0"]
    # A later constraint moves the installed version.
    body = runtime.execute(
        "import six\nresult = six.__version__\n",
        requirements=["six>=1.17"],
        workspaceId=workspace,
    )
    assert body["success"], body
    assert body["result"] != "1.16.0"
    assert installed_names(body) == {"six"}


def test_a_package_that_does_not_exist_is_a_400(runtime, workspace):
    response = runtime.post(
        "/tools/execute-python",
        {"code": "import weir_no_such_package_xyz\n", "workspaceId": workspace},
    )
    assert response.status_code == 400, response.text
    assert "weir-no-such-package-xyz" in response.json()["message"].lower().replace("_", "-")


def test_install_packages_reports_installed_and_already_satisfied(runtime, workspace):
    first = runtime.post("/tools/install-packages", {"packages": ["six"], "workspace_id": workspace})
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["success"] is True
    assert [p.split("==")[0] for p in body["installed"]] == ["six"]
    assert body["alreadySatisfied"] == []
    again = runtime.post("/tools/install-packages", {"packages": ["six"], "workspace_id": workspace}).json()
    assert again["installed"] == []
    assert again["alreadySatisfied"] == ["six"]
    # Code in that workspace sees it without installing anything.
    run = runtime.execute("import six\nresult = 1\n", workspaceId=workspace)
    assert run["installedPackages"] == []


def test_install_packages_validates_its_input(runtime, workspace):
    missing = runtime.post("/tools/install-packages", {"workspace_id": workspace})
    assert missing.status_code == 412 and "packages" in missing.json()["message"]
    option = runtime.post("/tools/install-packages", {"packages": ["-e", "."], "workspace_id": workspace})
    assert option.status_code == 400
    bad_ws = runtime.post("/tools/install-packages", {"packages": ["six"], "workspace_id": "a/b"})
    assert bad_ws.status_code == 400
    unknown = runtime.post(
        "/tools/install-packages", {"packages": ["weir-no-such-package-xyz"], "workspace_id": workspace}
    )
    assert unknown.status_code == 400
    assert "weir-no-such-package-xyz" in unknown.json()["message"]


def test_concurrent_runs_in_one_workspace(runtime, workspace):
    code = "import six, time\ndef main(n):\n    time.sleep(0.5)\n    return n * n\n"

    def one(n):
        return runtime.execute(code, variables={"n": n}, workspaceId=workspace)

    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        bodies = list(pool.map(one, range(6)))
    assert [b["result"] for b in bodies] == [n * n for n in range(6)]
    assert all(b["success"] for b in bodies), bodies
    # Exactly one of them installed six; the others found it installed.
    assert sum(1 for b in bodies if b["installedPackages"]) == 1


def test_without_uv_venvs_and_installs_fall_back_to_pip(start_runtime):
    # A PATH with the system's python3 first, too: the binary still runs its own CPython.
    fallback = start_runtime({"PY_TOOL_UV": "none", "PATH": "/usr/bin:/bin"})
    health = fallback.get("/tools/health").json()
    assert health["uv"]["available"] is False
    assert "pip" in health["uv"]["fallback"]
    body = fallback.execute("import six, sys\nresult = [six.__name__, sys.version_info[:2]]\n", workspaceId="pip")
    assert body["success"], body
    assert body["result"][0] == "six"
    assert [p.split("==")[0] for p in body["installedPackages"]] == ["six"]
    unknown = fallback.post("/tools/install-packages", {"packages": ["weir-no-such-package-xyz"], "workspace_id": "pip"})
    assert unknown.status_code == 400


def test_optional_imports_guarded_by_import_error_are_not_installed(runtime, workspace):
    body = runtime.execute(
        "try:\n    import weir_no_such_package_xyz as fast\nexcept ImportError:\n    fast = None\n"
        "result = fast is None\n",
        workspaceId=workspace,
    )
    assert body["success"], body
    assert body["result"] is True
    assert body["installedPackages"] == []
