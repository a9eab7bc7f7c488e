"""Builders of Flowise-format flowData for the tests."""

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
    """Inputs: `name`, `description` (and `retriever`, which nothing weir runs can fill)."""
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
