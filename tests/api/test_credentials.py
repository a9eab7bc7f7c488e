"""Credentials (`/api/v1/credentials`, Flowise's shape) and where provider keys may go.

A credential's fields are write-only: reads name the fields that are set, each
valued with Flowise's redaction marker. They are sealed at rest (AES-256-GCM under
WEIR_SECRET_KEY or a generated key file) and opened only for the runs whose nodes
name them (`data.credential`, the `FLOWISE_CREDENTIAL_ID` input, or inside an
agentflow node's model config). A server's own provider keys (OPENAI_API_KEY, ...)
go only to that provider's host, the server's own base settings, or the hosts in
PROVIDER_KEY_HOSTS — never where a flow author points a node. A credential goes to
its provider's host, the hosts on the credential itself (`allowedHosts`, set only
with credentials:write) and PROVIDER_KEY_HOSTS; a flow naming one is saved only by a
key holding credentials:read, and refused at save and at run when a node points the
credential anywhere else."""

import base64
import json
import os
import stat
import uuid

import pytest

import flows
from fakes import GOOD_KEY, FakeProviders
from prediction_client import ask, create_flow, nonce, predict
from weir_harness import Api, Weir, assert_error, backends

REDACTED = "_FLOWISE_BLANK_07167752-1a71-43b1-bf8f-4f32252165db"
SECRET = "sk-never-shown-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module", params=backends())
def keyed(request, fake, tmp_path_factory):
    """A server holding every provider's key in its environment."""
    w = Weir(tmp_path_factory.mktemp(f"weir-cred-{request.param}"), request.param)
    w.env.update(OPENAI_API_KEY=GOOD_KEY, ANTHROPIC_API_KEY=GOOD_KEY, MISTRAL_API_KEY=GOOD_KEY,
                 AZURE_OPENAI_API_KEY=GOOD_KEY, GROQ_API_KEY=GOOD_KEY)
    w.start()
    yield w
    w.cleanup()


@pytest.fixture
def api(keyed) -> Api:
    return Api(keyed.url, keyed.create_key(workspace=f"ws-{nonce()}"))


def create_credential(api, key=GOOD_KEY, kind="openAIApi", field="openAIApiKey", allowed_hosts=("127.0.0.1",),
                      **more) -> dict:
    """A credential the fake providers (on loopback) may receive unless `allowed_hosts` says otherwise."""
    r = api.post("/credentials", json={"name": "My key", "credentialName": kind,
                                       "plainDataObj": {field: key, **more}, "allowedHosts": list(allowed_hosts)})
    assert r.status_code == 201, r.text
    return r.json()


def keyless_openai(fake, credential=None, how="data"):
    """chatOpenAI on the fake without a key of its own; naming `credential` as
    Flowise's editor does (`data.credential`) or as its inputs do."""
    model = flows.openai_model(fake.url, key="")
    if credential and how == "data":
        model["data"]["credential"] = credential
    elif credential:
        model["data"]["inputs"]["FLOWISE_CREDENTIAL_ID"] = credential
    return flows.conversation(model)


def test_fields_are_write_only(api):
    created = create_credential(api, key=SECRET, kind="openAIApi", field="openAIApiKey")
    assert SECRET not in json.dumps(created)
    assert {k: created[k] for k in ("name", "credentialName", "plainDataObj", "allowedHosts")} == {
        "name": "My key", "credentialName": "openAIApi", "plainDataObj": {"openAIApiKey": REDACTED},
        "allowedHosts": ["127.0.0.1"]}
    assert created["createdDate"].endswith("Z") and uuid.UUID(created["id"])
    one = api.get(f"/credentials/{created['id']}")
    assert one.status_code == 200 and SECRET not in one.text
    assert one.json() == created
    other = create_credential(api, kind="anthropicApi", field="anthropicApiKey")
    listed = api.get("/credentials")
    assert listed.headers["x-total-count"] == "2" and SECRET not in listed.text
    assert [c["name"] for c in listed.json()] == ["My key", "My key"]
    assert all("plainDataObj" not in c for c in listed.json())
    only = api.get("/credentials", params={"credentialName": "anthropicApi"}).json()
    assert [c["id"] for c in only] == [other["id"]]

    # The editor sends the marker back for fields it did not change.
    updated = api.put(f"/credentials/{created['id']}", json={
        "name": "Renamed", "plainDataObj": {"openAIApiKey": REDACTED, "organization": "org-1"}})
    assert updated.status_code == 200, updated.text
    assert updated.json()["name"] == "Renamed"
    assert updated.json()["plainDataObj"] == {"openAIApiKey": REDACTED, "organization": REDACTED}
    removed = api.put(f"/credentials/{created['id']}", json={"plainDataObj": {"organization": None}})
    assert removed.json()["plainDataObj"] == {"openAIApiKey": REDACTED}

    assert api.delete(f"/credentials/{created['id']}").status_code == 204
    assert_error(api.get(f"/credentials/{created['id']}"), 404, "credential")
    assert_error(api.delete(f"/credentials/{created['id']}"), 404)


