"""Builders of Flowise-format flowData for the tests."""

import base64
import json
import re


def node(node_id, name, inputs):
    return {"id": node_id, "position": {"x": 0, "y": 0}, "type": "customNode",
            "data": {"id": node_id, "name": name, "label": name, "inputs": inputs}}


def flowise_node(node_id, name, node_type, category, inputs, outputs=None):
    """A node as Flowise's editor writes it in an export (the fields weir reads, and
    those it ignores): for marketplace templates written by hand."""
    return {"id": node_id, "position": {"x": 0, "y": 0}, "type": "customNode", "width": 300, "height": 500,
            "data": {"id": node_id, "label": name, "version": 2, "name": name, "type": node_type,
                     "category": category, "baseClasses": [node_type], "inputParams": [], "inputAnchors": [],
                     "outputAnchors": [], "inputs": inputs, "outputs": outputs or {}, "selected": False},
            "selected": False, "dragging": False}


def flowise_edge(source, source_handle, target, target_handle):
    """An edge as Flowise's editor writes it: `<source>-output-<handle>` to
    `<target>-input-<handle>`."""
    return {"source": source, "sourceHandle": f"{source}-output-{source_handle}", "target": target,
            "targetHandle": f"{target}-input-{target_handle}", "type": "buttonedge",
            "id": f"{source}-{target}-{target_handle}", "data": {"label": ""}}


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


def gemini_model(base, key="sk-good", **inputs):
    return node("chatGoogleGenerativeAI_0", "chatGoogleGenerativeAI", {
        "modelName": "gemini-test", "baseUrl": base, "googleGenerativeAPIKey": key, "temperature": 0.4,
        "cache": "", "allowImageUploads": True, **inputs})


def gemini_embeddings(base, key="sk-good", node_id="googleGenerativeAiEmbeddings_0",
                      name="googleGenerativeAiEmbeddings", **inputs):
    """`name`: Flowise's; weir's former spelling (`googleGenerativeAiEmbedding`) still loads."""
    return node(node_id, name, {"modelName": "gemini-embed-test", "baseUrl": base,
                                                         "googleGenerativeAPIKey": key, **inputs})


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


def parsed_chain(model, prompt, parser):
    """An llmChain whose answer goes through `parser` (an output parser node)."""
    flow = llm_chain(model, prompt)
    flow["nodes"].append(parser)
    chain = next(n for n in flow["nodes"] if n["id"] == "llmChain_0")
    chain["data"]["inputs"]["outputParser"] = ref(parser["id"])
    flow["edges"].append(edge(parser["id"], "llmChain_0"))
    return flow


def csv_output_parser(**inputs):
    return node("csvOutputParser_0", "csvOutputParser", inputs)


def structured_output_parser(**inputs):
    """Flowise's default rows (answer, source) unless `jsonStructure` is given."""
    return node("structuredOutputParser_0", "structuredOutputParser", inputs)


def advanced_structured_output_parser(example_json, **inputs):
    return node("advancedStructuredOutputParser_0", "advancedStructuredOutputParser",
                {"exampleJson": example_json, **inputs})


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


def web_scraper_tool(node_id="webScraperTool_0", **inputs):
    """Inputs: scrapeMode (recursive, sitemap), maxDepth, maxPages, timeoutS, description."""
    return node(node_id, "webScraperTool", inputs)


def searxng(base, node_id="searXNG_0", **inputs):
    return node(node_id, "searXNG", {"apiBase": base, **inputs})


def requests_put(node_id="requestsPut_0", **inputs):
    return node(node_id, "requestsPut", inputs)


def requests_delete(node_id="requestsDelete_0", **inputs):
    return node(node_id, "requestsDelete", inputs)


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


def reranker(kind, base_retriever, base, key="sk-good", node_id=None, **inputs):
    """A rerank retriever (cohereRerankRetriever, JinaRerankRetriever,
    voyageAIRerankRetriever) around `base_retriever` (a store node), on the fake."""
    key_input = {"cohereRerankRetriever": "cohereApiKey", "JinaRerankRetriever": "jinaAIAPIKey",
                 "jinaRerankRetriever": "jinaAIAPIKey",
                 "voyageAIRerankRetriever": "apiKey"}[kind]
    return node(node_id or f"{kind}_0", kind, {"baseRetriever": ref(base_retriever["id"]), "basePath": base,
                                              key_input: key, **inputs})


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


