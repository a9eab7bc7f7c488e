"""Flowise's chat embed on a page of another origin, in a real browser: headless
Chromium (Debian's package, driven by Playwright) loads a page served from one
origin with the `flowise-embed` widget (the npm package's published bundle, checked
against its pinned digest) pointed at weir on another origin; the widget loads its
configuration (`chatflows-streaming`, `public-chatbotConfig`), a message typed into
it is sent as a streamed prediction, and the answer appears in the chat. Preflights
and CORS headers are the browser's to check: any refusal fails the test.
"""

import json
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

import flows
from fakes import FakeProviders, FakeSite
from npm_packages import npm_file
from weir_harness import Api, wait_for

WIDGET = "flowise-embed@3.1.6"
WIDGET_SHA256 = "4a8aa53c20cddb93cd00e838c3b97c82915730a5c8259c08d733df40defebffc"
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def widget_js() -> Path:
    """The widget's bundle (dist/web.js) from the npm package, fetched once."""
    return npm_file(WIDGET, WIDGET_SHA256, "dist/web.js")


def chromium(p):
    """Headless Chromium (Debian's) without its background network chatter."""
    return p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"])


def embed_page(chatflow: str, api_host: str) -> str:
    config = json.dumps({"chatflowid": chatflow, "apiHost": api_host})
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>shop</title><link rel="icon" href="data:,"></head>
<body>
<flowise-fullchatbot></flowise-fullchatbot>
<script type="module">
  import Chatbot from "./web.js";
  Chatbot.initFull({config});
</script>
</body></html>"""


def test_the_flowise_embed_widget_chats_with_weir_from_another_origin(make_weir, widget_js):
    assert CHROMIUM.exists(), "Chromium is missing: scripts/system-deps installs Debian's chromium"
    fake = FakeProviders()
    w = make_weir()
    w.start()
    api = Api(w.url, w.create_key(workspace="shop"))
    flow_data = flows.conversation(flows.openai_model(fake.url), flows.buffer_memory())
    created = api.post("/chatflows", json={"name": "shop assistant", "flowData": flow_data, "isPublic": True})
    assert created.status_code == 201, created.text
    flow = created.json()["id"]
    # Another origin: another port of 127.0.0.1 than weir's.
    page = FakeSite(pages={"/": embed_page(flow, w.url),
                           "/web.js": ("text/javascript", widget_js.read_bytes())})
    seen = {"requests": [], "responses": [], "refused": []}
    try:
        with sync_playwright() as p:
            browser = chromium(p)
            tab = browser.new_page()
            tab.on("request", lambda r: seen["requests"].append((r.method, r.url, r.post_data)))
            tab.on("response", lambda r: seen["responses"].append((r.url, r.status, r.headers)))
            tab.on("requestfailed", lambda r: seen["refused"].append((r.url, r.failure)))
            tab.on("console", lambda m: m.type == "error" and seen["refused"].append((m.location.get("url"), m.text)))
            tab.goto(page.url)

            box = tab.get_by_placeholder("Type your question")
            box.wait_for(timeout=20_000)
            box.fill("Where is my parcel?")
            box.press("Enter")
            tab.get_by_text("Echo: Where is my parcel?").wait_for(timeout=30_000)
            browser.close()
    finally:
        page.close()
        fake.close()

    assert seen["refused"] == [], seen["refused"]
    prediction = [r for r in seen["requests"] if r[0] == "POST" and f"/api/v1/prediction/{flow}" in r[1]]
    assert len(prediction) == 1 and json.loads(prediction[0][2])["streaming"] is True, prediction
    answered = {url.split("/api/v1/")[-1]: (status, headers) for url, status, headers in seen["responses"]
                if url.startswith(w.url)}
    status, headers = answered[f"prediction/{flow}"]
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), (status, headers)
    assert headers["access-control-allow-origin"] == page.url
    assert answered[f"chatflows-streaming/{flow}"][0] == 200
    assert answered[f"public-chatbotConfig/{flow}"][0] == 200
    # The exchange is the chat's memory, as with any other client.
    chat_id = json.loads(prediction[0][2])["chatId"]
    stored = api.get(f"/chatmessage/{flow}", params={"chatId": chat_id}).json()
    assert [m["content"] for m in stored] == ["Where is my parcel?", "Echo: Where is my parcel?"]


def test_the_widget_configuration_follows_the_prediction_rule_and_shows_no_flow(server, api):
    """`public-chatbotConfig`: the chatbotConfig with `uploads`; for an agentflow, the
    start node's form and nothing else of the flow; only to callers who may run it."""
    form = [{"type": "string", "name": "order", "label": "Order number"}]
    start = flows.af_start(form=form, formTitle="Track an order")
    secret_model = flows.af_openai("http://127.0.0.1:9", key="sk-very-secret")
    llm = flows.af_llm("llmAgentflow_0", secret_model)
    agentflow = flows.agentflow([start, llm], [(start["id"], llm["id"])])
    created = api.post("/chatflows", json={"name": "tracker", "type": "AGENTFLOW", "flowData": agentflow,
                                           "chatbotConfig": json.dumps({"welcomeMessage": "Track it"})})
    assert created.status_code == 201, created.text
    flow = created.json()["id"]

    anonymous = Api(server.url, None)
    assert anonymous.get(f"/public-chatbotConfig/{flow}").status_code == 401
    config = api.get(f"/public-chatbotConfig/{flow}").json()
    assert config["welcomeMessage"] == "Track it"
    assert config["uploads"]["isRAGFileUploadAllowed"] is False and config["uploads"]["isImageUploadAllowed"] is False
    shown = json.loads(config["flowData"])
    assert [n["data"]["name"] for n in shown["nodes"]] == ["startAgentflow"]
    assert shown["nodes"][0]["data"]["inputs"]["formInputTypes"] == form
    assert "sk-very-secret" not in json.dumps(config)

    assert api.put(f"/chatflows/{flow}", json={"isPublic": True}).status_code == 200
    assert anonymous.get(f"/public-chatbotConfig/{flow}").json()["welcomeMessage"] == "Track it"
    other = Api(server.url, server.create_key(workspace="someone-else"))
    assert other.get(f"/public-chatbotConfig/{flow}").status_code == 200  # public: anyone
    assert anonymous.get("/public-chatbotConfig/00000000-0000-4000-8000-000000000000").status_code == 404