def test_bad_writes_are_refused_and_change_nothing(api):
    assert_error(api.post("/credentials", json={"credentialName": "openAIApi"}), 412, "name")
    assert_error(api.post("/credentials", json={"name": "x"}), 412, "credentialName")
    assert_error(api.post("/credentials", json={"name": "x", "credentialName": "open ai"}), 400, "credentialName")
    assert_error(api.post("/credentials", json={"name": " ", "credentialName": "openAIApi"}), 400, "name")
    assert_error(api.post("/credentials", json={"name": "x", "credentialName": "openAIApi",
                                                "plainDataObj": {"k": {"nested": 1}}}), 400, "plainDataObj.k")
    assert_error(api.post("/credentials", json={"name": "x", "credentialName": "openAIApi",
                                                "plainDataObj": {"k": REDACTED}}), 400, "redaction")
    assert_error(api.post("/credentials", json={"name": "x", "credentialName": "openAIApi",
                                                "plainDataObj": {"k": "v" * 70_000}}), 400, "KiB")
    assert_error(api.post("/credentials", json={"name": "x", "credentialName": "openAIApi",
                                                "plainDataObj": "sk-1"}), 400)
    assert_error(api.post("/credentials", json={"name": "x", "credentialName": "openAIApi",
                                                "allowedHosts": ["https://gateway.example/v1"]}), 400, "allowedHosts")
    assert api.get("/credentials").json() == []
    created = create_credential(api)
    assert_error(api.put(f"/credentials/{created['id']}", json={"plainDataObj": {"other": REDACTED}}), 400)
    assert_error(api.put(f"/credentials/{uuid.uuid4()}", json={"name": "y"}), 404, "credential")
    assert_error(api.get("/credentials/not-a-uuid"), 400)
    assert api.get(f"/credentials/{created['id']}").json() == created


def test_permissions_and_workspaces(keyed, api):
    created = create_credential(api)
    flows_only = api.with_key(keyed.create_key("chatflows:read", workspace="cred-perm"))
    assert_error(flows_only.get("/credentials"), 403, "credentials:read")
    reader = api.with_key(keyed.create_key("credentials:read", workspace="cred-perm"))
    assert reader.get("/credentials").status_code == 200
    assert_error(reader.post("/credentials", json={"name": "x", "credentialName": "openAIApi"}),
                 403, "credentials:write")
    # Another workspace neither sees nor uses it.
    elsewhere = api.with_key(keyed.create_key(workspace=f"cred-other-{nonce()}"))
    assert_error(elsewhere.get(f"/credentials/{created['id']}"), 404)
    assert_error(elsewhere.delete(f"/credentials/{created['id']}"), 404)
    assert elsewhere.get("/credentials").json() == []


