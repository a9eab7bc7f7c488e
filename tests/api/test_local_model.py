"""The embedded model answering through the real server: JSON and streaming,
deterministic with greedy decoding, no provider key and no network."""

import os
from pathlib import Path

import pytest

import flows
from weir_harness import ROOT, Api

MODELS = Path(os.environ.get("WEIR_MODELS_DIR", ROOT / "data" / "models"))

pytestmark = pytest.mark.skipif(not (MODELS / "smollm2").is_dir(),
                                reason=f"no embedded model in {MODELS}: run scripts/fetch-models")


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    from weir_harness import Weir
    w = Weir(tmp_path_factory.mktemp("weir-local"), "sqlite")
    w.env["WEIR_MODELS_DIR"] = str(MODELS)
    w.start()
    yield Api(w.url, w.create_key())
    w.cleanup()


def demo_flow(api, **model_inputs):
    flow = flows.conversation(flows.local_model(**model_inputs), flows.buffer_memory(), system="Answer briefly.")
    return api.post("/chatflows", json={"name": "local", "flowData": flow}).json()["id"]


QUESTION = "What is the capital of France? Answer in one sentence."


def test_answers_in_json_deterministically(local):
    flow = demo_flow(local, maxTokens=24)
    first = local.post(f"/prediction/{flow}", json={"question": QUESTION, "chatId": "a"})
    assert first.status_code == 200, first.text
    assert "Paris" in first.json()["text"]
    again = local.post(f"/prediction/{flow}", json={"question": QUESTION, "chatId": "b"})
    assert again.json()["text"] == first.json()["text"], "greedy decoding is deterministic"


def test_streams_the_same_answer(local):
    import json
    flow = demo_flow(local, maxTokens=24)
    text = local.post(f"/prediction/{flow}", json={"question": QUESTION}).json()["text"]
    r = local.post(f"/prediction/{flow}", json={"question": QUESTION, "streaming": True}, stream=True)
    events = [json.loads(line[5:]) for line in r.iter_lines(decode_unicode=True) if line.startswith("data:")]
    tokens = [e["data"] for e in events if e["event"] == "token"]
    assert len(tokens) > 3 and "".join(tokens) == text
    assert [e["event"] for e in events][-2:] == ["metadata", "end"]


def test_max_tokens_and_seeded_sampling(local):
    flow = demo_flow(local, maxTokens=3)
    short = local.post(f"/prediction/{flow}", json={"question": "Tell me a long story."}).json()["text"]
    assert 0 < len(short.split()) <= 4
    flow = demo_flow(local, maxTokens=16, temperature=0.9, seed=7)
    a = local.post(f"/prediction/{flow}", json={"question": "Say something."}).json()["text"]
    b = local.post(f"/prediction/{flow}", json={"question": "Say something."}).json()["text"]
    assert a == b and a


def test_missing_model_is_a_clear_error(make_weir, tmp_path):
    w = make_weir()
    w.env["WEIR_MODELS_DIR"] = str(tmp_path / "none")
    w.start()
    api = Api(w.url, w.create_key())
    flow = demo_flow(api)
    r = api.post(f"/prediction/{flow}", json={"question": "hi"})
    assert r.status_code == 500
    assert "chatLocal_0" in r.json()["message"] and "fetch-models" in r.json()["message"]
