"""Flowise 3.1.2's own marketplace templates — the 51 JSON files of the `flowise`
npm package's `marketplaces/` (chatflows, multi-agent flows, Agentflow V2),
fetched once and checked against a pinned digest — imported into weir as they
are and asked a question, on both stores.

Only what depends on the test is set after loading, as a user would set it: the
providers' base URLs (the fake's; the keys come from the server's environment),
the files a template leaves to its user (a CSV, an OpenAPI description), the
database, the document store and the stored tools it names by id. The templates
that need a SaaS weir has no node for (Pinecone, Replicate, Gmail, …) are
listed with the reason; a new pin that adds or drops a template fails here."""

import json
import sqlite3

import pytest

import flows
from fakes import GOOD_KEY, FakeProviders, FakeSite
from npm_packages import npm_folder
from prediction_client import create_flow, nonce, predict
from tool_runtime import use_runtime
from weir_harness import Api, Weir, backends

FLOWISE = ("flowise@3.1.2", "5a539efabdffc6f7496bb664f33601d6bbfffd533919b279ef6ee9e01b12920b")
KINDS = {"chatflows": "CHATFLOW", "agentflows": "MULTIAGENT", "agentflowsv2": "AGENTFLOW"}

# Templates that need a service weir has no node for (Pinecone, Replicate, Gmail, …), reached
# only at its own address. Those that search with Brave, SerpAPI or Google Custom Search run
# (and OpenAI Assistant's Serper tool would):
# their tools' bases and keys come from the server's environment (the fake's, unused: the
# fake model calls no tool here; tests/api/test_search_tools.py searches).
NEEDS_SAAS = {
    "chatflows/Context Chat Engine": "Pinecone",
    "chatflows/Github Docs QnA": "GitHub",
    "chatflows/HuggingFace LLM Chain": "Hugging Face Inference",
    "chatflows/Image Generation": "Replicate",
    "chatflows/Multiple Documents QnA": "Pinecone",
    "chatflows/OpenAI Assistant": "OpenAI Assistants",
    "chatflows/Query Engine": "Pinecone",
    "chatflows/Replicate LLM": "Replicate",
    "chatflows/SubQuestion Query Engine": "Pinecone",
    "agentflows/Agentic RAG": "Pinecone",
    "agentflows/Customer Support Team Agents": "Pinecone",
    "agentflows/Human In Loop RAG": "Pinecone",
    "agentflowsv2/Deep Research With Subagents": "arXiv",
    "agentflowsv2/Human In The Loop": "Gmail",
    # Its tool nodes run directly (not at a model's choice): a Slack MCP server that
    # calls Slack's API, and Microsoft Teams.
    "agentflowsv2/Workplace Chat": "Slack, Microsoft Teams",
}

# Templates weir does not run yet, with the reason it gives.
NOT_YET = {
    # Its custom functions `require('typeorm')` and `require('pg')` to reach the
    # user's PostgreSQL: weir's JavaScript (QuickJS) has no Node.js modules: a 400 before it runs.
    "agentflowsv2/SQL Agent": "require is not defined",
}