# --- Agentflow V2: Start, LLM, Agent, Tool, Condition, Loop, HTTP... nodes -----------
#
# Nodes are written as Flowise's agentflow editor stores them: `type: "agentFlow"`,
# `data.inputParams` (with `acceptVariable` where Flowise has it, so only those
# inputs take variables), unset inputs as "", models and tools selected by name with
# their own inputs in `<input>Config` (Flowise's loadConfig), edges from
# `<node>-output-<name>` (or `<node>-output-<i>` for a decision node's branch i) to
# the target's id. An iteration node is a flow node of type "iteration" holding a
# block: its children carry `parentNode: <iteration id>` and `extent: "parent"`,
# and edges join only children (none from the iteration node into its block).

AV, OPT, LC = "acceptVariable", "optional", "loadConfig"

# name: (type, color, [(input, input type, flags...)])
AGENTFLOW_NODES = {
    "startAgentflow": ("Start", "#7EE787", [
        ("startInputType", "options"), ("formTitle", "string"), ("formDescription", "string"),
        ("formInputTypes", "array"), ("startEphemeralMemory", "boolean", OPT), ("startState", "array", OPT),
        ("startPersistState", "boolean", OPT)]),
    "llmAgentflow": ("LLM", "#64B5F6", [
        ("llmModel", "asyncOptions", LC), ("llmMessages", "array", AV, OPT), ("llmEnableMemory", "boolean", OPT),
        ("llmMemoryType", "options", OPT), ("llmMemoryWindowSize", "number"), ("llmMemoryMaxTokenLimit", "number"),
        ("llmUserMessage", "string", AV, OPT), ("llmReturnResponseAs", "options"),
        ("llmStructuredOutput", "array", AV, OPT), ("llmUpdateState", "array", AV, OPT)]),
    "agentAgentflow": ("Agent", "#4DD0E1", [
        ("agentModel", "asyncOptions", LC), ("agentMessages", "array", AV, OPT), ("agentTools", "array", OPT),
        ("agentKnowledgeDocumentStores", "array", OPT), ("agentKnowledgeVSEmbeddings", "array", OPT),
        ("agentEnableMemory", "boolean", OPT), ("agentMemoryType", "options", OPT),
        ("agentMemoryWindowSize", "number"), ("agentMemoryMaxTokenLimit", "number"),
        ("agentUserMessage", "string", AV, OPT), ("agentReturnResponseAs", "options"),
        ("agentStructuredOutput", "array", AV, OPT), ("agentUpdateState", "array", AV, OPT)]),
    "toolAgentflow": ("Tool", "#d4a373", [
        ("toolAgentflowSelectedTool", "asyncOptions", LC), ("toolInputArgs", "array", AV),
        ("toolUpdateState", "array", AV, OPT)]),
    "conditionAgentflow": ("Condition", "#FFB938", [("conditions", "array", AV)]),
    "conditionAgentAgentflow": ("ConditionAgent", "#ff8fab", [
        ("conditionAgentModel", "asyncOptions", LC), ("conditionAgentInstructions", "string", AV),
        ("conditionAgentInput", "string", AV), ("conditionAgentScenarios", "array"),
        ("conditionAgentEnableMemory", "boolean", OPT), ("conditionAgentMemoryType", "options", OPT),
        ("conditionAgentOverrideSystemPrompt", "boolean", OPT), ("conditionAgentSystemPrompt", "string", AV, OPT)]),
    "loopAgentflow": ("Loop", "#FFA07A", [
        ("loopBackToNode", "asyncOptions"), ("maxLoopCount", "number"), ("fallbackMessage", "string", AV, OPT),
        ("loopUpdateState", "array", AV, OPT)]),
    "directReplyAgentflow": ("DirectReply", "#4DDBBB", [("directReplyMessage", "string", AV)]),
    "httpAgentflow": ("HTTP", "#FF7F7F", [
        ("method", "options"), ("url", "string", AV), ("headers", "array", AV, OPT),
        ("queryParams", "array", AV, OPT), ("bodyType", "options", OPT), ("body", "string", AV, OPT),
        ("body", "array", AV, OPT), ("responseType", "options", OPT)]),
    "customFunctionAgentflow": ("CustomFunction", "#E4B7FF", [
        ("customFunctionInputVariables", "array", AV, OPT), ("customFunctionJavascriptFunction", "code"),
        ("customFunctionUpdateState", "array", AV, OPT)]),
    "retrieverAgentflow": ("Retriever", "#b8bedd", [
        ("retrieverKnowledgeDocumentStores", "array"), ("retrieverQuery", "string", AV),
        ("outputFormat", "options"), ("retrieverUpdateState", "array", AV, OPT)]),
    "executeFlowAgentflow": ("ExecuteFlow", "#a3b18a", [
        ("executeFlowSelectedFlow", "asyncOptions"), ("executeFlowInput", "string", AV),
        ("executeFlowOverrideConfig", "json", AV, OPT), ("executeFlowBaseURL", "string", OPT),
        ("executeFlowReturnResponseAs", "options"), ("executeFlowUpdateState", "array", AV, OPT)]),
    "iterationAgentflow": ("Iteration", "#9C89B8", [("iterationInput", "string", AV)]),
    "humanInputAgentflow": ("HumanInput", "#6E6EFD", [
        ("humanInputDescriptionType", "options"), ("humanInputDescription", "string", AV),
        ("humanInputModel", "asyncOptions", LC), ("humanInputModelPrompt", "string", AV),
        ("humanInputEnableFeedback", "boolean")]),
    "stickyNoteAgentflow": ("StickyNote", "#fee440", [("note", "string", OPT)]),
}
NO_OUTPUT = {"loopAgentflow", "directReplyAgentflow"}
# The outputs of a human input node: branch 0 proceeds, branch 1 rejects.
HUMAN_OUTPUTS = ["proceed", "reject"]


