"""Flowise's Document Store API (`/api/v1/document-store/*`) over HTTP, on both
stores: a store made, loaders previewed, saved and processed (a text file and a
real PDF), chunks paged, edited and deleted with their vectors following, the
vector store saved, inserted (nothing embedded twice), queried with scores and
`hybrid`, refreshed, emptied and deleted; the upsert API with multipart files;
an agentflow's retriever and an agent searching a store by `<id>:<name>`;
permissions and workspaces; each error's status.

Embeddings come from the fake OpenAI server (a bag of words per text), so a
question finds the chunks sharing its words, and the fake records every text it
embedded."""

import json
import uuid

import pytest

import flows
from fakes import FakeProviders
from flows import af_agent, af_openai, af_reply, af_retriever, af_start, mention, rich
from prediction_client import ask, create_flow, nonce, tools_used
from test_retrieval import make_pdf
from weir_harness import Api, assert_error, wait_for

HANDBOOK = ("The canteen serves soup on Mondays.\n\nThe gym opens at six in the morning.\n\n"
            "Parking permits are renewed every January.")
PARAGRAPHS = HANDBOOK.split("\n\n")
SPLITTER = {"splitterId": "characterTextSplitter", "splitterName": "Character Text Splitter",
            "splitterConfig": {"chunkSize": 40, "chunkOverlap": 0, "separator": "\n\n"}}


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def embedding(fake):
    return {"embeddingName": "openAIEmbeddings",
            "embeddingConfig": {"modelName": "text-embedding-test", "basePath": f"{fake.url}/v1",
                                "openAIApiKey": "sk-good"}}


VECTORS = {"vectorStoreName": "memoryVectorStore", "vectorStoreConfig": {"topK": 2}}


def ok(response, status=200):
    assert response.status_code == status, f"{response.status_code} {response.text}"
    return response.json()


def new_store(api, name="Handbook"):
    return ok(api.post("/document-store/store", json={"name": name, "description": "What staff need to know"}))


def text_loader(store_id, text=HANDBOOK, name="handbook.txt", **extra):
    return {"storeId": store_id, "loaderId": "textFile", "loaderName": "Text File",
            "loaderConfig": {"txtFile": flows.data_url(name, text)}, **SPLITTER, **extra}


def filled_store(api, fake, name="Handbook"):
    """A store with the handbook processed and inserted: (store id, loader id)."""
    store = new_store(api, name)
    loader = ok(api.post("/document-store/loader/save", json=text_loader(store["id"])))
    ok(api.post(f"/document-store/loader/process/{loader['id']}", json={"storeId": store["id"]}))
    inserted = ok(api.post("/document-store/vectorstore/insert",
                           json={"storeId": store["id"], **embedding(fake), **VECTORS}))
    assert inserted["numAdded"] == 3, inserted
    return store["id"], loader["id"]


def query(api, store_id, text, **inputs):
    body = {"storeId": store_id, "query": text}
    if inputs:
        body["inputs"] = inputs
    return ok(api.post("/document-store/vectorstore/query", json=body))


def chunks(api, store_id, loader="all", page=1):
    return ok(api.get(f"/document-store/chunks/{store_id}/{loader}/{page}"))


