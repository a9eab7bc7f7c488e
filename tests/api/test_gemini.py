"""Google's Gemini (`chatGoogleGenerativeAI`, `googleGenerativeAiEmbeddings`) on a
fake Generative Language API: answers streamed from `streamGenerateContent`, tool
calls and structured output as function calls, thinking, pictures, safety
settings, token usage, and embeddings for retrieval."""

import base64
import json

import pytest

import flows
from fakes import GOOD_KEY, THOUGHT_SIGNATURE, FakeProviders
from prediction_client import ask, create_flow, nonce, predict, sse_frames, stream
from test_retrieval import POLICIES, chunks_flow, contents, new_requests, upsert, upserted
from weir_harness import assert_error


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def gemini_requests(fake, marker):
    return [(p, h, b) for p, h, b in fake.requests if ":streamGenerateContent" in p and marker in json.dumps(b)]


def test_gemini_answers_a_conversation_as_it_streams(api, fake):
    safety = [{"harmCategory": "HARM_CATEGORY_HARASSMENT", "harmBlockThreshold": "BLOCK_ONLY_HIGH"},
              {"harmCategory": "HARM_CATEGORY_HARASSMENT", "harmBlockThreshold": "BLOCK_NONE"}]
    model = flows.gemini_model(fake.url, topK=20, maxOutputTokens=256, safetySettings=safety)
    flow = create_flow(api, flows.conversation(model, flows.buffer_memory(), system="Be brief."))
    marker = nonce()
    body = ask(api, flow, f"hello {marker}", chatId="gem")
    assert body["text"] == f"Echo: hello {marker}"
    path, headers, sent = gemini_requests(fake, marker)[-1]
    assert path == "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    headers = {k.lower(): v for k, v in headers.items()}
    assert headers["x-goog-api-key"] == GOOD_KEY
    assert sent["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert sent["generationConfig"] == {"temperature": 0.4, "topK": 20, "maxOutputTokens": 256}
    # A category once, its first row (as Flowise drops repeats).
    assert sent["safetySettings"] == [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]
    usage = body["usageMetadata"]["nodes"][0]
    assert (usage["nodeId"], usage["model"], usage["input_tokens"]) == ("chatGoogleGenerativeAI_0", "gemini-test", 2)
    # The next question carries the chat's turns as user and model contents.
    events = stream(api, flow, f"again {marker}", chatId="gem")
    assert "".join(d for e, d in events if e == "token") == f"Echo: again {marker}"
    sent = gemini_requests(fake, f"again {marker}")[-1][2]
    assert [c["role"] for c in sent["contents"]] == ["user", "model", "user"]
    assert sent["contents"][1]["parts"] == [{"text": f"Echo: hello {marker}"}]


def test_gemini_calls_tools_thinks_and_sends_its_signature_back(api, fake):
    model = flows.gemini_model(fake.url, thinkingBudget=1024)
    flow = create_flow(api, flows.tool_agent(model, [flows.calculator()]))
    marker = nonce()
    question = f'What is six times seven ({marker})? CALL calculator {{"input": "6 * 7"}}'
    r = api.post(f"/prediction/{flow}", json={"question": question, "streaming": True}, stream=True)
    frames = sse_frames(r)
    names = [f["event"] for f in frames]
    assert names[0] == "start" and "thinking" in names and "calledTools" in names, names
    assert "".join(f["data"] for f in frames if f["event"] == "token").endswith("Done: 42")
    first, second = [b for _, _, b in gemini_requests(fake, marker)]
    assert first["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 1024, "includeThoughts": True}
    declaration = first["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "calculator" and "additionalProperties" not in json.dumps(declaration)
    # The model's call goes back with its signature, its result as the user's turn
    # (the fake refuses the call without it, as Gemini 3 does).
    calling, answered = second["contents"][-2], second["contents"][-1]
    assert calling["role"] == "model" and calling["parts"][0]["thoughtSignature"] == THOUGHT_SIGNATURE
    assert calling["parts"][0]["functionCall"] == {"name": "calculator", "args": {"input": "6 * 7"}}
    assert answered == {"role": "user", "parts": [{"functionResponse": {"name": "calculator",
                                                                        "response": {"result": "42"}}}]}
    reason = dict((f["event"], f) for f in frames)["metadata"]
    assert reason["data"]["chatMessageId"]


def test_gemini_gives_structured_output_in_an_agentflow(api, fake):
    start = flows.af_start()
    rows = [{"key": "city", "type": "string", "description": "The city"}]
    llm = flows.af_llm("llmAgentflow_0", flows.af_model("llmModel", flows.gemini_model(fake.url)),
                       llmStructuredOutput=rows)
    flow = create_flow(api, flows.agentflow([start, llm], [(start["id"], llm["id"])]), type="AGENTFLOW")
    marker = nonce()
    body = predict(api, flow, f'Where? {marker} STRUCT {{"city": "Lisbon"}}')
    assert body.status_code == 200, body.text
    executed = {i["nodeId"]: i for i in body.json()["agentFlowExecutedData"]}
    assert executed["llmAgentflow_0"]["data"]["output"]["city"] == "Lisbon"
    sent = gemini_requests(fake, marker)[-1][2]
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "ANY",
                                                            "allowedFunctionNames": ["structured_output"]}}


def test_gemini_sees_pictures(api, fake):
    flow = create_flow(api, flows.conversation(flows.gemini_model(fake.url)))
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    data = base64.b64encode(png).decode()
    marker = nonce()
    r = predict(api, flow, f"what is this {marker}", uploads=[
        {"data": f"data:image/png;base64,{data}", "type": "file", "name": "a.png", "mime": "image/png"}])
    assert r.status_code == 200, r.text
    parts = gemini_requests(fake, marker)[-1][2]["contents"][-1]["parts"]
    assert parts == [{"text": f"what is this {marker}"}, {"inlineData": {"mimeType": "image/png", "data": data}}]


def test_gemini_failures_name_the_node(api, fake):
    bad_key = create_flow(api, flows.conversation(flows.gemini_model(fake.url, key="nope")))
    message = assert_error(predict(api, bad_key, "x"), 500)["message"]
    assert "chatGoogleGenerativeAI_0" in message and "API key not valid" in message
    missing = create_flow(api, flows.conversation(flows.gemini_model(fake.url, modelName="missing-model")))
    assert "does not know that model" in assert_error(predict(api, missing, "x"), 500)["message"]
    # An unknown safety setting is refused when the flow runs, naming it.
    odd = flows.gemini_model(fake.url, safetySettings=[{"harmCategory": "HARM_X", "harmBlockThreshold": "BLOCK_NONE"}])
    flow = create_flow(api, flows.conversation(odd))
    assert "HARM_X" in assert_error(predict(api, flow, "x"), 400)["message"]


def test_gemini_embeddings_index_and_find(api, fake):
    texts = [p.replace("\n", " ") for p in POLICIES[:3]]
    embeddings = flows.gemini_embeddings(fake.url, taskType="RETRIEVAL_DOCUMENT")
    flow = create_flow(api, chunks_flow(fake, texts, embeddings, topK=1))
    before = fake.count(":batchEmbedContents")
    assert upserted(upsert(api, flow))["numAdded"] == 3
    sent = new_requests(fake, ":batchEmbedContents", before)
    path, headers, body = sent[0]
    assert path == "/v1beta/models/gemini-embed-test:batchEmbedContents"
    assert headers["x-goog-api-key"] == GOOD_KEY
    assert body["requests"][0]["model"] == "models/gemini-embed-test"
    assert body["requests"][0]["taskType"] == "RETRIEVAL_DOCUMENT"
    embedded = [r["content"]["parts"][0]["text"] for _, _, b in sent for r in b["requests"]]
    assert sorted(embedded) == sorted(texts)
    answer = ask(api, flow, "When are invoices paid?")
    assert contents(answer["sourceDocuments"]) == [texts[0]]


def test_a_gemini_credential_fills_the_key_where_it_may_go(api, fake):
    def credential(hosts):
        r = api.post("/credentials", json={"name": "gemini", "credentialName": "googleGenerativeAI",
                                           "plainDataObj": {"googleGenerativeAPIKey": GOOD_KEY},
                                           "allowedHosts": hosts})
        assert r.status_code == 201, r.text
        return r.json()["id"]

    model = flows.gemini_model(fake.url, key="")
    model["data"]["credential"] = credential(["127.0.0.1"])
    flow = create_flow(api, flows.conversation(model))
    assert ask(api, flow, "with a credential")["text"] == "Echo: with a credential"
    # A credential kept to Google's host is not sent to the fake's address: the
    # flow is refused when saved.
    kept_home = flows.gemini_model(fake.url, key="")
    kept_home["data"]["credential"] = credential([])
    r = api.post("/chatflows", json={"name": "f", "flowData": flows.conversation(kept_home)})
    assert "generativelanguage.googleapis.com" in assert_error(r, 400)["message"]


def test_gemini_writes_follow_up_prompts(api, fake):
    credential = api.post("/credentials", json={"name": "gemini", "credentialName": "googleGenerativeAI",
                                                "plainDataObj": {"googleGenerativeAPIKey": GOOD_KEY},
                                                "allowedHosts": ["127.0.0.1"]})
    assert credential.status_code == 201, credential.text
    setting = {"followUpPrompts": {"status": True, "selectedProvider": "googleGenerativeAI", "googleGenerativeAI": {
        "credentialId": credential.json()["id"], "modelName": "gemini-follow", "baseUrl": fake.url,
        "prompt": 'STRUCT {"questions": ["And owls?", "And bats?"]} {history}'}}}
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)), chatbotConfig=json.dumps(setting))
    body = ask(api, flow, "birds of the night")
    assert json.loads(body["followUpPrompts"]) == ["And owls?", "And bats?"]
    assert {n["nodeId"]: n["model"] for n in body["usageMetadata"]["nodes"]}["followUpPrompts"] == "gemini-follow"