def af_node(node_id, name, inputs, label=None, branches=None):
    """An agentflow node `name` with these inputs. `branches`: how many output
    anchors a decision node has (`<id>-output-0` ... `-<branches - 1>`)."""
    kind, color, params = AGENTFLOW_NODES[name]
    input_params = []
    for param_name, param_type, *flags in params:
        param = {"label": param_name, "name": param_name, "type": param_type,
                 "id": f"{node_id}-input-{param_name}-{param_type}", "display": True}
        param.update({flag: True for flag in flags})
        input_params.append(param)
    label = label or kind
    if branches is not None:
        anchors = [{"id": f"{node_id}-output-{i}", "label": i, "name": i, "description": f"Condition {i}"}
                   for i in range(branches)]
        if name == "conditionAgentflow":
            anchors[-1]["description"] = "Else"
        if name == "humanInputAgentflow":
            anchors = [{"id": f"{node_id}-output-{i}", "label": output.capitalize(), "name": output}
                       for i, output in enumerate(HUMAN_OUTPUTS)]
        outputs = {name: ""}
    else:
        anchors = [] if name in NO_OUTPUT else [{"id": f"{node_id}-output-{name}", "label": label, "name": name}]
        outputs = {}
    data = {"id": node_id, "label": label, "version": 1, "name": name, "type": kind, "color": color,
            "baseClasses": [kind], "category": "Agent Flows", "inputParams": input_params, "inputAnchors": [],
            "inputs": inputs, "outputAnchors": anchors, "outputs": outputs, "selected": False}
    if name == "startAgentflow":
        data["hideInput"] = True
    if name in NO_OUTPUT:
        data["hideOutput"] = True
    kind = {"stickyNoteAgentflow": "stickyNote", "iterationAgentflow": "iteration"}.get(name, "agentFlow")
    return {"id": node_id, "type": kind, "position": {"x": 0, "y": 0}, "data": data}


def agentflow(nodes, links=()):
    """flowData of these nodes; `links`: (source id, target id) for an ordinary
    edge, (source id, target id, i) for branch i of a decision node."""
    by_id = {n["id"]: n["data"] for n in nodes}
    inside = {n["id"] for n in nodes if n.get("parentNode")}
    edges = []
    for source, target, *branch in links:
        handle = f"{source}-output-{branch[0] if branch else by_id[source]['name']}"
        data = {"sourceColor": by_id[source]["color"], "targetColor": by_id[target]["color"], "isHumanInput": False}
        if branch:
            data["edgeLabel"] = str(branch[0])
        if branch and by_id[source]["name"] == "humanInputAgentflow":
            data.update(edgeLabel=HUMAN_OUTPUTS[branch[0]], isHumanInput=True)
        edge = {"source": source, "sourceHandle": handle, "target": target, "targetHandle": target,
                "data": data, "type": "agentFlow", "id": f"{source}-{handle}-{target}-{target}"}
        if source in inside:
            edge["zIndex"] = 9999
        edges.append(edge)
    return graph(nodes, edges)


def af_model(field, model):
    """The inputs selecting a chat model in an agentflow node: `field` (llmModel,
    agentModel, conditionAgentModel) names the model node type and `<field>Config`
    holds that node's inputs. `model`: a chat model node of this module
    (openai_model(...), anthropic_model(...), ...)."""
    name = model["data"]["name"]
    return {field: name, f"{field}Config": {**model["data"]["inputs"], field: name}}


