"""Builders of Flowise-format flowData for the tests."""

import base64
import json
import re


def node(node_id, name, inputs):
    return {"id": node_id, "position": {"x": 0, "y": 0}, "type": "customNode",
            "data": {"id": node_id, "name": name, "label": name, "inputs": inputs}}


def ref(node_id):
    return "{{" + node_id + ".data.instance}}"


def edge(source, target):
    return {"id": f"{source}-{target}", "source": source, "target": target,
            "sourceHandle": f"{source}-output", "targetHandle": f"{target}-input"}


def graph(nodes, edges=()):
    return {"nodes": list(nodes), "edges": list(edges), "viewport": {"x": 0, "y": 0, "zoom": 1}}


def openai_model(base, key="sk-good", **inputs):
    return node("chatOpenAI_0", "chatOpenAI", {"modelName": "gpt-test", "temperature": 0.9,
                                               "basePath": f"{base}/v1", "openAIApiKey": key,
                                               "cache": "", "allowImageUploads": True, **inputs})


def anthropic_model(base, key="sk-good"):
    return node("chatAnthropic_0", "chatAnthropic", {"modelName": "claude-test", "basePath": base,
                                                     "anthropicApiKey": key, "temperature": 0.5})


def ollama_model(base, model="llama-test"):
    return node("chatOllama_0", "chatOllama", {"baseUrl": base, "modelName": model, "temperature": 0.3})


def local_model(**inputs):
    return node("chatLocal_0", "chatLocal", inputs)


def conversation(model, memory=None, system=None):
    inputs = {"model": ref(model["id"])}
    nodes = [model]
    if memory is not None:
        nodes.append(memory)
        inputs["memory"] = ref(memory["id"])
    if system is not None:
        inputs["systemMessagePrompt"] = system
    chain = node("conversationChain_0", "conversationChain", inputs)
    nodes.append(chain)
    edges = [edge(n["id"], chain["id"]) for n in nodes[:-1]]
    return graph(nodes, edges)


def buffer_memory(**inputs):
    return node("bufferMemory_0", "bufferMemory", inputs)


def window_memory(k):
    return node("bufferWindowMemory_0", "bufferWindowMemory", {"k": str(k)})


def llm_chain(model, prompt):
    chain = node("llmChain_0", "llmChain", {"model": ref(model["id"]), "prompt": ref(prompt["id"])})
    return graph([model, prompt, chain], [edge(model["id"], chain["id"]), edge(prompt["id"], chain["id"])])


def prompt_template(template, values=None):
    return node("promptTemplate_0", "promptTemplate",
                {"template": template, "promptValues": json.dumps(values or {})})


def chat_prompt_template(system, human, values=None):
    return node("chatPromptTemplate_0", "chatPromptTemplate",
                {"systemMessagePrompt": system, "humanMessagePrompt": human, "promptValues": values or {}})


# --- Engine v2: tools, agents, multi-agent and sequential flows -----------------------

_REF = re.compile(r"^\{\{([\w-]+)\.data\.instance\}\}$")


def refs(nodes):
    return [ref(n["id"]) for n in nodes]


def wired(nodes, branches=None):
    """A graph whose edges repeat every reference in the nodes' inputs, as Flowise
    writes them. `branches` maps (condition id, target id) to the name of the
    condition's output the edge leaves from (Flowise's handle for it is
    `<condition>-output-<name in lower case>-Agent|LLMNode|ToolNode`)."""
    edges = []
    for target in nodes:
        for name, value in target["data"]["inputs"].items():
            for item in value if isinstance(value, list) else [value]:
                m = isinstance(item, str) and _REF.match(item)
                if not m:
                    continue
                source = m.group(1)
                branch = (branches or {}).get((source, target["id"]))
                handle = f"{source}-output-{branch.lower()}-Agent|LLMNode|ToolNode" if branch else f"{source}-output"
                edges.append({"id": f"{source}-{target['id']}-{name}", "source": source, "target": target["id"],
                              "sourceHandle": handle, "targetHandle": f"{target['id']}-input-{name}"})
    return graph(nodes, edges)


