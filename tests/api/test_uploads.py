"""Files attached to a prediction (multipart `files`): kept on the server's disk
only for a flow that takes them (a vector store with `fileUpload`), within the
workspace's WORKSPACE_UPLOAD_QUOTA (a 413 naming it beyond, with nothing of the
question kept or indexed), removed with their chat, with their chatflow, and after
UPLOAD_TTL_DAYS by a sweeper. A flow that takes no files writes nothing, so
anonymous callers of a public chatflow cannot fill the disk."""

import os
import time

import pytest
import requests

import flows
from fakes import FakeProviders
from prediction_client import create_flow
from weir_harness import Api, assert_error, backends

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def files_under(path):
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []


def file_flow(fake):
    return flows.chat_files_qa(fake.url)


def attach(url, flow, chat, *files, key=None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return requests.post(f"{url}/api/v1/prediction/{flow}", data={"question": "What do you know?", "chatId": chat},
                         files=[("files", (name, body, "text/plain")) for name, body in files],
                         headers=headers, timeout=60)


def test_anonymous_uploads_to_a_flow_without_files_leave_nothing(server, api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)), isPublic=True)
    for i in range(5):
        r = attach(api.url, flow, f"anon-{i}", ("big.bin", b"x" * (5 * MIB)))
        assert r.status_code == 200, r.text
    assert [p for p in files_under(server.data_dir / "uploads") if flow in str(p)] == []


@pytest.mark.parametrize("backend", backends())
def test_kept_files_have_a_quota_and_go_with_their_chat_flow_and_age(make_weir, fake, backend):
    w = make_weir(backend)
    w.env["WORKSPACE_UPLOAD_QUOTA"] = str(MIB)
    w.start()
    api = Api(w.url, w.create_key(workspace="uploads"))
    flow = create_flow(api, file_flow(fake))
    assert api.post(f"/vector/upsert/{flow}", json={}).status_code == 200
    workspace = api.get(f"/chatflows/{flow}").json()["workspaceId"]
    kept = w.data_dir / "uploads" / workspace / flow

    fact = b"The locker code for floor nine is 4471."
    assert attach(w.url, flow, "chat-a", ("lockers.txt", fact), key=api.key).status_code == 200
    [one] = files_under(kept / "chat-a")
    assert one.read_bytes() == fact and one.name.endswith("-lockers.txt")

    # Over the quota: a 413 naming it, nothing written, nothing indexed.
    big = b"The vault opens at dawn. " * (MIB // 25)
    r = attach(w.url, flow, "chat-b", ("vault.txt", big), key=api.key)
    assert_error(r, 413, "WORKSPACE_UPLOAD_QUOTA")
    assert files_under(kept / "chat-b") == []
    history = api.get(f"/upsert-history/{flow}").json()
    assert [h["numAdded"] for h in history] == [1, 1]

    # Deleting a chat's messages removes its files.
    assert attach(w.url, flow, "chat-c", ("c.txt", b"c"), key=api.key).status_code == 200
    assert api.delete(f"/chatmessage/{flow}", params={"chatId": "chat-a"}).status_code == 200
    assert files_under(kept / "chat-a") == []
    [old] = files_under(kept / "chat-c")

    # Files older than UPLOAD_TTL_DAYS go at the sweeper's next pass (one at start).
    long_ago = time.time() - 31 * 86400
    os.utime(old, (long_ago, long_ago))
    w.stop()
    api = Api(w.start().url, api.key)
    deadline = time.monotonic() + 10
    while old.exists():
        assert time.monotonic() < deadline, "the expired upload was not swept"
        time.sleep(0.1)
    assert "expired uploaded files removed" in w.logs()

    # Deleting the chatflow removes every chat's files.
    assert attach(w.url, flow, "chat-d", ("d.txt", b"d"), key=api.key).status_code == 200
    assert len(files_under(kept)) == 1
    assert api.delete(f"/chatflows/{flow}").status_code == 204
    assert not kept.exists()