def test_a_store_is_made_loaded_processed_inserted_and_queried(api, fake):
    created = new_store(api)
    store_id = created["id"]
    # Created as Flowise answers: the entity, JSON fields as text, EMPTY.
    assert created["status"] == "EMPTY" and created["loaders"] == "[]" and created["whereUsed"] == "[]"
    assert created["name"] == "Handbook" and created["vectorStoreConfig"] is None

    preview = ok(api.post("/document-store/loader/preview", json={**text_loader(store_id), "previewChunkCount": 2}))
    assert preview["totalChunks"] == 3 and preview["previewChunkCount"] == 2
    # More asked than there are: the count is of what is shown, as Flowise's.
    every = ok(api.post("/document-store/loader/preview", json={**text_loader(store_id), "previewChunkCount": 20}))
    assert (len(every["chunks"]), every["previewChunkCount"], every["totalChunks"]) == (3, 3, 3)
    assert [c["pageContent"] for c in preview["chunks"]] == PARAGRAPHS[:2]
    assert preview["chunks"][0]["metadata"]["source"] == "handbook.txt"
    # A preview keeps nothing.
    assert ok(api.get(f"/document-store/store/{store_id}"))["loaders"] == []

    loader = ok(api.post("/document-store/loader/save", json=text_loader(store_id)))
    assert loader["status"] == "SYNCING" and loader["loaderId"] == "textFile"
    # The file is kept apart; the config names it as Flowise does.
    assert loader["loaderConfig"]["txtFile"] == 'FILE-STORAGE::["handbook.txt"]'
    assert [(f["name"], f["size"]) for f in loader["files"]] == [("handbook.txt", len(HANDBOOK))]
    assert loader["source"] == "handbook.txt"
    assert ok(api.get(f"/document-store/store/{store_id}"))["status"] == "STALE"

    page = ok(api.post(f"/document-store/loader/process/{loader['id']}", json={"storeId": store_id}))
    assert page["count"] == 3 and page["currentPage"] == 1 and page["docId"] == loader["id"]
    assert [(c["chunkNo"], c["pageContent"]) for c in page["chunks"]] == list(enumerate(PARAGRAPHS, 1))
    assert json.loads(page["chunks"][0]["metadata"])["source"] == "handbook.txt"
    assert page["characters"] == sum(len(p) for p in PARAGRAPHS)
    shown = ok(api.get(f"/document-store/store/{store_id}"))
    assert shown["status"] == "SYNC" and shown["totalChunks"] == 3
    assert shown["loaders"][0]["status"] == "SYNC" and shown["loaders"][0]["totalChunks"] == 3

    texts_before = len(fake.embedded_texts())
    inserted = ok(api.post("/document-store/vectorstore/insert",
                           json={"storeId": store_id, **embedding(fake), **VECTORS}))
    assert (inserted["numAdded"], inserted["numSkipped"]) == (3, 0), inserted
    assert all(d["metadata"]["docId"] == loader["id"] for d in inserted["addedDocs"])
    assert sum(len(t) for t in fake.embedded_texts()[texts_before:]) == 3
    shown = ok(api.get(f"/document-store/store/{store_id}"))
    assert shown["status"] == "UPSERTED"
    assert shown["vectorStoreConfig"] == {"name": "memoryVectorStore", "config": {"topK": 2}}
    assert shown["embeddingConfig"]["name"] == "openAIEmbeddings"

    found = query(api, store_id, "When does the gym open?")
    assert isinstance(found["timeTaken"], int) and len(found["docs"]) == 2
    best = found["docs"][0]
    gym = page["chunks"][1]
    assert best["pageContent"] == PARAGRAPHS[1] and best["id"] == gym["id"] and best["chunkNo"] == 2
    assert best["metadata"]["docId"] == loader["id"] and isinstance(best["score"], float)
    assert best["score"] >= found["docs"][1]["score"]
    # A query's inputs: topK, and weir's hybrid search.
    [only] = query(api, store_id, "parking permits January", topK=1, searchType="hybrid")["docs"]
    assert only["pageContent"] == PARAGRAPHS[2]

    # Inserting again embeds nothing.
    texts_before = len(fake.embedded_texts())
    again = ok(api.post("/document-store/vectorstore/insert", json={"storeId": store_id}))
    assert (again["numAdded"], again["numSkipped"], again["numDeleted"]) == (0, 3, 0), again
    assert len(fake.embedded_texts()) == texts_before