def azure_model(base, deployment="gpt-dep", key="sk-good", version="2024-06-01"):
    return node("azureChatOpenAI_0", "azureChatOpenAI", {
        "azureOpenAIApiKey": key, "azureOpenAIApiInstanceName": "fake-instance",
        "azureOpenAIApiDeploymentName": deployment, "azureOpenAIApiVersion": version,
        "basePath": f"{base}/openai/deployments/{deployment}"})


def mistral_model(base, key="sk-good"):
    return node("chatMistralAI_0", "chatMistralAI", {"mistralAIAPIKey": key, "modelName": "mistral-test",
                                                     "overrideEndpoint": f"{base}/v1"})


def calculator(node_id="calculator_0"):
    return node(node_id, "calculator", {})


def current_date_time(node_id="currentDateTime_0"):
    return node(node_id, "currentDateTime", {})


def requests_get(node_id="requestsGet_0", **inputs):
    """Inputs: `url` (wins over the model's), `description`, `headers`."""
    return node(node_id, "requestsGet", inputs)


def requests_post(node_id="requestsPost_0", **inputs):
    """Inputs: `url`, `body`, `headers`, `description`."""
    return node(node_id, "requestsPost", inputs)


def retriever_tool(node_id="retrieverTool_0", **inputs):
    """Inputs: `name`, `description`, `retriever` (a reference to a vector store
    node), `returnSourceDocuments`."""
    return node(node_id, "retrieverTool", inputs)


def custom_tool(tool_id, node_id="customTool_0", **inputs):
    """Flowise's custom tool: `selectedTool` names a stored tool."""
    return node(node_id, "customTool", {"selectedTool": tool_id, **inputs})


def python_tool(node_id="pythonTool_0", **inputs):
    """`toolId` (a stored tool) or inline `toolName`, `toolDescription`, `schema`,
    `code`, `requirements`; `timeout`."""
    return node(node_id, "pythonTool", inputs)


def agent(model, tools=(), memory=None, kind="toolAgent", **inputs):
    """`kind` (toolAgent, conversationalAgent, reactAgentChat) over `model` with
    `tools` and optional `memory`; other inputs (systemMessage, maxIterations) as given."""
    nodes = [model, *tools]
    agent_inputs = {"model": ref(model["id"]), "tools": refs(tools), **inputs}
    if memory is not None:
        nodes.append(memory)
        agent_inputs["memory"] = ref(memory["id"])
    nodes.append(node(f"{kind}_0", kind, agent_inputs))
    return wired(nodes)


def tool_agent(model, tools=(), memory=None, **inputs):
    return agent(model, tools, memory, "toolAgent", **inputs)


def supervisor(model, node_id="supervisor_0", name="Supervisor", **inputs):
    """Inputs besides the name and model: supervisorPrompt, recursionLimit."""
    return node(node_id, "supervisor", {"supervisorName": name, "model": ref(model["id"]), **inputs})


def worker(node_id, name, prompt, boss, tools=(), model=None, **inputs):
    worker_inputs = {"workerName": name, "workerPrompt": prompt, "supervisor": ref(boss["id"]), "tools": refs(tools)}
    if model is not None:
        worker_inputs["model"] = ref(model["id"])
    return node(node_id, "worker", {**worker_inputs, **inputs})


def seq_start(model, node_id="seqStart_0", **inputs):
    return node(node_id, "seqStart", {"model": ref(model["id"]), **inputs})


def seq_agent(node_id, name, after, system="", human="", tools=(), **inputs):
    """`after`: ids of the predecessors (`sequentialNode`)."""
    return node(node_id, "seqAgent", {"agentName": name, "systemMessagePrompt": system, "humanMessagePrompt": human,
                                      "tools": refs(tools), "sequentialNode": [ref(a) for a in after], **inputs})