def af_openai(base, field="llmModel", key="sk-good", model="gpt-test"):
    """The fake's OpenAI-compatible model, as the brief of the agentflow tests gives it."""
    return af_model(field, node("chatOpenAI_0", "chatOpenAI", {"modelName": model, "basePath": f"{base}/v1",
                                                                "openAIApiKey": key}))


def mention(variable):
    """A variable as Flowise's rich-text editor writes it."""
    return (f'<span class="variable" data-type="mention" data-id="{variable}" '
            f'data-label="{variable}">{{{{ {variable} }}}}</span>')


def rich(*paragraphs):
    """Rich text as Flowise stores it: one <p> per paragraph."""
    return "".join(f"<p>{p}</p>" for p in paragraphs)


def af_start(node_id="startAgentflow_0", state=None, persist=None, form=None, **inputs):
    """`state`: startState rows {key, value}; `persist`: startPersistState; `form`:
    formInputTypes rows (the start then takes a form)."""
    values = {"startInputType": "formInput" if form else "chatInput", "formTitle": "", "formDescription": "",
              "formInputTypes": form or "", "startEphemeralMemory": "", "startState": state or "",
              "startPersistState": "" if persist is None else persist}
    return af_node(node_id, "startAgentflow", {**values, **inputs})


def af_llm(node_id, model, messages=(), label="LLM", **inputs):
    """`model`: af_openai(...) or af_model("llmModel", ...); `messages`: llmMessages
    rows {role, content}. Other inputs (llmEnableMemory, llmUserMessage,
    llmStructuredOutput, llmUpdateState, llmReturnResponseAs) as given; memory is
    left unset (off) unless given."""
    values = {**model, "llmMessages": list(messages) or "", "llmUserMessage": "", "llmReturnResponseAs": "userMessage",
              "llmStructuredOutput": "", "llmUpdateState": ""}
    return af_node(node_id, "llmAgentflow", {**values, **inputs}, label)


def af_tool_row(tool, config=None):
    """An agentTools row selecting `tool` (calculator, currentDateTime, requestsGet,
    requestsPost, customTool...) with its own inputs `config`."""
    return {"agentSelectedTool": tool, "agentSelectedToolRequiresHumanInput": "",
            "agentSelectedToolConfig": {**(config or {}), "agentSelectedTool": tool}}


def af_agent(node_id, model, tools=(), messages=(), label="Agent", **inputs):
    """`model`: af_openai(..., field="agentModel"); `tools`: af_tool_row(...) rows."""
    values = {**model, "agentMessages": list(messages) or "", "agentTools": list(tools) or "",
              "agentKnowledgeDocumentStores": "", "agentKnowledgeVSEmbeddings": "", "agentUserMessage": "",
              "agentReturnResponseAs": "userMessage", "agentStructuredOutput": "", "agentUpdateState": ""}
    return af_node(node_id, "agentAgentflow", {**values, **inputs}, label)


def af_tool(node_id, tool, args=None, config=None, label="Tool", **inputs):
    """A Tool node calling `tool` with `args` ({name: value}, toolInputArgs rows)."""
    rows = [{"inputArgName": k, "inputArgValue": v} for k, v in (args or {}).items()]
    values = {"toolAgentflowSelectedTool": tool, "toolInputArgs": rows or "", "toolUpdateState": "",
              "toolAgentflowSelectedToolConfig": {**(config or {}), "toolAgentflowSelectedTool": tool}}
    return af_node(node_id, "toolAgentflow", {**values, **inputs}, label)


def af_condition(node_id, conditions, label="Condition"):
    """`conditions`: rows {type, value1, operation, value2}; branch i of the
    i-th row, the last branch (len(conditions)) is Else."""
    return af_node(node_id, "conditionAgentflow", {"conditions": list(conditions)}, label, len(conditions) + 1)


def af_condition_agent(node_id, model, scenarios, instructions="", label="Condition Agent", **inputs):
    """`model`: af_openai(..., field="conditionAgentModel"); branch i of scenario i.
    The input is the question unless `conditionAgentInput` says otherwise."""
    values = {**model, "conditionAgentInstructions": instructions,
              "conditionAgentInput": rich(mention("question") + " "),
              "conditionAgentScenarios": [{"scenario": s} for s in scenarios],
              "conditionAgentOverrideSystemPrompt": ""}
    return af_node(node_id, "conditionAgentAgentflow", {**values, **inputs}, label, len(scenarios))


