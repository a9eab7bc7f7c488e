"""The request tools (requests_get, requests_post, requests_put, requests_delete),
Flowise 3's parameter schemas, and their guard: loopback, private, link-local
(cloud metadata) and CGNAT addresses are refused after name resolution and on
every redirect, as a tool error (the prediction still answers 200);
ALLOW_PRIVATE_REQUESTS lets listed addresses (or all, with `true`) through."""

import json

import pytest

import flows
from fakes import FakeProviders, FakeSite
from prediction_client import ask, create_flow, tools_used
from weir_harness import Api, Weir


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module")
def inner():
    """A site on 127.0.0.1 that no test may reach unless everything is allowed."""
    site = FakeSite("127.0.0.1", body="inner secret")
    yield site
    site.close()


@pytest.fixture(scope="module")
def outer():
    """A site on 127.0.0.2, the address the allow-listing server lets through."""
    site = FakeSite("127.0.0.2", body="public page")
    yield site
    site.close()


@pytest.fixture(scope="module")
def redirector(inner):
    """On 127.0.0.2, redirecting every request to the inner site."""
    site = FakeSite("127.0.0.2", redirect_to=f"{inner.url}/secret")
    yield site
    site.close()


def weir_allowing(tmp_path_factory, allow):
    w = Weir(tmp_path_factory.mktemp("weir-allow"), "sqlite")
    w.env["ALLOW_PRIVATE_REQUESTS"] = allow
    return w.start()


@pytest.fixture(scope="module")
def allowing(tmp_path_factory):
    """A server that allows 127.0.0.2 (and an unrelated TEST-NET address)."""
    w = weir_allowing(tmp_path_factory, "192.0.2.1,127.0.0.2/32")
    yield Api(w.url, w.create_key())
    w.cleanup()


def get_flow(api, fake, **inputs):
    return create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.requests_get(**inputs)]))


def fetch(api, flow, url):
    """The toolOutput of one requests_get call the model makes for `url`."""
    body = ask(api, flow, f'Fetch it. CALL requests_get {{"url": "{url}"}}')
    [(tool, arguments, output)] = tools_used(body["usedTools"])
    assert (tool, arguments) == ("requests_get", {"url": url})
    assert body["text"] == f"Done: {output}"
    return output


def assert_refused(output, address):
    assert output.startswith("Error:") and "refused" in output and address in output, output


@pytest.mark.parametrize("url, address", [
    ("{inner}/secret", "127.0.0.1"),
    ("http://10.0.0.1/", "10.0.0.1"),
    ("http://172.16.5.4/", "172.16.5.4"),
    ("http://192.168.1.1/admin", "192.168.1.1"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
    ("http://100.64.0.1/", "100.64.0.1"),
    ("http://[::1]:{port}/secret", "::1"),
])
def test_private_addresses_are_refused(api, fake, inner, url, address):
    hits = len(inner.hits)
    flow = get_flow(api, fake)
    assert_refused(fetch(api, flow, url.format(inner=inner.url, port=inner.port)), address)
    assert len(inner.hits) == hits


def test_names_are_checked_after_resolution(api, fake, inner):
    hits = len(inner.hits)
    output = fetch(api, get_flow(api, fake), f"http://localhost:{inner.port}/secret")
    assert output.startswith("Error:") and "refused" in output
    assert "127.0.0.1" in output or "::1" in output, output
    assert len(inner.hits) == hits


def test_the_node_url_wins_over_the_model(api, fake):
    flow = get_flow(api, fake, url="http://169.254.169.254/latest/meta-data/")
    assert_refused(fetch(api, flow, "http://example.invalid/"), "169.254.169.254")


def test_post_is_guarded_too(api, fake, inner):
    hits = len(inner.hits)
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.requests_post()]))
    body = ask(api, flow, f'CALL requests_post {{"url": "{inner.url}/submit", "body": "a=1"}}')
    [(tool, _, output)] = tools_used(body["usedTools"])
    assert tool == "requests_post"
    assert_refused(output, "127.0.0.1")
    assert len(inner.hits) == hits


def test_an_allowed_address_is_fetched_with_the_node_headers(allowing, fake, outer):
    flow = get_flow(allowing, fake, headers='{"X-Weir-Test": "yes"}')
    assert "public page" in fetch(allowing, flow, f"{outer.url}/page")
    method, path, headers, _ = outer.hits[-1]
    assert (method, path, headers.get("x-weir-test")) == ("GET", "/page", "yes")


def test_a_redirect_to_a_refused_address_is_refused(allowing, fake, inner, redirector):
    hits = len(inner.hits)
    assert_refused(fetch(allowing, get_flow(allowing, fake), f"{redirector.url}/start"), "127.0.0.1")
    assert redirector.hits and redirector.hits[-1][1] == "/start"
    assert len(inner.hits) == hits, "the redirect was followed"


def test_an_allow_list_allows_only_what_it_lists(allowing, fake, inner):
    assert_refused(fetch(allowing, get_flow(allowing, fake), f"{inner.url}/secret"), "127.0.0.1")