LIBRARY = "The city library opens at 9 am and lends up to 12 books at a time.\n"
PETS = "\n".join(f"{key}: {json.dumps(value)}" for key, value in {
    "openapi": "3.0.3", "info": {"title": "Pets", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9/api"}],
    "paths": {"/pets/{petId}": {"get": {"operationId": "showPetById", "summary": "Info for a pet",
                                        "parameters": [{"name": "petId", "in": "path", "required": True,
                                                        "schema": {"type": "string"}}]}}},
}.items())
MOVIES = json.dumps([{"title": "Heat", "yearOfRelease": 1995, "genres": ["Action", "Thriller"],
                      "shortDescription": "A thief and a detective."}])


def templates():
    root = npm_folder(*FLOWISE, "marketplaces")
    return {f"{kind}/{path.stem}": path for kind in KINDS for path in sorted((root / kind).glob("*.json"))}


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    # Flowise's simple moderation asks a model whether the question is like a denied one.
    f.reply_when("Are these two sentences similar to each other?", "No")
    # The Advanced Structured Output Parser template's chain answers JSON only.
    f.reply_when(QUESTIONS["chatflows/Advanced Structured Output Parser"], MOVIES)
    yield f
    f.close()


@pytest.fixture(scope="module")
def site():
    """The events API the Interacting With API template's HTTP node is pointed at."""
    s = FakeSite("127.0.0.1", body='[{"id": "1", "name": "launch"}]', content_type="application/json")
    yield s
    s.close()


@pytest.fixture(scope="module", params=backends())
def templates_server(request, py_runtime, fake, tmp_path_factory):
    """A weir whose provider keys are in its environment (trusted with the fake's
    host), Azure's endpoint, Anthropic's and the search APIs' at the fake, the Python runtime, and a
    SQLite database `shop.db` for SQL templates."""
    tmp = tmp_path_factory.mktemp(f"weir-templates-{request.param}")
    sql_dir = tmp / "sql"
    sql_dir.mkdir()
    db = sqlite3.connect(sql_dir / "shop.db")
    db.executescript("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
                     "INSERT INTO customers (name) VALUES ('Ada'), ('Grace');")
    db.commit()
    db.close()
    w = use_runtime(Weir(tmp, request.param), py_runtime)
    w.env.update(OPENAI_API_KEY=GOOD_KEY, ANTHROPIC_API_KEY=GOOD_KEY, ANTHROPIC_BASE_URL=fake.url,
                 MISTRAL_API_KEY=GOOD_KEY, GOOGLE_GENERATIVE_AI_API_KEY=GOOD_KEY, GROQ_API_KEY=GOOD_KEY,
                 AZURE_OPENAI_API_KEY=GOOD_KEY, AZURE_OPENAI_ENDPOINT=fake.url,
                 AZURE_OPENAI_API_DEPLOYMENT_NAME="gpt-dep", SQL_DATABASE_DIR=str(sql_dir),
                 ALLOW_PRIVATE_REQUESTS="127.0.0.1", PROVIDER_KEY_HOSTS=fake.url.split("//")[1],
                 BRAVE_SEARCH_API_KEY=GOOD_KEY, BRAVE_SEARCH_BASE_URL=fake.url, SERPAPI_API_KEY=GOOD_KEY,
                 SERPAPI_BASE_URL=fake.url, GOOGLE_CUSTOM_SEARCH_API_KEY=GOOD_KEY,
                 GOOGLE_CUSTOM_SEARCH_ENGINE_ID="cx-1", GOOGLE_CUSTOM_SEARCH_BASE_URL=fake.url)
    w.start()
    yield w
    w.cleanup()


@pytest.fixture(scope="module")
def client(templates_server) -> Api:
    return Api(templates_server.url, templates_server.create_key(workspace=f"ws-{nonce()}"))


@pytest.fixture(scope="module")
def library(client, fake):
    """A document store of the workspace (a chatflow holding one vector store)
    that knows LIBRARY."""
    embeddings = flows.openai_embeddings(f"{fake.url}/v1")
    loader = flows.text_file()
    store = create_flow(client, flows.wired([embeddings, loader, flows.vector_store("faiss", [loader], embeddings)]))
    r = client.post(f"/vector/upsert/{store}", files=[("files", ("library.txt", LIBRARY.encode(), "text/plain"))])
    assert r.status_code == 200 and r.json()["numAdded"] == 1, r.text
    return store


def point_at_fake(inputs, name, fake):
    """Sets a model's endpoint inputs (a node's, or an agentflow node's model config)."""
    v1 = f"{fake.url}/v1"
    endpoint = {
        "chatOpenAI": {"basepath": v1}, "openAIEmbeddings": {"basepath": v1},
        "chatOpenAI_LlamaIndex": {"basepath": v1}, "openAIEmbedding_LlamaIndex": {"basepath": v1},
        "chatMistralAI": {"overrideEndpoint": v1}, "chatOllama": {"baseUrl": fake.url},
        "localAIEmbeddings": {"basePath": v1, "localAIApiKey": GOOD_KEY},
        "chatGoogleGenerativeAI": {"baseUrl": fake.url}, "groqChat": {"basePath": v1},
    }
    inputs.update(endpoint.get(name, {}))


def nodes_named(flow, name):
    return [n["data"] for n in flow["nodes"] if n["data"]["name"] == name]


def prepare(label, flow, api, fake, library, site):
    """What a user of the template sets after importing it."""
    for node in flow["nodes"]:
        inputs = node["data"].setdefault("inputs", {})
        point_at_fake(inputs, node["data"]["name"], fake)
        for key, config in inputs.items():
            chosen = inputs.get(key.removesuffix("Config"))
            if key.endswith("ModelConfig") and isinstance(config, dict) and isinstance(chosen, str):
                point_at_fake(config, chosen, fake)
    pets = flows.data_url("pets.yaml", PETS, "application/x-yaml")
    for data in nodes_named(flow, "csvAgent"):
        data["inputs"]["csvFile"] = flows.data_url("people.csv", "name,age\nAda,36\n", "text/csv")
    for data in nodes_named(flow, "openAPIToolkit"):
        data["inputs"]["openApiFile"] = pets
    for data in nodes_named(flow, "sqlDatabaseChain"):
        data["inputs"]["url"] = "shop.db"
    for data in nodes_named(flow, "httpAgentflow"):
        data["inputs"]["url"] = f"{site.url}/events"
    for data in nodes_named(flow, "documentStore"):
        data["inputs"]["selectedStore"] = library
    for data in nodes_named(flow, "customTool"):
        tool = api.post("/tools", json={"name": f"tool_{nonce().replace('-', '_')}", "description": "Answers ok",
                                        "code": "result = 'ok'"})
        assert tool.status_code == 201, tool.text
        data["inputs"]["selectedTool"] = tool.json()["id"]
    for node in flow["nodes"]:
        inputs = node["data"]["inputs"]
        for key in ("retrieverKnowledgeDocumentStores", "agentKnowledgeDocumentStores"):
            for row in inputs.get(key) or []:
                row["documentStore"] = f"{library}:{row['documentStore'].split(':', 1)[1]}"
        for row in inputs.get("agentTools") or []:
            if row.get("agentSelectedTool") == "openAPIToolkit":
                row["agentSelectedToolConfig"]["openApiFile"] = pets
    return flow


def imported(label, api, fake, library, site):
    template = json.loads(templates()[label].read_text())
    flow = prepare(label, {"nodes": template["nodes"], "edges": template["edges"]}, api, fake, library, site)
    return create_flow(api, json.dumps(flow), name=label.split("/")[1], type=KINDS[label.split("/")[0]])


def test_every_template_of_the_pinned_package_is_accounted_for():
    found = set(templates())
    assert len(found) == 51
    runs = found - set(NEEDS_SAAS) - set(NOT_YET)
    assert set(NEEDS_SAAS) <= found and set(NOT_YET) <= found
    assert len(runs) == 51 - len(NEEDS_SAAS) - len(NOT_YET) == 35


# Questions that make the fake answer what a template's chain reads (its output parser's
# JSON, the pandas code of the CSV agent); the others are asked about the library.
QUESTIONS = {
    "chatflows/Advanced Structured Output Parser": "Two movies of 1995",
    "chatflows/CSV Agent": "How many people are there? CODE len(df)",
}


def runnable():
    return sorted(set(templates()) - set(NEEDS_SAAS) - set(NOT_YET))


@pytest.mark.parametrize("label", runnable())
def test_the_template_answers(label, client, fake, library, site):
    flow = imported(label, client, fake, library, site)
    question = QUESTIONS.get(label, f"When does the library open? {nonce()}")
    hits = len(site.hits)
    r = predict(client, flow, question)
    assert r.status_code == 200, r.text
    answer = r.json()
    if label == "agentflowsv2/Interacting With API":
        # Its last node is the HTTP request, whose output has no text (as in Flowise).
        assert [(m, p) for m, p, _, _ in site.hits[hits:]] == [("GET", "/events")]
        last = answer["agentFlowExecutedData"][-1]
        assert last["nodeId"] == "httpAgentflow_0", last
        assert last["data"]["output"]["http"]["data"] == [{"id": "1", "name": "launch"}], last
    else:
        assert answer["text"].strip(), answer
    assert "Cannot Process!" not in answer["text"], answer
    assert "data.instance}}" not in json.dumps(fake.bodies("", question)), "a node's result was not passed on"


def test_prompt_chaining_passes_the_first_chains_answer_to_the_second(client, fake, library, site):
    flow = imported("chatflows/Prompt Chaining", client, fake, library, site)
    question = f"grow tomatoes {nonce()}"
    answer = predict(client, flow, question).json()
    first, second = fake.bodies("/chat/completions", question)[-2:]
    asked_first = first["messages"][-1]["content"]
    assert asked_first.startswith("You are an AI who performs one task based on the following objective: "
                                  f"{question}.")
    asked_second = second["messages"][-1]["content"]
    assert f"The last completed task has the result: Echo: {asked_first}." in asked_second
    assert answer["text"] == f"Echo: {asked_second}"


def test_the_structured_output_template_answers_its_schemas_json(client, fake, library, site):
    flow = imported("chatflows/Advanced Structured Output Parser", client, fake, library, site)
    answer = predict(client, flow, "Two movies of 1995").json()
    assert answer["json"] == json.loads(MOVIES), answer


def test_the_simple_chat_engine_template_runs_on_azure_from_the_servers_settings(client, fake, library, site):
    flow = imported("chatflows/Simple Chat Engine", client, fake, library, site)
    chat = f"engine-{nonce()}"
    first = f"My name is Ada {nonce()}"
    assert predict(client, flow, first, chatId=chat).json()["text"] == f"Echo: {first}"
    path, headers, sent = fake.last_request("/chat/completions")
    assert path.startswith("/openai/deployments/gpt-dep/chat/completions?api-version=") and headers["api-key"] == GOOD_KEY
    assert sent["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    second = "What is my name?"
    predict(client, flow, second, chatId=chat)
    _, _, sent = fake.last_request("/chat/completions")
    assert [m["content"] for m in sent["messages"][1:]] == [first, f"Echo: {first}", second]


@pytest.mark.parametrize("label", sorted(NOT_YET))
def test_what_weir_does_not_run_yet_is_refused_naming_why(label, client, fake, library, site):
    template = json.loads(templates()[label].read_text())
    flow = prepare(label, {"nodes": template["nodes"], "edges": template["edges"]}, client, fake, library, site)
    r = client.post("/chatflows", json={"name": "not yet", "flowData": json.dumps(flow), "type": KINDS["agentflowsv2"]})
    if r.status_code == 201:
        r = predict(client, r.json()["id"], "hello")
    assert r.status_code == 400 and NOT_YET[label] in r.json()["message"], r.text