def test_chunks_edited_and_deleted_take_their_vectors_with_them(api, fake):
    store_id, loader_id = filled_store(api, fake)
    page = chunks(api, store_id, loader_id)
    gym = page["chunks"][1]
    texts_before = len(fake.embedded_texts())
    edited = ok(api.put(f"/document-store/chunks/{store_id}/{loader_id}/{gym['id']}",
                        json={"pageContent": "The swimming pool opens at seven.", "metadata": {"topic": "pool"}}))
    assert edited["chunks"][1]["pageContent"] == "The swimming pool opens at seven."
    assert json.loads(edited["chunks"][1]["metadata"]) == {"topic": "pool"}
    # Only the new text was embedded; the old vector is gone.
    assert fake.embedded_texts()[texts_before:] == [["The swimming pool opens at seven."]]
    docs = query(api, store_id, "swimming pool", topK=3)["docs"]
    assert [d["pageContent"] for d in docs][0] == "The swimming pool opens at seven."
    assert PARAGRAPHS[1] not in [d["pageContent"] for d in docs]
    assert docs[0]["metadata"]["topic"] == "pool"

    deleted = ok(api.delete(f"/document-store/chunks/{store_id}/{loader_id}/{gym['id']}"))
    assert deleted["count"] == 2
    docs = query(api, store_id, "swimming pool", topK=3)["docs"]
    assert "The swimming pool opens at seven." not in [d["pageContent"] for d in docs]
    assert ok(api.get(f"/document-store/store/{store_id}"))["totalChunks"] == 2

    # A refresh reads the file again: the deleted paragraph comes back, embedded
    # once; the unchanged ones are not embedded again.
    texts_before = len(fake.embedded_texts())
    [result] = ok(api.post(f"/document-store/refresh/{store_id}", json={}))
    assert (result["numAdded"], result["numSkipped"]) == (1, 2), result
    assert fake.embedded_texts()[texts_before:] == [[PARAGRAPHS[1]]]
    assert chunks(api, store_id)["count"] == 3

    # Empty text is refused; unknown chunks and loaders are 404.
    assert_error(api.put(f"/document-store/chunks/{store_id}/{loader_id}/{gym['id']}",
                         json={"pageContent": "x"}), 404, "chunk")
    first = chunks(api, store_id, loader_id)["chunks"][0]
    assert_error(api.put(f"/document-store/chunks/{store_id}/{loader_id}/{first['id']}",
                         json={"pageContent": "  "}), 400, "pageContent")
    assert_error(api.delete(f"/document-store/chunks/{store_id}/{uuid.uuid4()}/{first['id']}"), 404, "loader")


def test_a_failed_embedding_leaves_chunks_and_vectors_as_they_were(api, fake):
    store_id, loader_id = filled_store(api, fake)
    first = chunks(api, store_id, loader_id)["chunks"][0]
    fake.fail_embeddings(10, status=400)
    try:
        r = api.put(f"/document-store/chunks/{store_id}/{loader_id}/{first['id']}",
                    json={"pageContent": "Soup is served on Fridays now.", "metadata": {}})
    finally:
        fake.fail_embeddings(0)
    assert_error(r, 502)
    assert chunks(api, store_id, loader_id)["chunks"][0]["pageContent"] == PARAGRAPHS[0]
    assert query(api, store_id, "canteen soup", topK=1)["docs"][0]["pageContent"] == PARAGRAPHS[0]


def test_vectors_deleted_then_loader_and_store(api, fake):
    store_id, loader_id = filled_store(api, fake)
    gone = ok(api.delete(f"/document-store/vectorstore/{store_id}"))
    assert gone == {"numDeleted": 3}
    assert ok(api.get(f"/document-store/store/{store_id}"))["status"] == "SYNC"
    assert query(api, store_id, "gym")["docs"] == []
    # The chunks stay; inserting again fills the vectors.
    assert chunks(api, store_id)["count"] == 3
    assert ok(api.post("/document-store/vectorstore/insert", json={"storeId": store_id}))["numAdded"] == 3

    shown = ok(api.delete(f"/document-store/loader/{store_id}/{loader_id}"))
    assert shown["loaders"] == [] and shown["totalChunks"] == 0
    assert chunks(api, store_id)["count"] == 0
    assert query(api, store_id, "gym")["docs"] == []

    assert ok(api.delete(f"/document-store/store/{store_id}")) == {"deleted": 1}
    assert_error(api.get(f"/document-store/store/{store_id}"), 404)
    assert_error(api.delete(f"/document-store/store/{store_id}"), 404)