def seq_llm(node_id, name, after, system="", human="", **inputs):
    return node(node_id, "seqLLMNode", {"llmNodeName": name, "systemMessagePrompt": system,
                                        "humanMessagePrompt": human, "sequentialNode": [ref(a) for a in after],
                                        **inputs})


def seq_tool_node(node_id, name, tools, llm_node_id, **inputs):
    return node(node_id, "seqToolNode", {"toolNodeName": name, "tools": refs(tools), "llmNode": ref(llm_node_id),
                                         **inputs})


def seq_condition(node_id, name, after, rows):
    """`rows`: {variable, operation, value, output}; stored as JSON text, as Flowise does."""
    return node(node_id, "seqCondition", {"conditionName": name, "sequentialNode": [ref(a) for a in after],
                                          "conditionUI": json.dumps(rows)})


def seq_end(node_id, after):
    """Flowise writes an End's single predecessor as a plain reference, not a list."""
    return node(node_id, "seqEnd", {"sequentialNode": ref(after)})


# --- Retrieval: embeddings, document loaders, splitters, vector stores, chains --------

def openai_embeddings(base, key="sk-good", node_id="openAIEmbeddings_0", **inputs):
    """Inputs besides these: `dimensions`, `batchSize`, `stripNewLines`."""
    return node(node_id, "openAIEmbeddings", {"modelName": "text-embedding-test", "basepath": f"{base}/v1",
                                              "openAIApiKey": key, **inputs})


def azure_embeddings(base, deployment="emb-dep", key="sk-good", version="2024-06-01",
                     node_id="azureOpenAIEmbeddings_0"):
    return node(node_id, "azureOpenAIEmbeddings", {
        "azureOpenAIApiKey": key, "azureOpenAIApiInstanceName": "fake-instance",
        "azureOpenAIApiDeploymentName": deployment, "azureOpenAIApiVersion": version,
        "basePath": f"{base}/openai/deployments/{deployment}"})


def ollama_embeddings(base, model="embed-test", node_id="ollamaEmbedding_0"):
    return node(node_id, "ollamaEmbedding", {"baseUrl": base, "modelName": model})


def localai_embeddings(base, model="local-embed-test", key="sk-good", node_id="localAIEmbeddings_0"):
    return node(node_id, "localAIEmbeddings", {"basePath": f"{base}/v1", "modelName": model, "localAIApiKey": key})


def local_embeddings(node_id="localEmbeddings_0"):
    """weir's embedded all-MiniLM-L6-v2: no key, no network."""
    return node(node_id, "localEmbeddings", {})


def data_url(name, content, mime="text/plain"):
    """A file input as Flowise writes it in flowData."""
    data = content.encode() if isinstance(content, str) else content
    return f"data:{mime};base64,{base64.b64encode(data).decode()},filename:{name}"


def plain_text(text, splitter=None, node_id="plainText_0", **inputs):
    """Inputs besides these: `metadata` (JSON text), `omitMetadataKeys`."""
    return _loader(node_id, "plainText", {"text": text}, splitter, inputs)


def text_file(txt_file="", splitter=None, node_id="textFile_0", **inputs):
    return _loader(node_id, "textFile", {"txtFile": txt_file}, splitter, inputs)


def csv_file(csv="", splitter=None, node_id="csvFile_0", **inputs):
    """Inputs besides these: `columnName`, `metadata`."""
    return _loader(node_id, "csvFile", {"csvFile": csv}, splitter, inputs)


def json_file(json_text="", splitter=None, node_id="jsonFile_0", **inputs):
    """Inputs besides these: `pointersName` (comma-separated keys)."""
    return _loader(node_id, "jsonFile", {"jsonFile": json_text}, splitter, inputs)


def jsonlines_file(jsonl="", splitter=None, node_id="jsonlinesFile_0", **inputs):
    """Inputs besides these: `pointerName`."""
    return _loader(node_id, "jsonlinesFile", {"jsonlinesFile": jsonl}, splitter, inputs)


def pdf_file(pdf="", splitter=None, node_id="pdfFile_0", usage="perPage", **inputs):
    return _loader(node_id, "pdfFile", {"pdfFile": pdf, "usage": usage}, splitter, inputs)


