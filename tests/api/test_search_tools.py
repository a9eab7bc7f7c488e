"""Flowise's search-API tools — braveSearchAPI, serpAPI, serper, googleCustomSearch —
against a fake of the four APIs on loopback: each asked on its own wire with
its key (a node's own, a stored credential's, the server's), its answer read as
LangChain's tool reads it, a wrong key a tool error the model reads, the
server's key kept to the service's host, a missing key a 400 naming where it comes from."""

import json

import pytest

import flows
from fakes import FakeProviders, FakeSearchApis
from prediction_client import ask, create_flow, predict, tools_used
from weir_harness import Api, Weir, assert_error


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module")
def searches():
    s = FakeSearchApis("127.0.0.2")
    yield s
    s.close()


@pytest.fixture(scope="module")
def api(tmp_path_factory, searches):
    """A server that lets its tools reach 127.0.0.2, with SerpAPI's key and base
    (the fake) and a Brave key of its own in its environment."""
    w = Weir(tmp_path_factory.mktemp("weir-search"), "sqlite")
    w.env.update(ALLOW_PRIVATE_REQUESTS="127.0.0.2", SERPAPI_API_KEY="serp-key", SERPAPI_BASE_URL=searches.url,
                 BRAVE_SEARCH_API_KEY="server-brave-key")
    w.start()
    yield Api(w.url, w.create_key())
    w.cleanup()


def searched(api, flow, tool, query):
    body = ask(api, flow, f'Look it up. CALL {tool} {{"input": "{query}"}}')
    [(name, arguments, output)] = tools_used(body["usedTools"])
    assert (name, arguments) == (tool, {"input": query})
    return output


def agent_with(api, fake, tool):
    return create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [tool]))


def test_brave_is_asked_with_the_nodes_own_key(api, fake, searches):
    tool = flows.node("braveSearchAPI_0", "braveSearchAPI", {"basePath": searches.url, "braveApiKey": "brave-key"})
    flow = agent_with(api, fake, tool)
    results = json.loads(searched(api, flow, "brave-search", "owls"))
    assert results[0] == {"title": "owls 1", "link": "https://example.com/1", "snippet": "About owls, part 1."}
    assert len(results) == 3
    path, query, headers = searches.queries[-1]
    assert (path, query, headers["x-subscription-token"]) == ("/res/v1/web/search", {"q": "owls"}, "brave-key")
    assert headers["accept"] == "application/json"
    # What the model was told the tool does: LangChain's description.
    [described] = fake.last("/chat/completions")["tools"]
    assert described["function"]["name"] == "brave-search"
    assert "current events" in described["function"]["description"]
    assert json.loads(searched(api, flow, "brave-search", "nothing")) == []


def test_a_wrong_key_is_a_tool_error_the_model_reads(api, fake, searches):
    tool = flows.node("braveSearchAPI_0", "braveSearchAPI", {"basePath": searches.url, "braveApiKey": "stale"})
    output = searched(api, agent_with(api, fake, tool), "brave-search", "owls")
    assert output.startswith("Error: Brave Search answered HTTP 401") and "SUBSCRIPTION_TOKEN_INVALID" in output


def test_serpapi_takes_the_servers_key_and_base_and_reads_the_answer_box(api, fake, searches):
    flow = agent_with(api, fake, flows.node("serpAPI_0", "serpAPI", {}))
    assert searched(api, flow, "search", "When does the library open?") == "9 am"
    path, query, _ = searches.queries[-1]
    assert (path, query) == ("/search", {"api_key": "serp-key", "q": "When does the library open?"})
    # Without an answer box, the organic results' snippets.
    assert json.loads(searched(api, flow, "search", "owls")) == [f"About owls, part {n}." for n in (1, 2, 3)]
    assert searched(api, flow, "search", "nothing") == "No good search result found"


def test_serper_is_posted_the_query_with_its_key_header(api, fake, searches):
    r = api.post("/credentials", json={"name": "Serper", "credentialName": "serperApi",
                                       "plainDataObj": {"serperApiKey": "serper-key"}, "allowedHosts": ["127.0.0.2"]})
    assert r.status_code == 201, r.text
    tool = flows.node("serper_0", "serper", {"basePath": searches.url})
    tool["data"]["credential"] = r.json()["id"]
    flow = agent_with(api, fake, tool)
    assert searched(api, flow, "search", "When does the library open?") == "9 am"
    path, asked, headers = searches.queries[-1]
    assert (path, asked, headers["x-api-key"]) == ("/search", {"q": "When does the library open?"}, "serper-key")
    # Without an answer box, the first organic result's snippet (as LangChain's tool).
    assert searched(api, flow, "search", "owls") == "About owls, part 1."


def test_google_custom_search_reads_a_stored_credential(api, fake, searches):
    r = api.post("/credentials", json={
        "name": "Google CSE", "credentialName": "googleCustomSearchApi",
        "plainDataObj": {"googleCustomSearchApiKey": "google-key", "googleCustomSearchApiId": "cx-1"},
        "allowedHosts": ["127.0.0.2"]})
    assert r.status_code == 201, r.text
    tool = flows.node("googleCustomSearch_0", "googleCustomSearch", {"basePath": searches.url})
    tool["data"]["credential"] = r.json()["id"]
    flow = agent_with(api, fake, tool)
    results = json.loads(searched(api, flow, "google-custom-search", "owls"))
    assert [r["link"] for r in results] == [f"https://example.com/{n}" for n in (1, 2, 3)]
    path, query, _ = searches.queries[-1]
    assert (path, query) == ("/customsearch/v1", {"key": "google-key", "cx": "cx-1", "q": "owls"})


def refusal(api, fake, tool):
    """The 400 a prediction of an agent with `tool` answers, before anything is sent."""
    seen = len(fake.bodies("/chat/completions"))
    message = assert_error(predict(api, agent_with(api, fake, tool), "owls?"), 400)["message"]
    assert len(fake.bodies("/chat/completions")) == seen
    return message


def test_the_servers_key_goes_only_to_the_services_host(api, fake, searches):
    # A node pointing Brave elsewhere without a key of its own is refused, naming the setting.
    seen = len(searches.queries)
    tool = flows.node("braveSearchAPI_0", "braveSearchAPI", {"basePath": searches.url})
    message = refusal(api, fake, tool)
    assert "BRAVE_SEARCH_API_KEY" in message and "127.0.0.2" in message and "server-brave-key" not in message
    # A key the server does not have (Google's), nor the node: where it would come from.
    tool = flows.node("googleCustomSearch_0", "googleCustomSearch", {"basePath": searches.url})
    message = refusal(api, fake, tool)
    assert "googleCustomSearchApi" in message and "GOOGLE_CUSTOM_SEARCH_API_KEY" in message
    assert len(searches.queries) == seen


def test_a_search_api_on_a_private_address_is_guarded(tmp_path_factory, fake, searches):
    w = Weir(tmp_path_factory.mktemp("weir-search-guarded"), "sqlite")
    w.start()
    try:
        guarded = Api(w.url, w.create_key())
        tool = flows.node("serpAPI_0", "serpAPI", {"basePath": searches.url, "serpApiKey": "serp-key"})
        seen = len(searches.queries)
        output = searched(guarded, agent_with(guarded, fake, tool), "search", "owls")
        assert output.startswith("Error:") and "refused" in output and "127.0.0.2" in output, output
        assert "serp-key" not in output and len(searches.queries) == seen
    finally:
        w.cleanup()