def test_stores_are_listed_paged_and_renamed(api):
    a, b = new_store(api, "A"), new_store(api, "B")
    listed = ok(api.get("/document-store/store"))
    assert [s["name"] for s in listed] == ["B", "A"]
    paged = ok(api.get("/document-store/store?page=1&limit=1"))
    assert paged["total"] == 2 and [s["name"] for s in paged["data"]] == ["B"]
    renamed = ok(api.put(f"/document-store/store/{a['id']}", json={"name": "A2", "description": "new"}))
    assert (renamed["name"], renamed["description"]) == ("A2", "new")
    assert [s["name"] for s in ok(api.get("/document-store/store"))] == ["A2", "B"]
    assert_error(api.put(f"/document-store/store/{b['id']}", json={"loaders": [{"loaderId": "x"}]}), 400,
                 "loader")
    assert_error(api.post("/document-store/store", json={"description": "no name"}), 412, "name")
    components = ok(api.get("/document-store/components/loaders"))
    assert {"textFile", "pdfFile", "plainText"} <= {c["name"] for c in components}
    # Flowise's node definitions, as the UI's loader picker reads them.
    text_file = next(c for c in components if c["name"] == "textFile")
    assert (text_file["label"], text_file["category"]) == ("Text File", "Document Loaders")
    assert text_file == ok(api.get("/nodes/textFile"))
    assert "memoryVectorStore" in {c["name"] for c in ok(api.get("/document-store/components/vectorstore"))}


def test_a_pdf_and_a_text_file_through_the_upsert_api(api, fake):
    store_id = new_store(api)["id"]
    pdf = make_pdf(["Glaciers carve deep valleys.", "Coral reefs shelter marine species."])
    parts = [("files", ("nature.pdf", pdf, "application/pdf")),
             ("splitter", (None, json.dumps({"name": "characterTextSplitter",
                                             "config": {"chunkSize": 200, "chunkOverlap": 0}}))),
             ("vectorStore", (None, json.dumps({"name": "memoryVectorStore", "config": {"topK": 1}}))),
             ("embedding", (None, json.dumps({"name": "openAIEmbeddings", "config": embedding(fake)["embeddingConfig"]}))),
             ("metadata", (None, json.dumps({"team": "geo"})))]
    body = ok(api.post(f"/document-store/upsert/{store_id}", files=parts))
    assert body["numAdded"] == 2, body
    pdf_loader = body["docId"]
    shown = ok(api.get(f"/document-store/store/{store_id}"))
    assert shown["status"] == "UPSERTED"
    [loader] = shown["loaders"]
    assert loader["id"] == pdf_loader and loader["loaderId"] == "pdfFile" and loader["files"][0]["name"] == "nature.pdf"
    [hit] = query(api, store_id, "coral reefs")["docs"]
    assert "Coral reefs" in hit["pageContent"] and hit["metadata"]["team"] == "geo"

    # A text file beside it: a second loader, chosen by the file's type.
    body = ok(api.post(f"/document-store/upsert/{store_id}",
                       files=[("files", ("handbook.txt", HANDBOOK.encode(), "text/plain"))]))
    assert body["numAdded"] == 1 and body["docId"] != pdf_loader
    assert len(ok(api.get(f"/document-store/store/{store_id}"))["loaders"]) == 2
    assert query(api, store_id, "gym opens")["docs"][0]["pageContent"] == HANDBOOK

    # The same PDF again, replacing its loader: nothing embedded.
    texts_before = len(fake.embedded_texts())
    body = ok(api.post(f"/document-store/upsert/{store_id}", files=[
        ("files", ("nature.pdf", pdf, "application/pdf")), ("docId", (None, pdf_loader)),
        ("replaceExisting", (None, "true")), ("metadata", (None, json.dumps({"team": "geo"})))]))
    assert (body["numAdded"], body["numSkipped"], body["docId"]) == (0, 2, pdf_loader), body
    assert len(fake.embedded_texts()) == texts_before
    assert len(ok(api.get(f"/document-store/store/{store_id}"))["loaders"]) == 2

    # A JSON upsert naming a loader config; a new store made from this one.
    body = ok(api.post(f"/document-store/upsert/{store_id}", json={
        "createNewDocStore": True, "docStore": {"name": "Copy"},
        "loader": {"name": "plainText", "config": {"text": "Bicycles are stored in the basement."}}}))
    assert body["numAdded"] == 1
    copies = [s for s in ok(api.get("/document-store/store")) if s["name"] == "Copy"]
    assert len(copies) == 1 and copies[0]["status"] == "UPSERTED"
    assert query(api, copies[0]["id"], "bicycles")["docs"][0]["pageContent"] == "Bicycles are stored in the basement."

    assert_error(api.post(f"/document-store/upsert/{store_id}", json={}), 400, "oader")
    assert_error(api.post(f"/document-store/upsert/{uuid.uuid4()}", json={}), 404)


