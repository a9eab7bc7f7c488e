"""Builders of Flowise-format flowData for the tests."""


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
    import json
    return node("promptTemplate_0", "promptTemplate",
                {"template": template, "promptValues": json.dumps(values or {})})


def chat_prompt_template(system, human, values=None):
    return node("chatPromptTemplate_0", "chatPromptTemplate",
                {"systemMessagePrompt": system, "humanMessagePrompt": human, "promptValues": values or {}})