def test_a_node_uses_its_credential(keyed, api, fake):
    cred = create_credential(api)
    for how in ("data", "inputs"):
        flow = create_flow(api, keyless_openai(fake, cred["id"], how))
        question = f"with a credential {nonce()}"
        assert ask(api, flow, question)["text"] == f"Echo: {question}"
        _, headers, _ = fake.last_request("/chat/completions")
        assert headers["authorization"] == f"Bearer {GOOD_KEY}"

    # A changed key is used from the next question on.
    flow = create_flow(api, keyless_openai(fake, cred["id"]))
    api.put(f"/credentials/{cred['id']}", json={"plainDataObj": {"openAIApiKey": "sk-wrong"}})
    r = predict(api, flow, "wrong key now")
    assert r.status_code >= 400 and "sk-wrong" not in r.text
    assert fake.last_request("/chat/completions")[1]["authorization"] == "Bearer sk-wrong"
    api.put(f"/credentials/{cred['id']}", json={"plainDataObj": {"openAIApiKey": GOOD_KEY}})
    assert ask(api, flow, "right again")["text"] == "Echo: right again"

    # The node's own input wins over its credential's field, as in Flowise.
    own = flows.openai_model(fake.url, key="sk-own")
    own["data"]["credential"] = cred["id"]
    predict(api, create_flow(api, flows.conversation(own)), "own key")
    assert fake.last_request("/chat/completions")[1]["authorization"] == "Bearer sk-own"

    # A credential that is gone, or another workspace's, is a 400 naming it; nothing is sent.
    before = fake.count("/chat/completions")
    api.delete(f"/credentials/{cred['id']}")
    assert_error(predict(api, flow, "gone"), 400, cred["id"])
    theirs = create_credential(api.with_key(keyed.create_key(workspace=f"cred-theirs-{nonce()}")))
    assert_error(predict(api, create_flow(api, keyless_openai(fake, theirs["id"])), "theirs"), 400, theirs["id"])
    assert_error(predict(api, create_flow(api, keyless_openai(fake, "not-an-id")), "bad"), 400, "not-an-id")
    assert fake.count("/chat/completions") == before


def test_agentflow_model_config_names_its_credential(api, fake):
    cred = create_credential(api)
    model = flows.af_model("llmModel", flows.node("chatOpenAI_0", "chatOpenAI", {
        "modelName": "gpt-test", "basePath": f"{fake.url}/v1", "FLOWISE_CREDENTIAL_ID": cred["id"],
        "credential": cred["id"]}))
    flow = flows.agentflow([flows.af_start(), flows.af_llm("llmAgentflow_0", model)],
                           [("startAgentflow_0", "llmAgentflow_0")])
    flow_id = create_flow(api, flow, type="AGENTFLOW")
    question = f"agentflow credential {nonce()}"
    assert ask(api, flow_id, question)["text"] == f"Echo: {question}"
    assert fake.last_request("/chat/completions")[1]["authorization"] == f"Bearer {GOOD_KEY}"


def test_a_groq_model_speaks_openais_wire_with_its_groq_credential(api, fake):
    # The server's GROQ_API_KEY never goes to the fake's host: the credential's key does.
    cred = create_credential(api, kind="groqApi", field="groqApiKey")
    groq = flows.node("groqChat_0", "groqChat", {"modelName": "llama-3.3-70b-versatile", "temperature": 0.2,
                                                 "maxTokens": 64, "basePath": f"{fake.url}/v1", "streaming": True})
    groq["data"]["credential"] = cred["id"]
    question = f"groq {nonce()}"
    assert ask(api, create_flow(api, flows.conversation(groq)), question)["text"] == f"Echo: {question}"
    _, headers, body = fake.last_request("/chat/completions")
    assert headers["authorization"] == f"Bearer {GOOD_KEY}"
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("llama-3.3-70b-versatile", 0.2, 64)