def test_an_allowed_post_sends_its_body(allowing, fake, outer):
    flow = create_flow(allowing, flows.tool_agent(flows.openai_model(fake.url), [flows.requests_post()]))
    body = ask(allowing, flow, f'CALL requests_post {{"url": "{outer.url}/submit", "body": "a=1"}}')
    [(_, _, output)] = tools_used(body["usedTools"])
    assert "posted: a=1" in output
    method, path, _, sent = outer.hits[-1]
    assert (method, path, sent) == ("POST", "/submit", "a=1")


def test_true_allows_every_address(tmp_path_factory, fake, inner):
    w = weir_allowing(tmp_path_factory, "true")
    try:
        api = Api(w.url, w.create_key())
        assert "inner secret" in fetch(api, get_flow(api, fake), f"{inner.url}/secret")
    finally:
        w.cleanup()


def offered(fake, name):
    """The parameters the model was offered for tool `name` in the last chat request."""
    tools = fake.last("/chat/completions").get("tools") or []
    return next(t["function"]["parameters"] for t in tools if t["function"]["name"] == name)


def test_put_merges_the_models_body_of_the_nodes_schema_into_the_fixed_one(allowing, fake, outer):
    schema = {"name": {"type": "string", "required": True, "description": "What it is called"},
              "count": {"type": "number", "description": "How many"}}
    tool = flows.requests_put(requestsPutUrl=f"{outer.url}/items/7", requestsPutBody='{"source": "weir"}',
                              requestsPutBodySchema=schema, requestsPutHeaders='{"X-Weir-Test": "put"}')
    flow = create_flow(allowing, flows.tool_agent(flows.openai_model(fake.url), [tool]))
    body = ask(allowing, flow, 'Rename it. CALL requests_put {"body": {"name": "owl", "count": 2}}')
    [(name, _, output)] = tools_used(body["usedTools"])
    assert name == "requests_put" and output.startswith("put: ")
    method, path, headers, sent = outer.hits[-1]
    assert (method, path, headers["x-weir-test"]) == ("PUT", "/items/7", "put")
    assert json.loads(sent) == {"source": "weir", "name": "owl", "count": 2}
    # The model was offered the node's schema as Flowise 3 builds it.
    parameters = offered(fake, "requests_put")
    assert parameters["required"] == ["body"]
    assert parameters["properties"]["body"]["properties"] == {
        "name": {"type": "string", "description": "What it is called"},
        "count": {"type": "number", "description": "How many"}}
    assert parameters["properties"]["body"]["required"] == ["name"]


def test_delete_and_get_place_their_parameters_in_the_path_and_the_query(allowing, fake, outer):
    schema = {"id": {"type": "string", "required": True, "in": "path", "description": "The item. /:id"},
              "hard": {"type": "boolean", "in": "query", "description": "Delete for good"}}
    delete = flows.requests_delete(requestsDeleteUrl=f"{outer.url}/items/:id/versions",
                                   requestsDeleteQueryParamsSchema=json.dumps(schema))
    get = flows.requests_get(requestsGetUrl=f"{outer.url}/items", requestsGetQueryParamsSchema=schema)
    flow = create_flow(allowing, flows.tool_agent(flows.openai_model(fake.url), [delete, get]))
    ask(allowing, flow, 'CALL requests_delete {"queryParams": {"id": "a b", "hard": "true", "other": "x"}}')
    method, path, _, _ = outer.hits[-1]
    assert (method, path) == ("DELETE", "/items/a%20b/versions?hard=true")
    assert offered(fake, "requests_delete")["properties"]["queryParams"]["required"] == ["id"]
    # A path parameter the URL has no place for is appended, as Flowise does.
    ask(allowing, flow, 'CALL requests_get {"queryParams": {"id": "7"}}')
    assert outer.hits[-1][:2] == ("GET", "/items/7")


def test_put_and_delete_are_guarded_too(api, fake, inner):
    hits = len(inner.hits)
    tools = [flows.requests_put(requestsPutUrl=f"{inner.url}/x"),
             flows.requests_delete(requestsDeleteUrl=f"{inner.url}/x")]
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), tools))
    for tool in ("requests_put", "requests_delete"):
        body = ask(api, flow, f"CALL {tool} {{}}")
        [(_, _, output)] = tools_used(body["usedTools"])
        assert_refused(output, "127.0.0.1")
    assert len(inner.hits) == hits


@pytest.fixture(scope="module")
def searxng():
    from fakes import FakeSearxng
    site = FakeSearxng("127.0.0.2")
    yield site
    site.close()