def test_the_widget_is_told_when_a_chat_takes_files(api):
    embeddings = flows.local_embeddings()
    store = flows.memory_vector_store([], embeddings, fileUpload=True)
    model = flows.local_model()
    flow_data = flows.rag(embeddings, store, model, flows.conversational_retrieval_qa_chain(model, store))
    created = api.post("/chatflows", json={"name": "files", "flowData": flow_data})
    assert created.status_code == 201, created.text
    uploads = api.get(f"/public-chatbotConfig/{created.json()['id']}").json()["uploads"]
    assert uploads["isRAGFileUploadAllowed"] is True
    assert uploads["fileUploadSizeAndTypes"] == [{"fileTypes": ["*"], "maxUploadSize": 50}]


def test_the_widget_leaves_a_lead_and_rates_an_answer(make_weir, widget_js):
    """The lead form and the thumbs, as Flowise's widget drives them: the lead and
    the rating (with its comment) reach the store in Flowise's shapes."""
    fake = FakeProviders()
    w = make_weir()
    w.start()
    api = Api(w.url, w.create_key(workspace="shop"))
    chatbot = {"chatFeedback": {"status": True},
               "leads": {"status": True, "title": "Who are you?", "name": True, "email": True}}
    created = api.post("/chatflows", json={"name": "shop", "isPublic": True, "chatbotConfig": json.dumps(chatbot),
                                           "flowData": flows.conversation(flows.openai_model(fake.url))})
    assert created.status_code == 201, created.text
    flow = created.json()["id"]
    page = FakeSite(pages={"/": embed_page(flow, w.url),
                           "/web.js": ("text/javascript", widget_js.read_bytes())})
    refused = []
    try:
        with sync_playwright() as p:
            browser = chromium(p)
            tab = browser.new_page()
            tab.on("requestfailed", lambda r: refused.append((r.url, r.failure)))
            tab.goto(page.url)

            # The lead form comes first; the chat opens once it is saved.
            tab.get_by_text("Who are you?").wait_for(timeout=20_000)
            tab.get_by_placeholder("Name").fill("Ada Lovelace")
            tab.get_by_placeholder("Email Address").fill("ada@example.com")
            tab.locator("form", has=tab.get_by_placeholder("Email Address")).locator("button[type=submit]").click()
            tab.get_by_text("Thank you for submitting your contact information.").wait_for(timeout=10_000)

            box = tab.get_by_placeholder("Type your question")
            box.fill("Is it in stock?")
            box.press("Enter")
            tab.get_by_text("Echo: Is it in stock?").wait_for(timeout=30_000)
            tab.get_by_title("Thumbs Up").click()
            tab.get_by_placeholder("What do you think of the response?").fill("Quick and right")
            tab.get_by_text("Submit Feedback").click()
            tab.get_by_text("Provide additional feedback").wait_for(state="detached", timeout=10_000)
            browser.close()
    finally:
        page.close()
        fake.close()

    assert refused == [], refused
    leads = api.get(f"/leads/{flow}").json()
    assert [(l["name"], l["email"]) for l in leads] == [("Ada Lovelace", "ada@example.com")]
    [rating] = api.get(f"/feedback/{flow}").json()
    assert (rating["rating"], rating["content"]) == ("THUMBS_UP", "Quick and right")
    stored = api.get(f"/chatmessage/{flow}", params={"feedback": "true"}).json()
    assert [m["content"] for m in stored] == ["Is it in stock?", "Echo: Is it in stock?"]
    assert stored[0]["leadEmail"] == "ada@example.com" and stored[0]["chatId"] == leads[0]["chatId"]
    assert stored[1]["feedback"]["id"] == rating["id"]