def test_server_keys_never_follow_a_node_elsewhere(api, fake):
    """The server holds every provider's key; nodes pointed at another host (the fake)
    without keys of their own are refused before anything is sent."""
    before = fake.count("/chat/completions") + fake.count("/v1/messages")
    mistral = flows.node("chatMistralAI_0", "chatMistralAI", {"modelName": "m", "overrideEndpoint": f"{fake.url}/v1"})
    azure = flows.node("azureChatOpenAI_0", "azureChatOpenAI", {
        "modelName": "gpt-4o", "azureOpenAIApiDeploymentName": "d", "basePath": f"{fake.url}/openai/deployments/d"})
    groq = flows.node("groqChat_0", "groqChat", {"modelName": "llama", "basePath": f"{fake.url}/v1"})
    for model, env in ((flows.openai_model(fake.url, key=""), "OPENAI_API_KEY"),
                       (flows.anthropic_model(fake.url, key=""), "ANTHROPIC_API_KEY"),
                       (mistral, "MISTRAL_API_KEY"), (azure, "AZURE_OPENAI_API_KEY"), (groq, "GROQ_API_KEY")):
        body = assert_error(predict(api, create_flow(api, flows.conversation(model)), "hi"), 400, env)
        assert "PROVIDER_KEY_HOSTS" in body["message"] and GOOD_KEY not in body["message"]
    # Nor through an override the chatflow allows.
    allowing = create_flow(api, flows.conversation(flows.openai_model("https://api.openai.com", key="")),
                           apiConfig=json.dumps({"overrideConfig": {"allow": ["basePath"]}}))
    assert_error(predict(api, allowing, "hi", overrideConfig={"basePath": f"{fake.url}/v1"}), 400, "OPENAI_API_KEY")
    assert fake.count("/chat/completions") + fake.count("/v1/messages") == before


def test_provider_key_hosts_lets_the_operator_trust_a_host(make_weir, fake):
    w = make_weir()
    w.env.update(OPENAI_API_KEY=GOOD_KEY, PROVIDER_KEY_HOSTS=f" other.example , {fake.url.split('//')[1]} ")
    w.start()
    api = Api(w.url, w.create_key())
    question = f"trusted host {nonce()}"
    assert ask(api, create_flow(api, keyless_openai(fake)), question)["text"] == f"Echo: {question}"
    assert fake.last_request("/chat/completions")[1]["authorization"] == f"Bearer {GOOD_KEY}"
    # A node naming a credential uses that credential's fields, never the server's key;
    # PROVIDER_KEY_HOSTS lets it reach the operator's host without allowedHosts.
    cred = create_credential(api, key="sk-from-credential", allowed_hosts=())
    predict(api, create_flow(api, keyless_openai(fake, cred["id"])), "credential first")
    assert fake.last_request("/chat/completions")[1]["authorization"] == "Bearer sk-from-credential"


def test_sealed_at_rest_with_a_private_key_file(make_weir, fake):
    w = make_weir()
    w.start()
    api = Api(w.url, w.create_key())
    cred = create_credential(api, key=SECRET)
    key_file = w.data_dir / "secret.key"
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    w.stop()
    stored = b"".join(p.read_bytes() for p in w.data_dir.glob("weir.db*"))
    assert SECRET.encode() not in stored and cred["id"].encode() in stored
    assert SECRET not in w.logs()
    # The key file is kept: after a restart the credential still opens.
    w.start()
    api = Api(w.url, api.key)
    question = f"after restart {nonce()}"
    predict(api, create_flow(api, keyless_openai(fake, cred["id"])), question)
    assert fake.last_request("/chat/completions")[1]["authorization"] == f"Bearer {SECRET}"


def test_rotating_the_secret_key(make_weir, fake):
    old, new = "ab" * 32, base64.b64encode(b"n" * 32).decode()
    w = make_weir()
    w.env["WEIR_SECRET_KEY"] = old
    w.start()
    api = Api(w.url, w.create_key())
    cred = create_credential(api)
    flow = create_flow(api, keyless_openai(fake, cred["id"]))
    w.stop()

    # A new key without the old one: the credential cannot be opened, and says so in the log.
    w.env["WEIR_SECRET_KEY"] = new
    api = Api(w.start().url, api.key)
    assert_error(predict(api, flow, "cannot open"), 500)
    assert "WEIR_SECRET_KEY_PREVIOUS" in w.logs()
    w.stop()

    # With the old one as previous, every credential is resealed at start...
    w.env["WEIR_SECRET_KEY_PREVIOUS"] = old
    api = Api(w.start().url, api.key)
    assert "resealed credentials" in w.logs()
    assert ask(api, flow, "rotated")["text"] == "Echo: rotated"
    w.stop()
    # ...so the old key can then go.
    del w.env["WEIR_SECRET_KEY_PREVIOUS"]
    api = Api(w.start().url, api.key)
    assert ask(api, flow, "old key gone")["text"] == "Echo: old key gone"

    # A malformed key stops the server at start with one clear line.
    w.stop()
    w.env["WEIR_SECRET_KEY"] = "too-short"
    with pytest.raises(AssertionError, match="WEIR_SECRET_KEY"):
        w.start()