def test_a_searxng_instance_is_searched_for_the_model(allowing, fake, searxng):
    tool = flows.searxng(searxng.url, categories="news", language="en", pageno=2, time_range="day",
                         safesearch=1, headers='{"X-Weir-Test": "search"}')
    flow = create_flow(allowing, flows.tool_agent(flows.openai_model(fake.url), [tool]))
    body = ask(allowing, flow, 'Any news? CALL searxng-search {"input": "owls"}')
    [(name, arguments, output)] = tools_used(body["usedTools"])
    assert (name, arguments) == ("searxng-search", {"input": "owls"})
    results = json.loads(output)
    assert results[0] == {"title": "owls 1", "link": "https://example.com/1", "snippet": "About owls, part 1."}
    assert len(results) == 3
    path, query, headers = searxng.queries[-1]
    assert path == "/search" and headers["x-weir-test"] == "search"
    assert query == {"q": "owls", "format": "json", "categories": "news", "language": "en", "pageno": "2",
                     "time_range": "day", "safesearch": "1"}
    # An instant answer, or nothing at all, as Flowise's tool says them.
    body = ask(allowing, flow, 'CALL searxng-search {"input": "answer me"}')
    assert tools_used(body["usedTools"])[0][2] == "42"
    body = ask(allowing, flow, 'CALL searxng-search {"input": "nothing"}')
    assert tools_used(body["usedTools"])[0][2] == "No good results found."


def test_a_searxng_instance_is_guarded_like_any_address(api, fake, searxng):
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.searxng(searxng.url)]))
    seen = len(searxng.queries)
    body = ask(api, flow, 'CALL searxng-search {"input": "owls"}')
    assert_refused(tools_used(body["usedTools"])[0][2], "127.0.0.2")
    assert len(searxng.queries) == seen


@pytest.fixture(scope="module")
def website():
    """A small site on 127.0.0.2: a home page linking to /a and /b (and elsewhere),
    /a linking to /c, a sitemap listing /b and /c, and a PDF."""
    site = FakeSite("127.0.0.2", pages={})

    def page(title, text, links=(), description=None):
        meta = f'<meta name="description" content="{description}">' if description else ""
        anchors = "".join(f'<a href="{href}">{href}</a>' for href in links)
        return f"<html><head><title>{title}</title>{meta}</head><body><p>{text}</p><p>  More   text. </p>{anchors}</body></html>"

    site.pages.update({
        "/": page("Home", "Welcome home.", ["/a", "/b", "/a#top", "https://other.example/x"], "The home"),
        "/a": page("A", "Page A.", ["/c"]),
        "/b": page("B", "Page B."),
        "/c": page("C", "Page C."),
        "/sitemap.xml": ("application/xml", f"<urlset><url><loc>{site.url}/b</loc></url>"
                                            f"<url><loc>{site.url}/c</loc></url></urlset>".encode()),
        "/doc.pdf": ("application/pdf", b"%PDF-1.4"),
    })
    yield site
    site.close()


def scraped(api, flow, url):
    body = ask(api, flow, f'Read the site. CALL web_scraper_tool {{"input": "{url}"}}')
    [(name, _, output)] = tools_used(body["usedTools"])
    assert name == "web_scraper_tool"
    return json.loads(output)


def test_the_web_scraper_follows_a_sites_links_level_by_level(allowing, fake, website):
    scraper = flows.web_scraper_tool(maxDepth=2, maxPages=10)
    flow = create_flow(allowing, flows.tool_agent(flows.openai_model(fake.url), [scraper]))
    pages = scraped(allowing, flow, f"{website.url}/")
    assert [p["url"] for p in pages] == [f"{website.url}/", f"{website.url}/a", f"{website.url}/b"]
    assert pages[0] == {"url": f"{website.url}/", "title": "Home", "description": "The home",
                        "body_text": "Welcome home. More text."}
    assert pages[1]["description"] == "No description found"
    # The description the model reads says what the tool will do.
    tools = fake.last("/chat/completions")["tools"]
    assert "up to 2 level(s) deep or until 10 pages" in tools[0]["function"]["description"]
    # At most maxPages pages; what is not a web page is said so.
    flow = create_flow(allowing, flows.tool_agent(flows.openai_model(fake.url),
                                                  [flows.web_scraper_tool(maxDepth=3, maxPages=2)]))
    assert len(scraped(allowing, flow, f"{website.url}/")) == 2
    [pdf] = scraped(allowing, flow, f"{website.url}/doc.pdf")
    assert pdf["error"] == "Skipped non-HTML content (Content-Type: application/pdf)"


def test_the_web_scraper_reads_a_sitemap_or_falls_back(allowing, fake, website, outer):
    flow = create_flow(allowing, flows.tool_agent(flows.openai_model(fake.url),
                                                  [flows.web_scraper_tool(scrapeMode="sitemap")]))
    pages = scraped(allowing, flow, f"{website.url}/")
    assert [(p["url"], p["title"]) for p in pages] == [(f"{website.url}/b", "B"), (f"{website.url}/c", "C")]
    # A site without a sitemap is scraped from the page given, with a warning.
    fallback = scraped(allowing, flow, f"{outer.url}/page")
    assert fallback["warning"].startswith("Sitemap not found or empty")
    assert [p["url"] for p in fallback["scrapedData"]] == [f"{outer.url}/page"]


def test_the_web_scraper_is_guarded_too(api, fake, inner):
    hits = len(inner.hits)
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.web_scraper_tool()]))
    [page] = scraped(api, flow, f"{inner.url}/secret")
    assert "refused" in page["error"] and "127.0.0.1" in page["error"]
    assert len(inner.hits) == hits
