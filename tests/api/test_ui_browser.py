"""Flowise's own UI on weir, in a real browser (headless Chromium, driven by
Playwright, as the widget test does): sign in with the key weir printed at its
first start, find the chatflow in the list, open it on the canvas, drag a node
from the palette and connect it, save (the canvas asks `has-changed`, then
`PUT`s), chat with the flow in the canvas's panel and get the fake provider's
streamed answer, then open the executions page, the agentflow's canvas, and the
tools (a tool's dialog: its Python), variables, credentials, API keys, document stores (a
store's own page) and marketplace pages. A screenshot of each step is kept
under tests/.cache/ui-screenshots. The flow drawn in the UI then runs through
`/prediction/:id` unchanged. Any request the UI makes that weir answers with a
server error, or any script error on the page, fails the test.
"""

import json
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

import flows
from fakes import FakeProviders
from test_embed_widget import CHROMIUM, chromium
from weir_harness import UI_DIR, Api

SHOTS = Path(__file__).resolve().parent.parent / ".cache" / "ui-screenshots"

pytestmark = pytest.mark.skipif(not (UI_DIR / "build" / "index.html").exists(),
                                reason="Flowise's UI is not fetched (scripts/fetch-ui)")


def test_a_flow_is_drawn_saved_and_chatted_with_in_flowises_ui(make_weir):
    assert CHROMIUM.exists(), "Chromium is missing: scripts/system-deps installs Debian's chromium"
    SHOTS.mkdir(parents=True, exist_ok=True)
    fake = FakeProviders()
    w = make_weir()
    w.start()
    key = (w.data_dir / "initial-api-key").read_text().strip()
    api = Api(w.url, key)
    created = api.post("/chatflows", json={
        "name": "shop assistant",
        "flowData": flows.conversation(flows.openai_model(fake.url), flows.buffer_memory())})
    assert created.status_code == 201, created.text
    flow = created.json()["id"]
    start = flows.af_start()
    llm = flows.af_llm("llmAgentflow_0", flows.af_openai(fake.url))
    # At the versions the palette offers, as a flow drawn in Flowise 3.1 carries them
    # (an older one gets the canvas's "node outdated" badge).
    for node in (start, llm):
        node["data"]["version"] = api.get(f"/nodes/{node['data']['name']}").json()["version"]
    agentflow = api.post("/chatflows", json={"name": "parcel triage", "type": "AGENTFLOW",
                                             "flowData": flows.agentflow([start, llm], [(start["id"], llm["id"])])})
    assert agentflow.status_code == 201, agentflow.text
    ran = api.post(f"/prediction/{agentflow.json()['id']}", json={"question": "Route my parcel"})
    assert ran.status_code == 200 and ran.json()["executionId"], ran.text
    # Records the other pages list.
    assert api.post("/tools", json={"name": "weigh_parcel", "description": "Weighs a parcel",
                                    "code": "return 1"}).status_code == 201
    assert api.post("/variables", json={"name": "warehouse", "value": "eu-1", "type": "static"}).status_code == 201
    store = api.post("/document-store/store", json={"name": "parcel manuals", "description": "How parcels go"})
    assert store.status_code in (200, 201), store.text
    assert api.post("/credentials", json={"name": "shop openai", "credentialName": "openAIApi",
                                          "plainDataObj": {"openAIApiKey": "sk-shop"}}).status_code == 201

    seen = {"api": [], "errors": []}

    def answered(response):
        if "/api/" in response.url:
            seen["api"].append((response.request.method, response.url.replace(w.url, ""), response.status))

    def console(message):
        # The page's own links to third-party fonts, a tracker and GitHub are
        # what weir's Content-Security-Policy blocks on purpose.
        if message.type == "error" and "Content Security Policy" not in message.text \
                and "ERR_BLOCKED" not in message.text and "api.github.com" not in message.text:
            seen["errors"].append(message.text)

    def step(tab, name):
        tab.screenshot(path=str(SHOTS / f"{name}.png"))

    with sync_playwright() as p:
        browser = chromium(p)
        tab = browser.new_page(viewport={"width": 1400, "height": 900})
        tab.on("response", answered)
        tab.on("pageerror", lambda e: seen["errors"].append(str(e)))
        tab.on("console", console)

        # Sign in: the UI's own page, the key as the password.
        tab.goto(w.url)
        tab.locator("input[name=username]").wait_for(timeout=20_000)
        step(tab, "1-sign-in")
        tab.locator("input[name=username]").fill("ada@example.com")
        tab.locator("input[type=password]").fill(key)
        tab.get_by_role("button", name="Login").click()

        # The chatflows list.
        card = tab.get_by_text("shop assistant")
        card.wait_for(timeout=20_000)
        step(tab, "2-chatflows")
        card.click()
        tab.wait_for_url(f"**/canvas/{flow}", timeout=20_000)
        tab.locator(".react-flow__node").first.wait_for(timeout=20_000)
        assert tab.locator(".react-flow__node").count() == 3
        step(tab, "3-canvas")

        # Drag a node from the palette and connect it to the chain.
        tab.locator("button[title='Add Node']").click()
        tab.get_by_placeholder("Search nodes").fill("Simple Prompt Moderation")
        item = tab.get_by_text("Simple Prompt Moderation", exact=True).first
        item.wait_for(timeout=10_000)
        step(tab, "4-palette")
        item.drag_to(tab.locator(".react-flow__pane"), target_position={"x": 700, "y": 650})
        added = tab.locator(".react-flow__node", has_text="Simple Prompt Moderation")
        added.wait_for(timeout=10_000)
        tab.locator("button[title='Add Node']").click()  # closes the palette
        source = added.locator(".react-flow__handle-right").first
        target = tab.locator("[data-handleid^='conversationChain_0-input-inputModeration-']")
        source.drag_to(target)
        step(tab, "5-connected")

        # Save: the canvas asks whether the flow changed, then saves it.
        with tab.expect_response(lambda r: r.request.method == "PUT" and f"/chatflows/{flow}" in r.url) as saved:
            tab.locator("button[title='Save Chatflow']").click()
        assert saved.value.status == 200, saved.value.text()
        assert any("/chatflows/has-changed/" in path for _, path, _ in seen["api"])
        step(tab, "6-saved")

        # Chat in the canvas's panel: a streamed answer from the fake provider.
        tab.locator("button[title='Chat']").click()
        box = tab.get_by_placeholder("Type your question...")
        box.wait_for(timeout=10_000)
        box.fill("Where is my parcel?")
        box.press("Enter")
        tab.get_by_text("Echo: Where is my parcel?").wait_for(timeout=30_000)
        step(tab, "7-chat")

        # The executions page lists the agentflow's run.
        tab.goto(f"{w.url}/executions")
        tab.get_by_text("parcel triage").first.wait_for(timeout=20_000)
        step(tab, "8-executions")

        # The agentflow opens on the V2 canvas.
        tab.goto(f"{w.url}/agentflows")
        tab.get_by_text("parcel triage").first.click()
        tab.wait_for_url(f"**/v2/agentcanvas/{agentflow.json()['id']}", timeout=20_000)
        tab.locator(".react-flow__node").nth(1).wait_for(timeout=20_000)
        step(tab, "9-agentflow")

        # The workspace's records, each on its page.
        for number, (page, shown) in enumerate([("/tools", "weigh_parcel"), ("/variables", "warehouse"),
                                                 ("/credentials", "shop openai"), ("/apikey", "initial"),
                                                 ("/document-stores", "parcel manuals"),
                                                 ("/marketplaces", "Marketplace")], start=10):
            tab.goto(f"{w.url}{page}")
            tab.get_by_text(shown).first.wait_for(timeout=20_000)
            step(tab, f"{number}-{page.strip('/')}")
            if page == "/tools":
                # The tool's dialog: its code in the editor labelled Python.
                tab.get_by_text(shown).first.click()
                label = tab.get_by_text("Python Function")
                label.wait_for(timeout=20_000)
                label.scroll_into_view_if_needed()
                tab.wait_for_timeout(600)  # the dialog's fade-in, for the screenshot
                step(tab, f"{number}-tools-dialog")
                tab.keyboard.press("Escape")
            if page == "/document-stores":
                # The store's own page: its loaders (none yet) and what it can do.
                tab.get_by_text(shown).first.click()
                tab.wait_for_url(f"**/document-stores/{store.json()['id']}", timeout=20_000)
                tab.get_by_text("How parcels go").first.wait_for(timeout=20_000)
                step(tab, f"{number}-document-store")
                # The loaders it can take are the ones weir runs.
                tab.get_by_role("button", name="Add Document Loader").first.click()
                tab.get_by_text("Text File").first.wait_for(timeout=20_000)
                step(tab, f"{number}-document-loaders")
                # A loader configured, its chunks previewed, then processed into the store.
                tab.get_by_text("Plain Text").first.click()
                tab.get_by_placeholder("Lorem ipsum", exact=False).fill("Parcels leave the warehouse at noon.")
                tab.get_by_text("Preview Chunks").first.click()
                tab.get_by_text("Parcels leave the warehouse at noon.").first.wait_for(timeout=20_000)
                tab.get_by_text("1 of 1 Chunks").wait_for(timeout=20_000)
                step(tab, f"{number}-document-preview")
                tab.get_by_text("Process", exact=True).first.click()
                tab.wait_for_url(f"**/document-stores/{store.json()['id']}", timeout=20_000)
                tab.get_by_text("Plain Text").first.wait_for(timeout=20_000)
                step(tab, f"{number}-document-processed")
        browser.close()

    # The loader the UI processed holds the text, as one chunk of the store.
    kept = api.get(f"/document-store/store/{store.json()['id']}").json()
    assert [(loader["loaderId"], loader["totalChunks"]) for loader in kept["loaders"]] == [("plainText", 1)], kept

    server_errors = [call for call in seen["api"] if call[2] >= 500]
    assert not server_errors, server_errors
    assert not seen["errors"], seen["errors"]
    prediction = [c for c in seen["api"] if c[1] == f"/api/v1/internal-prediction/{flow}"]
    assert prediction and prediction[0][2] == 200, seen["api"]

    # What the UI saved is the flow weir runs: the moderation node, connected.
    saved_flow = json.loads(api.get(f"/chatflows/{flow}").json()["flowData"])
    moderation = [n for n in saved_flow["nodes"] if n["data"]["name"] == "inputModerationSimple"]
    assert len(moderation) == 1, [n["data"]["name"] for n in saved_flow["nodes"]]
    chain = next(n for n in saved_flow["nodes"] if n["data"]["name"] == "conversationChain")
    assert chain["data"]["inputs"]["inputModeration"] == [f"{{{{{moderation[0]['id']}.data.instance}}}}"]
    answer = api.post(f"/prediction/{flow}", json={"question": "And my refund?"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["text"] == "Echo: And my refund?"
    # The panel's chat is the canvas's own (INTERNAL); the API's is not.
    internal = api.get(f"/internal-chatmessage/{flow}").json()
    assert [m["content"] for m in internal if m["role"] == "userMessage"] == ["Where is my parcel?"]