def af_loop(node_id, back_to, back_to_label, max_count=None, fallback=None, label="Loop"):
    """Loops back to node `back_to` (whose label is `back_to_label`)."""
    values = {"loopBackToNode": f"{back_to}-{back_to_label}", "fallbackMessage": fallback or "",
              "loopUpdateState": ""}
    if max_count is not None:
        values["maxLoopCount"] = max_count
    return af_node(node_id, "loopAgentflow", values, label)


def af_reply(node_id, message, label="Direct Reply"):
    return af_node(node_id, "directReplyAgentflow", {"directReplyMessage": message}, label)


def af_http(node_id, url, method="GET", label="HTTP", **inputs):
    """Inputs besides these: headers / queryParams rows {key, value}, bodyType
    (json, raw, xWwwFormUrlencoded), body (text, or rows {key, value}), responseType
    (json, text)."""
    values = {"method": method, "url": url, "headers": "", "queryParams": "", "bodyType": "", "body": "",
              "responseType": ""}
    return af_node(node_id, "httpAgentflow", {**values, **inputs}, label)


def af_execute_flow(node_id, flow_id, flow_input, label="Execute Flow", **inputs):
    """Inputs besides these: executeFlowOverrideConfig (JSON text), executeFlowUpdateState
    rows {key, value}, executeFlowReturnResponseAs (userMessage, assistantMessage)."""
    values = {"executeFlowSelectedFlow": flow_id, "executeFlowInput": flow_input, "executeFlowOverrideConfig": "",
              "executeFlowBaseURL": "", "executeFlowReturnResponseAs": "userMessage", "executeFlowUpdateState": ""}
    return af_node(node_id, "executeFlowAgentflow", {**values, **inputs}, label)


def af_custom_function(node_id, code, label="Custom Function"):
    return af_node(node_id, "customFunctionAgentflow", {"customFunctionInputVariables": "",
                                                        "customFunctionJavascriptFunction": code,
                                                        "customFunctionUpdateState": ""}, label)


def af_retriever(node_id, stores, query="", label="Retriever"):
    """`stores`: Flowise document store references "<store id>:<store name>"."""
    return af_node(node_id, "retrieverAgentflow", {
        "retrieverKnowledgeDocumentStores": [{"documentStore": s} for s in stores], "retrieverQuery": query,
        "outputFormat": "text", "retrieverUpdateState": ""}, label)


def af_sticky_note(node_id, note):
    return af_node(node_id, "stickyNoteAgentflow", {"note": note}, "Sticky Note")


def af_iteration(node_id, items, label="Iteration"):
    """An iteration over `items` (iterationInput: the text of a JSON array, which
    may be or hold a variable). Its block is af_inside(this node, ...)."""
    n = af_node(node_id, "iterationAgentflow", {"iterationInput": items}, label)
    n.update(width=300, height=250, style={"width": 300, "height": 250})
    return n


def af_inside(iteration, *nodes):
    """`nodes` placed in the block of `iteration` as the editor exports them: a
    position relative to the block, `parentNode` and `extent: "parent"`."""
    for i, n in enumerate(nodes):
        n.update(parentNode=iteration["id"], extent="parent", position={"x": 20 + 150 * i, "y": 60})
    return list(nodes)


def af_human_input(node_id, description="", model=None, prompt="", feedback=True, label="Human Input"):
    """A human input node: output 0 proceeds, output 1 rejects. Without `model` its
    description is fixed (`description`, which takes variables; Flowise's default
    when empty); with `model` (af_openai(..., field="humanInputModel")) the model
    writes it, asked `prompt`. `feedback`: humanInputEnableFeedback."""
    if model is None:
        values = {"humanInputDescriptionType": "fixed", "humanInputDescription": description}
    else:
        values = {"humanInputDescriptionType": "dynamic", **model, "humanInputModelPrompt": prompt}
    values["humanInputEnableFeedback"] = feedback
    return af_node(node_id, "humanInputAgentflow", values, label, len(HUMAN_OUTPUTS))


def chat_files_qa(base):
    """A retrieval chain on the fake at `base` whose store takes the chat's files
    (`fileUpload`): the flow that keeps a prediction's uploads."""
    splitter = character_splitter(200, 0, "\n\n")
    own = plain_text("The canteen serves soup on Mondays.", splitter)
    loader = text_file(splitter=splitter, node_id="textFile_0")
    embeddings = openai_embeddings(base)
    store = faiss_store([own, loader], embeddings, fileUpload=True)
    model = openai_model(base)
    chain = conversational_retrieval_qa_chain(model, store, returnSourceDocuments=True)
    return rag(splitter, own, loader, embeddings, store, model, chain)