def openai_to(base, credential):
    model = flows.openai_model(base, key="")
    model["data"]["credential"] = credential
    return flows.conversation(model)


def test_a_credential_goes_only_where_it_may(keyed, api, fake):
    """A flow author with a key of their own in the workspace tries to have a stored
    credential sent to a server they run (a loopback recorder): refused at save and
    at run, and the recorder never sees a request."""
    recorder = FakeProviders()
    try:
        here = recorder.url.split("//")[1]
        cred = create_credential(api, allowed_hosts=[fake.url.split("//")[1]])
        workspace = api.get("/apikey").json()[0]["workspace"]
        author = api.with_key(keyed.create_key("chatflows:read", "chatflows:write", "predictions:create",
                                               workspace=workspace))
        # Naming a stored credential needs a key that may see credentials.
        assert_error(author.post("/chatflows", json={"name": "f", "flowData": openai_to(fake.url, cred["id"])}),
                     403, "credentials:read")
        author = api.with_key(keyed.create_key("chatflows:read", "chatflows:write", "predictions:create",
                                               "credentials:read", workspace=workspace))
        # Pointed at the recorder: refused at save, naming the rule.
        body = assert_error(author.post("/chatflows", json={"name": "f", "flowData": openai_to(recorder.url, cred["id"])}),
                            400, "allowedHosts")
        assert here in body["message"] and GOOD_KEY not in body["message"]
        # Inside an agentflow node's model config too.
        model = flows.af_model("llmModel", flows.node("chatOpenAI_0", "chatOpenAI", {
            "modelName": "gpt-test", "basePath": f"{recorder.url}/v1", "FLOWISE_CREDENTIAL_ID": cred["id"]}))
        agentflow = flows.agentflow([flows.af_start(), flows.af_llm("llmAgentflow_0", model)],
                                    [("startAgentflow_0", "llmAgentflow_0")])
        assert_error(author.post("/chatflows", json={"name": "f", "flowData": agentflow, "type": "AGENTFLOW"}),
                     400, "allowedHosts")
        # Updating a saved flow to point there is refused the same way.
        flow = create_flow(author, openai_to(fake.url, cred["id"]))
        assert_error(author.put(f"/chatflows/{flow}", json={"flowData": openai_to(recorder.url, cred["id"])}), 400)
        question = f"allowed {nonce()}"
        assert ask(author, flow, question)["text"] == f"Echo: {question}"
        assert fake.last_request("/chat/completions")[1]["authorization"] == f"Bearer {GOOD_KEY}"

        # At run: a flow saved while the credential allowed the recorder, then narrowed.
        api.put(f"/credentials/{cred['id']}", json={"allowedHosts": [here]})
        moved = create_flow(author, openai_to(recorder.url, cred["id"]))
        api.put(f"/credentials/{cred['id']}", json={"allowedHosts": []})
        assert_error(predict(author, moved, "now"), 400, "allowedHosts")
        # Nor through an override the chatflow allows.
        api.put(f"/credentials/{cred['id']}", json={"allowedHosts": [fake.url.split("//")[1]]})
        allowing = create_flow(api, openai_to(fake.url, cred["id"]),
                               apiConfig=json.dumps({"overrideConfig": {"allow": ["basePath"]}}))
        assert_error(predict(author, allowing, "hi", overrideConfig={"basePath": f"{recorder.url}/v1"}),
                     400, "allowedHosts")
        assert recorder.requests == []
        # Only credentials:write changes where a credential may go.
        assert_error(author.put(f"/credentials/{cred['id']}", json={"allowedHosts": [here]}), 403, "credentials:write")
    finally:
        recorder.close()