def agentflow(nodes):
    return flows.agentflow(list(nodes), [(a["id"], b["id"]) for a, b in zip(nodes, nodes[1:])])


def test_agentflows_search_a_store_by_id_and_name(api, fake):
    store_id, _ = filled_store(api, fake)
    node = af_retriever("retrieverAgentflow_0", [f"{store_id}:Handbook"], rich(mention("question")))
    reply = af_reply("directReplyAgentflow_0", rich("Found: " + mention("retrieverAgentflow_0")))
    flow = create_flow(api, agentflow([af_start(), node, reply]), type="AGENTFLOW")
    body = ask(api, flow, "Which day has soup in the canteen?")
    assert body["text"].startswith("Found: The canteen serves soup on Mondays.")

    agent = af_agent("agentAgentflow_0", af_openai(fake.url, field="agentModel"), agentKnowledgeDocumentStores=[
        {"documentStore": f"{store_id}:Staff handbook", "docStoreDescription": "What staff need to know",
         "returnSourceDocuments": True}])
    flow = create_flow(api, agentflow([af_start(), agent]), type="AGENTFLOW")
    body = ask(api, flow, f'{nonce()} CALL Staff_handbook {{"input": "When does the gym open?"}}')
    assert PARAGRAPHS[1] in [d["pageContent"] for d in body["sourceDocuments"]]
    [(tool, _, _)] = tools_used(body["usedTools"])
    assert tool == "Staff_handbook"


def test_a_store_not_yet_inserted_is_a_clear_error_for_a_flow(api, fake):
    store = new_store(api)
    node = af_retriever("retrieverAgentflow_0", [f"{store['id']}:Handbook"], rich(mention("question")))
    flow = create_flow(api, agentflow([af_start(), node]), type="AGENTFLOW")
    r = api.post(f"/prediction/{flow}", json={"question": "soup?"})
    assert r.status_code >= 400 and "vectorstore/insert" in r.text, r.text


def test_loader_and_vector_errors(api, fake):
    store_id = new_store(api)["id"]
    assert_error(api.post("/document-store/loader/preview",
                          json={"loaderId": "notALoader", "loaderConfig": {}}), 400, "notALoader")
    assert_error(api.post("/document-store/loader/preview",
                          json={"loaderId": "textFile", "loaderConfig": {"noSuchInput": 1}}), 400, "noSuchInput")
    assert_error(api.post("/document-store/loader/save", json={"loaderId": "textFile"}), 412, "storeId")
    assert_error(api.post("/document-store/loader/save", json={"storeId": str(uuid.uuid4()), "loaderId": "textFile"}),
                 404)
    assert_error(api.post(f"/document-store/loader/process/{uuid.uuid4()}", json={"storeId": store_id}), 404, "loader")
    # Nothing to search before a vector store is set; a half config is refused.
    assert_error(api.post("/document-store/vectorstore/query", json={"storeId": store_id, "query": "x"}), 400)
    assert_error(api.post("/document-store/vectorstore/insert", json={"storeId": store_id}), 400, "vectorstore/save")
    assert_error(api.post("/document-store/vectorstore/save", json={"storeId": store_id, **VECTORS}), 400, "embeddings")
    assert_error(api.post("/document-store/vectorstore/save", json={
        "storeId": store_id, **embedding(fake), "vectorStoreName": "memoryVectorStore",
        "vectorStoreConfig": {"searchType": "sideways"}}), 400, "searchType")
    saved = ok(api.post("/document-store/vectorstore/save", json={"storeId": store_id, **embedding(fake), **VECTORS}))
    assert json.loads(saved["vectorStoreConfig"]) == {"name": "memoryVectorStore", "config": {"topK": 2}}
    # A query may not move the embeddings' endpoint.
    assert_error(api.post("/document-store/vectorstore/query", json={
        "storeId": store_id, "query": "x", "inputs": {"basePath": "http://elsewhere"}}), 400, "basePath")
    assert_error(api.post("/document-store/vectorstore/query", json={"storeId": store_id}), 412, "query")


