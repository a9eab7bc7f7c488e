"""Artifacts: files written by tool code, save_image_artifact, and the download endpoint."""

import http.client
import json
import os
import textwrap
from urllib.parse import urlsplit

import pytest
import requests

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fetch(runtime, url: str) -> requests.Response:
    return runtime.get(url)


def test_written_files_become_artifacts(runtime, workspace):
    body = runtime.execute(
        textwrap.dedent(
            """
            import json, os
            with open("table.csv", "w") as f:
                f.write("a,b\\n1,2\\n")
            os.makedirs("out", exist_ok=True)
            with open("out/data.json", "w") as f:
                json.dump({"k": 1}, f)
            with open("page.html", "w") as f:
                f.write("<h1>hi</h1>")
            result = "written"
            """
        ),
        workspaceId=workspace,
    )
    assert body["success"], body
    by_name = {a["filename"]: a for a in body["artifacts"]}
    assert set(by_name) == {"table.csv", "data.json", "page.html"}
    csv = by_name["table.csv"]
    assert csv["mimeType"] == "text/csv"
    assert csv["size"] == 8
    assert csv["url"] == f"/tools/artifacts/{workspace}/table.csv"
    response = fetch(runtime, csv["url"])
    assert response.status_code == 200
    assert response.content == b"a,b\n1,2\n"
    assert response.headers["content-type"].startswith("text/csv")
    page = fetch(runtime, by_name["page.html"]["url"])
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == "sandbox"
    assert fetch(runtime, by_name["data.json"]["url"]).json() == {"k": 1}


def test_artifact_names_never_collide(runtime, workspace):
    code = "open('report.txt', 'w').write('run')\nresult = 1\n"
    names = [runtime.execute(code, workspaceId=workspace)["artifacts"][0]["filename"] for _ in range(3)]
    assert names == ["report.txt", "report-1.txt", "report-2.txt"]


def test_artifacts_are_isolated_per_workspace(runtime, workspace):
    body = runtime.execute("open('secret.txt', 'w').write('mine')\n", workspaceId=workspace)
    assert body["artifacts"][0]["filename"] == "secret.txt"
    assert fetch(runtime, f"/tools/artifacts/{workspace}/secret.txt").status_code == 200
    other = fetch(runtime, "/tools/artifacts/someone-else/secret.txt")
    assert other.status_code == 404
    assert "message" in other.json()


def test_save_image_artifact_with_matplotlib(runtime, plot_workspace):
    body = runtime.execute(
        textwrap.dedent(
            """
            import matplotlib.pyplot as plt
            from weir_runtime import save_image_artifact

            def main(points):
                fig, ax = plt.subplots()
                ax.plot(range(len(points)), points)
                first = save_image_artifact(fig, "chart.png")
                second = save_image_artifact(fig, "chart-again")  # extension added
                raw = save_image_artifact(b"plain bytes", "blob.bin")
                return [first, second, raw, plt.get_backend()]
            """
        ),
        variables={"points": [1, 4, 9, 16]},
        workspaceId=plot_workspace,
        timeout=120,
    )
    assert body["success"], body
    assert body["result"][:3] == ["chart.png", "chart-again.png", "blob.bin"]
    assert body["result"][3].lower() == "agg"
    pngs = [a for a in body["artifacts"] if a["mimeType"] == "image/png"]
    assert len(pngs) == 2
    for artifact in pngs:
        image = fetch(runtime, artifact["url"])
        assert image.status_code == 200
        assert image.content.startswith(PNG_MAGIC)
        assert image.headers["content-type"] == "image/png"


def test_save_image_artifact_is_available_without_import(runtime, shared_workspace):
    body = runtime.execute(
        "name = save_image_artifact(b'\\x89PNG fake', 'x.png')\nresult = name\n",
        workspaceId=shared_workspace,
    )
    assert body["success"], body
    assert body["artifacts"][0]["filename"].startswith("x")


def test_save_image_artifact_refuses_paths(runtime, shared_workspace):
    body = runtime.execute(
        "from weir_runtime import save_image_artifact\nsave_image_artifact(b'x', '../escape.png')\n",
        workspaceId=shared_workspace,
    )
    assert body["success"] is False
    assert body["error"]["type"] == "ValueError"


@pytest.mark.parametrize(
    "path, status",
    [
        ("/tools/artifacts/{ws}/..%2F..%2Fvenvs%2F{ws}%2Fpyvenv.cfg", 400),
        ("/tools/artifacts/{ws}/%2e%2e", 400),
        ("/tools/artifacts/{ws}/..", 400),
        ("/tools/artifacts/{ws}/a%00b", 400),
        ("/tools/artifacts/{ws}/..%5Csecret.txt", 400),
        ("/tools/artifacts/{ws}/%2Fetc%2Fpasswd", 400),
        ("/tools/artifacts/..%2F..%2Fetc/passwd", 400),
        ("/tools/artifacts/.runs/anything", 400),
        ("/tools/artifacts/{ws}/link.txt", 400),
        ("/tools/artifacts/{ws}/%FF%FE", 400),
        ("/tools/artifacts/{ws}/absent.txt", 404),
        ("/tools/artifacts/{ws}/subdir", 404),
    ],
)
def test_artifact_paths_cannot_escape(runtime, path, status):
    ws = "traversal"
    directory = runtime.artifacts / ws
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "subdir").mkdir(exist_ok=True)
    link = directory / "link.txt"
    if not link.is_symlink():
        os.symlink("/etc/hostname", link)
    # Sent byte for byte: HTTP clients would normalise `..` away before the server sees it.
    address = urlsplit(runtime.url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    connection.request("GET", path.format(ws=ws), headers=runtime.headers)
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    assert response.status == status, text
    assert "message" in json.loads(text)


def test_save_image_artifact_with_a_pil_image(runtime, plot_workspace):
    # pillow comes with matplotlib; `PIL` maps to the `pillow` distribution.
    body = runtime.execute(
        "from PIL import Image\nfrom weir_runtime import save_image_artifact\n"
        "result = save_image_artifact(Image.new('RGB', (4, 3), 'red'), 'red.png')\n",
        workspaceId=plot_workspace,
    )
    assert body["success"], body
    assert body["installedPackages"] == []
    image = fetch(runtime, body["artifacts"][0]["url"])
    assert image.content.startswith(PNG_MAGIC)


def test_a_workspace_keeps_artifacts_up_to_its_quota(start_runtime):
    small = start_runtime({"PY_TOOL_WORKSPACE_QUOTA": "1M"})
    code = "open('blob.bin', 'wb').write(b'x' * (700 << 10))\nresult = 1"
    first = small.execute(code, workspaceId="quota-a")
    assert [a["filename"] for a in first["artifacts"]] == ["blob.bin"]
    second = small.execute(code, workspaceId="quota-a")
    assert second["success"] and second["artifacts"] == [], second
    assert any("PY_TOOL_WORKSPACE_QUOTA" in w for w in second["warnings"]), second["warnings"]
    other = small.execute(code, workspaceId="quota-b")
    assert len(other["artifacts"]) == 1, "each workspace has a quota of its own"


def test_artifacts_expire_after_their_ttl(start_runtime):
    import time

    brief = start_runtime({"PY_TOOL_ARTIFACT_TTL": "2"})
    body = brief.execute("open('note.txt', 'w').write('soon gone')\nresult = 1", workspaceId="ttl")
    (artifact,) = body["artifacts"]
    assert brief.get(artifact["url"]).text == "soon gone"
    deadline = time.monotonic() + 10
    while brief.get(artifact["url"]).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert brief.get(artifact["url"]).status_code == 404