def test_the_widget_attaches_files_and_pictures_shows_thinking_and_follow_ups_and_stops(make_weir, widget_js):
    """The paper clip, the picture button, the model's thinking, the suggested next
    questions and the stop button, as Flowise's widget drives them."""
    fake = FakeProviders()
    w = make_weir()
    w.start()
    api = Api(w.url, w.create_key(workspace="shop"))
    credential = api.post("/credentials", json={
        "name": "follow-ups", "credentialName": "openAIApi", "plainDataObj": {"openAIApiKey": "sk-good"},
        "allowedHosts": ["127.0.0.1"]}).json()["id"]
    suggest = 'STRUCT {"questions": ["Where is it now?", "When will it arrive?"]} {history}'
    chatbot = {"fullFileUpload": {"status": True, "allowedUploadFileTypes": "text/plain"},
               "followUpPrompts": {"status": True, "selectedProvider": "openAI", "openAI": {
                   "credentialId": credential, "modelName": "gpt-follow", "baseUrl": f"{fake.url}/v1",
                   "prompt": suggest}}}
    created = api.post("/chatflows", json={"name": "shop", "isPublic": True, "chatbotConfig": json.dumps(chatbot),
                                           "flowData": flows.conversation(flows.openai_model(fake.url))})
    assert created.status_code == 201, created.text
    flow = created.json()["id"]
    # The public configuration says follow-ups come, not how they are written.
    public = Api(w.url, None).get(f"/public-chatbotConfig/{flow}").json()
    assert public["followUpPrompts"] == {"status": True}
    start = flows.af_start()
    llm = flows.af_llm("llmAgentflow_0", flows.af_openai(fake.url))
    created = api.post("/chatflows", json={"name": "agent", "isPublic": True, "type": "AGENTFLOW",
                                           "flowData": flows.agentflow([start, llm], [(start["id"], llm["id"])])})
    assert created.status_code == 201, created.text
    agentflow = created.json()["id"]
    page = FakeSite(pages={"/": embed_page(flow, w.url),
                           "/web.js": ("text/javascript", widget_js.read_bytes())})
    agent_page = FakeSite(pages={"/": embed_page(agentflow, w.url),
                                 "/web.js": ("text/javascript", widget_js.read_bytes())})
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    refused = []
    try:
        with sync_playwright() as p:
            browser = chromium(p)
            tab = browser.new_page()
            tab.on("requestfailed", lambda r: refused.append((r.url, r.failure)))
            tab.goto(page.url)
            box = tab.get_by_placeholder("Type your question")
            box.wait_for(timeout=20_000)

            # A text file through the paper clip: read by weir, sent with the question.
            # The widget's buttons are icons: each opens the file input after it.
            with tab.expect_file_chooser() as chooser:
                tab.locator('button:has(+ input[type=file][accept="text/plain"])').click()
            chooser.value.set_files({"name": "notes.txt", "mimeType": "text/plain",
                                     "buffer": b"The parcel left Leeds on Monday."})
            box.fill("When did it leave? THINK")
            box.press("Enter")
            tab.get_by_text("The parcel left Leeds on Monday.").last.wait_for(timeout=30_000)
            # The thinking is shown with its duration, and the suggested questions.
            tab.get_by_text("Thought for").wait_for(timeout=10_000)
            tab.get_by_text("When will it arrive?").wait_for(timeout=10_000)

            # A picture through the picture button, to a model that sees.
            with tab.expect_file_chooser() as chooser:
                tab.locator('button:has(+ input[type=file][accept^="image/"])').click()
            chooser.value.set_files({"name": "parcel.png", "mimeType": "image/png", "buffer": png})
            box.fill("What is in the picture?")
            box.press("Enter")
            tab.get_by_text("Echo: What is in the picture?").wait_for(timeout=30_000)

            # The stop button (the widget shows it for an agentflow's answer) ends a slow one.
            tab.goto(agent_page.url)
            box = tab.get_by_placeholder("Type your question")
            box.wait_for(timeout=20_000)
            box.fill("SLOW")
            box.press("Enter")
            tab.get_by_text("tick tick").wait_for(timeout=20_000)
            # While the answer streams, the send button is the stop button.
            tab.locator('[data-testid="input"] textarea + button').click()
            wait_for(lambda: any(m.get("aborted") for m in api.get(f"/chatmessage/{agentflow}").json()), 10,
                     "the stopped answer")
            browser.close()
    finally:
        page.close()
        agent_page.close()
        fake.close()

    assert refused == [], refused
    stored = api.get(f"/chatmessage/{flow}").json()
    questions = [m for m in stored if m["role"] == "userMessage"]
    answers = [m for m in stored if m["role"] == "apiMessage"]
    assert questions[0]["content"].startswith("When did it leave? THINK\n\n[Attached file: notes.txt]\n")
    assert answers[0]["reasonContent"]["thinking"] == "Let me think. Still thinking."
    assert json.loads(answers[0]["followUpPrompts"]) == ["Where is it now?", "When will it arrive?"]
    assert questions[1]["fileUploads"] == [{"type": "stored-file", "name": "parcel.png", "mime": "image/png"}]
    [_, stopped] = api.get(f"/chatmessage/{agentflow}").json()
    assert stopped["aborted"] is True and stopped["content"].startswith("tick")
    assert api.get(f"/executions/{stopped['executionId']}").json()["state"] == "STOPPED"