def test_keys_need_the_document_store_permissions_and_stay_in_their_workspace(server, api, fake):
    store_id = new_store(api)["id"]
    workspace = f"ws-{uuid.uuid4().hex[:8]}"
    reader = api.with_key(server.create_key("documentStores:read", workspace=workspace))
    flows_only = api.with_key(server.create_key("chatflows:read", "chatflows:write", workspace=workspace))
    assert_error(flows_only.get("/document-store/store"), 403, "documentStores:read")
    assert ok(reader.get("/document-store/store")) == []
    assert_error(reader.post("/document-store/store", json={"name": "x"}), 403, "documentStores:write")
    # Another workspace's store is not found.
    assert_error(reader.get(f"/document-store/store/{store_id}"), 404)
    assert_error(reader.post("/document-store/vectorstore/query", json={"storeId": store_id, "query": "x"}), 404)


def test_a_chatflow_answers_from_a_store_through_document_store_vs(api, fake):
    """Flowise's "Conversational Retrieval QA Chain" shape: the chain's retriever is
    a `documentStoreVS` node naming the store, searched with the store's own
    embeddings and vector store settings."""
    store_id, _ = filled_store(api, fake)
    store = flows.node("documentStoreVS_0", "documentStoreVS", {"selectedStore": store_id})
    model = flows.openai_model(fake.url)
    chain = flows.conversational_retrieval_qa_chain(model, store, returnSourceDocuments=True)
    flow = create_flow(api, flows.rag(store, model, chain))
    body = ask(api, flow, "When does the gym open?")
    assert PARAGRAPHS[1] in [d["pageContent"] for d in body["sourceDocuments"]]
    assert len(body["sourceDocuments"]) == 2, "the store's topK (2)"
    # The store lists the chatflows that use it (Flowise's whereUsed), until they go.
    assert ok(api.get(f"/document-store/store/{store_id}"))["whereUsed"] == [{"id": flow, "name": "flow"}]
    assert ok(api.get("/document-store/store"))[0]["whereUsed"] == [flow]
    # Such a node is filled through the document-store API, not a chatflow's upsert.
    assert_error(api.post(f"/vector/upsert/{flow}", json={}), 400, "document-store")
    assert api.delete(f"/chatflows/{flow}").status_code == 204
    assert ok(api.get(f"/document-store/store/{store_id}"))["whereUsed"] == []
    # A store of another workspace, or none, is a clear failure of the run.
    other = flows.node("documentStoreVS_0", "documentStoreVS", {"selectedStore": str(uuid.uuid4())})
    flow = create_flow(api, flows.rag(other, model, flows.conversational_retrieval_qa_chain(model, other)))
    r = api.post(f"/prediction/{flow}", json={"question": "gym?"})
    assert r.status_code >= 400 and "no document store" in r.text, r.text
    bad = flows.node("documentStoreVS_0", "documentStoreVS", {"selectedStore": "not-an-id"})
    flow = create_flow(api, flows.rag(bad, model, flows.conversational_retrieval_qa_chain(model, bad)))
    assert_error(api.post(f"/prediction/{flow}", json={"question": "gym?"}), 400, "selectedStore")


def test_a_chatflow_fills_its_own_store_from_a_document_store(api, fake):
    """The `documentStore` loader: a store's chunks (already split, with their
    metadata) upserted into a chatflow's vector store."""
    store_id, _ = filled_store(api, fake)
    loader = flows.node("documentStore_0", "documentStore", {"selectedStore": store_id})
    embeddings = flows.openai_embeddings(fake.url)
    vectors = flows.memory_vector_store([loader], embeddings, topK=1)
    model = flows.openai_model(fake.url)
    chain = flows.retrieval_qa_chain(model, vectors)
    flow = create_flow(api, flows.rag(loader, embeddings, vectors, model, chain))
    r = api.post(f"/vector/upsert/{flow}", json={})
    assert r.status_code == 200 and r.json()["numAdded"] == 3, r.text
    assert {d["metadata"]["source"] for d in r.json()["addedDocs"]} == {"handbook.txt"}
    missing = flows.node("documentStore_0", "documentStore", {"selectedStore": str(uuid.uuid4())})
    vectors = flows.memory_vector_store([missing], embeddings, topK=1)
    flow = create_flow(api, flows.rag(missing, embeddings, vectors, model,
                                      flows.retrieval_qa_chain(model, vectors)))
    assert_error(api.post(f"/vector/upsert/{flow}", json={}), 400, "no document store")