def docx_file(docx="", splitter=None, node_id="docxFile_0", **inputs):
    return _loader(node_id, "docxFile", {"docxFile": docx}, splitter, inputs)


def _loader(node_id, name, file_inputs, splitter, inputs):
    if splitter is not None:
        inputs = {"textSplitter": ref(splitter["id"]), **inputs}
    return node(node_id, name, {**file_inputs, **inputs})


def recursive_splitter(chunk_size, chunk_overlap=0, separators=None, node_id="recursiveCharacterTextSplitter_0"):
    """`separators`: a list, written as Flowise does (JSON text)."""
    inputs = {"chunkSize": chunk_size, "chunkOverlap": chunk_overlap}
    if separators is not None:
        inputs["separators"] = json.dumps(separators)
    return node(node_id, "recursiveCharacterTextSplitter", inputs)


def character_splitter(chunk_size, chunk_overlap=0, separator=None, node_id="characterTextSplitter_0"):
    inputs = {"chunkSize": chunk_size, "chunkOverlap": chunk_overlap}
    if separator is not None:
        inputs["separator"] = separator
    return node(node_id, "characterTextSplitter", inputs)


def markdown_splitter(chunk_size, chunk_overlap=0, node_id="markdownTextSplitter_0"):
    return node(node_id, "markdownTextSplitter", {"chunkSize": chunk_size, "chunkOverlap": chunk_overlap})


def token_splitter(chunk_size, chunk_overlap=0, encoding="cl100k_base", node_id="tokenTextSplitter_0"):
    return node(node_id, "tokenTextSplitter", {"encodingName": encoding, "chunkSize": chunk_size,
                                               "chunkOverlap": chunk_overlap})


def vector_store(kind, loaders, embeddings, node_id=None, **inputs):
    """A `kind` (memoryVectorStore, faiss, postgres) store of the loaders' documents.
    Inputs besides these: `topK`, `searchType` (similarity, mmr, hybrid), `fetchK`,
    `lambda`."""
    return node(node_id or f"{kind}_0", kind, {"document": refs(loaders), "embeddings": ref(embeddings["id"]),
                                               **inputs})


def memory_vector_store(loaders, embeddings, node_id="memoryVectorStore_0", **inputs):
    return vector_store("memoryVectorStore", loaders, embeddings, node_id, **inputs)


def faiss_store(loaders, embeddings, node_id="faiss_0", **inputs):
    """Flowise's FAISS node; weir keeps its own index, `basePath` is ignored."""
    return vector_store("faiss", loaders, embeddings, node_id, basePath="/tmp/faiss-ignored", **inputs)


def postgres_store(loaders, embeddings, node_id="postgres_0", **inputs):
    """Flowise's pgvector node; weir keeps the chunks in its own store whatever the
    connection inputs say."""
    return vector_store("postgres", loaders, embeddings, node_id, host="db.example.invalid", database="vectors",
                        port=5432, tableName="documents", **inputs)


def retrieval_qa_chain(model, store, node_id="retrievalQAChain_0", **inputs):
    return node(node_id, "retrievalQAChain", {"model": ref(model["id"]), "vectorStoreRetriever": ref(store["id"]),
                                              **inputs})


def conversational_retrieval_qa_chain(model, store, memory=None, node_id="conversationalRetrievalQAChain_0",
                                      **inputs):
    """Inputs besides these: `returnSourceDocuments`, `rephrasePrompt`, `responsePrompt`."""
    chain_inputs = {"model": ref(model["id"]), "vectorStoreRetriever": ref(store["id"]), **inputs}
    if memory is not None:
        chain_inputs["memory"] = ref(memory["id"])
    return node(node_id, "conversationalRetrievalQAChain", chain_inputs)


def rag(*nodes):
    """A flow of these nodes (loaders, splitters, embeddings, stores, a chain...),
    wired by their references."""
    return wired(list(nodes))