def test_an_insert_past_the_body_timeout_goes_on_as_a_job(make_weir, fake):
    """The request waits for an insert at most WEIR_BODY_TIMEOUT_SECS, then answers
    202 while the job goes on; the store's status tells the rest, and a second
    insert meanwhile is a 409."""
    w = make_weir("sqlite")
    w.env.update(WEIR_BODY_TIMEOUT_SECS="1")
    w.start()
    api = Api(w.url, w.create_key())
    store = new_store(api)["id"]
    loader = ok(api.post("/document-store/loader/save", json=text_loader(store)))
    ok(api.post(f"/document-store/loader/process/{loader['id']}", json={"storeId": store}))
    slow = embedding(fake)
    slow["embeddingConfig"] = {**slow["embeddingConfig"], "modelName": "slow-2500ms"}
    r = api.post("/document-store/vectorstore/insert", json={"storeId": store, **slow, **VECTORS})
    assert r.status_code == 202 and r.json() == {"status": "UPSERTING", "storeId": store}, r.text
    assert ok(api.get(f"/document-store/store/{store}"))["status"] == "UPSERTING"
    assert_error(api.post("/document-store/vectorstore/insert", json={"storeId": store}), 409, "UPSERTING")
    wait_for(lambda: ok(api.get(f"/document-store/store/{store}"))["status"] == "UPSERTED", 20, "the insert's end")
    assert [d["pageContent"] for d in query(api, store, "gym opens")["docs"]][0] == PARAGRAPHS[1]


def test_store_configs_list_what_an_upsert_may_set(api, fake):
    store_id, loader_id = filled_store(api, fake, name=f"Configs {nonce()}")
    rows = ok(api.get(f"/document-store/store-configs/{store_id}/{loader_id}"))
    by_node = {}
    for row in rows:
        assert set(row) == {"node", "nodeId", "label", "name", "type"}
        by_node.setdefault(row["nodeId"], {})[row["name"]] = row["type"]
    assert set(by_node) == {"textFile_0", "characterTextSplitter_0", "memoryVectorStore_0", "openAIEmbeddings_0"}
    assert by_node["textFile_0"]["files"] == "file"
    assert by_node["characterTextSplitter_0"]["chunkSize"] == "number"
    assert by_node["openAIEmbeddings_0"]["modelName"] == "string"
    assert_error(api.get(f"/document-store/store-configs/{store_id}/{uuid.uuid4()}"), 404)
    assert_error(api.get(f"/document-store/store-configs/{uuid.uuid4()}/{loader_id}"), 404)


def test_a_chat_model_describes_a_store_for_its_tool(api, fake):
    store_id, _ = filled_store(api, fake, name=f"Described {nonce()}")
    marker = nonce()
    model = {"name": "chatOpenAI", "inputs": {"modelName": f"gpt-{marker}", "basePath": f"{fake.url}/v1",
                                              "openAIApiKey": "sk-good", "temperature": 0.2}}
    answer = ok(api.post(f"/document-store/generate-tool-desc/{store_id}", json={"selectedChatModel": model}))
    # The fake echoes the prompt: it held the store's first chunks, in order.
    assert answer["content"].startswith("Echo: Below are the first passages of a knowledge base.")
    assert answer["content"].endswith("\n".join(PARAGRAPHS))
    [sent] = [b for b in fake.bodies("/chat/completions") if b.get("model") == f"gpt-{marker}"]
    assert sent["temperature"] == 0.2
    # No model, a node that is not a chat model, a store without chunks.
    assert_error(api.post(f"/document-store/generate-tool-desc/{store_id}", json={}), 412, "selectedChatModel")
    assert_error(api.post(f"/document-store/generate-tool-desc/{store_id}",
                          json={"selectedChatModel": {"name": "calculator", "inputs": {}}}), 400, "chat model")
    empty = new_store(api, f"Empty {nonce()}")
    assert_error(api.post(f"/document-store/generate-tool-desc/{empty['id']}",
                          json={"selectedChatModel": model}), 404)
