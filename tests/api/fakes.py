"""Fake LLM providers: real HTTP servers on loopback speaking the OpenAI chat
completions (Azure OpenAI and Mistral included), Anthropic Messages and Ollama chat
wire formats, streaming their answers chunk by chunk. They record what they were
sent, so tests can check the messages a flow built (memory, prompts, overrides,
tool turns).

The answer to a conversation is `Echo: <last user message>`, sent word by word.
Special questions: `FAIL_MIDWAY` sends two chunks then a provider error;
`SLOW` sends a chunk every 0.2 s for 20 s (to observe a disconnect), `SLOWISH`
one every 0.1 s for 1 s. `reply_when(fragment, answer)` makes a question holding
`fragment` answered with `answer`.

Tool calls. When a request offers tools, directives in the conversation make the
model call them natively, in the provider's own wire format (OpenAI: streamed
`delta.tool_calls` with the arguments split across chunks and finish_reason
`tool_calls`; Anthropic: `tool_use` content blocks with `input_json_delta` pieces
and stop_reason `tool_use`; Ollama: `message.tool_calls` with an arguments object).
A directive is read from the last user *text* message (tool results do not count);
when that message has none, from the system prompt (so a worker's or agent's own
prompt can carry one). JSON may be written with doubled braces (`{{"a": 1}}`), as
prompt templates require; text after the JSON object is ignored.

- `CALL <tool> <json> ;; CALL <tool> <json> ...`: with n tool results after that
  user message, the model makes the (n+1)-th call; after the last one it answers
  `Done: <content of the last tool result>`.
- `LOOP <tool> <json>`: the model calls that tool again every time.
- `PARALLEL <tool> <json> && <tool> <json>`: several calls in ONE response, then
  `Done: <content of the last tool result>`.
- `ROUTE a,b,...` (a supervisor: the request's tools include `route`; a name with
  spaces is quoted: `ROUTE "SQL Expert",b`): the k-th
  supervisor call for the user message holding the directive (the first one in the
  conversation) routes to the k-th name, then `FINISH`, with arguments
  `{"reasoning", "next", "instructions": "do part k"}`. The count is kept per
  message text: give each question a unique nonce.

No directive, or no tools: the Echo behaviour above.

Thinking. A question containing `THINK` makes the OpenAI-compatible fake reason
first (before its text or its tool calls, not before a forced call):
`delta.reasoning_content` pieces ("Let me think.", " Still thinking.") 0.6 s
apart, then the answer (so the reasoning lasts about 1.2 s: Flowise's `duration` 1).
Ollama's sends the same as `message.thinking`. The Anthropic fake thinks when the
request asks for it (`thinking: {"type": "enabled", "budget_tokens": N}`, which must
be at least 1024 and below `max_tokens`, with no `temperature`): a `thinking` block
(`thinking_delta` pieces, then a `signature_delta`) before its text or tool calls.
As Anthropic does, it then refuses (400) a request whose assistant turn with
`tool_use` blocks does not start with that thinking block, signature unchanged.
`THINK` in a question sent to the Anthropic fake without thinking asked is answered
without it.

Forced tools (what agentflow nodes send). When a request forces one tool — OpenAI
`tool_choice: {"type": "function", "function": {"name": N}}`, Anthropic
`tool_choice: {"type": "tool", "name": N}`, or `"required"` / `{"type": "any"}`
with N the only tool offered — named `structured_output` or `choose_scenario`, the
model calls it whatever the directives say:
- `structured_output`: the arguments come from a directive in the latest user
  message holding one (so a retry whose last user message is a validation error
  still finds it): `STRUCT <json>` answers the json; `STRUCT_BAD_ONCE <json>`
  answers `{}` (every required key missing) the first time that message is seen,
  the json afterwards (`struct_requests(fragment)` counts them). Without a
  directive the arguments are built from the tool's schema: strings "x", numbers
  1, booleans true, enums their first value, arrays [], objects recursively.
- `choose_scenario`: `{"output": S}` with S the first of the tool's
  `properties.output.enum` values found (case-insensitively) in the last user
  message — a `"scenarios": [...]` list in that message (Flowise's condition agent
  prompt) is left out of the search — else `{"output": "none of these"}`.

Embeddings. `POST …/embeddings` speaks OpenAI's wire (OpenAI, LocalAI, Azure at
`/openai/deployments/<dep>/embeddings?api-version=V`): `{"model", "input": text or
[texts], "dimensions"?, "encoding_format"?}` → `{"object": "list", "data":
[{"object": "embedding", "index": i, "embedding": [...]}], "model", "usage"}` (the
vector as base64 of little-endian float32 when `encoding_format` is "base64"); a
model named `slow-<N>ms` answers after N milliseconds.
`POST …/api/embed` speaks Ollama's: `{"model", "input": text or [texts]}` →
`{"model", "embeddings": [[...]]}` (and the older `/api/embeddings`, `{"prompt"}` →
`{"embedding"}`). The vector is `embed_text(text)`: a bag of words — each word (a
run of letters, digits and underscores, lower-cased) hashed with CRC-32 into one of
256 buckets (`dimensions` buckets when the request asks for them), counted,
L2-normalised; a text without words is the first unit vector. So texts sharing
words are near, and every run gives the same vectors. The model `missing-model` is
a 404.
`fail_embeddings(n, status, after=k)` makes the n embedding requests that follow
the next k (counted after the key check) answer `status` (500, 429...) with an
error body, to test retries and failed upserts.

Gemini. `POST …/v1beta/models/<model>:streamGenerateContent?alt=sse` speaks the
Generative Language API (key in `x-goog-api-key`): the answer in `parts`, one chunk
per piece, `usageMetadata` on each (a prompt token per word of the turns, one per
chunk), tool calls as `functionCall` parts in one chunk (forced by
`toolConfig.functionCallingConfig` `{mode: ANY, allowedFunctionNames: [N]}`), and
with `thinkingConfig.includeThoughts` the THOUGHTS as `thought` parts first, the
signature on the first call; as Gemini 3 does, it then refuses (400) a request
whose model turn's first call lost it. `…:batchEmbedContents` answers
`{"embeddings": [{"values": embed_text(text)}]}`. The model `missing-model` is a 404.

Rerank. `POST …/v2/rerank` (Cohere) and `…/v1/rerank` (Jina, Voyage) score each of
`documents` by the share of its words found in `query` and answer the best `top_n`
(`top_k`, Voyage's, answered as `data`) as `{"results": [{index, relevance_score}]}`.

Keys: `Authorization: Bearer sk-good` (OpenAI-compatible, rerank), `api-key: sk-good`
(Azure, whose path is `/openai/deployments/<dep>/chat/completions?api-version=V`),
`x-api-key: sk-good` (Anthropic); embeddings check the same headers as chat (Ollama
takes none). On the OpenAI-compatible chat path the model `missing-model` is a 404
and the model `server-error` a 500. Every request is recorded with its full path
(query included), headers and body."""

import base64
import json
import math
import re
import struct
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD_KEY = "sk-good"
EMBED_DIMS = 256


def embed_text(text, dims=EMBED_DIMS):
    """The fake's embedding of `text` (see the module docstring)."""
    vector = [0.0] * dims
    for word in re.findall(r"\w+", text.lower()):
        vector[zlib.crc32(word.encode()) % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0:
        vector[0] = 1.0
        return vector
    return [x / norm for x in vector]


def answer_for(messages):
    last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return f"Echo: {last}"


def pieces(text):
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def halves(text):
    """A JSON text in two non-empty pieces (three when it is long enough)."""
    if len(text) < 4:
        return [text[:1], text[1:]]
    third = len(text) // 3
    return [text[:third], text[third:2 * third], text[2 * third:]]


# --- The conversation, whatever the provider ---------------------------------------

class Turn:
    """One step of a conversation: `role` is user, assistant or tool; `calls` are
    (name, arguments) pairs an assistant made."""

    def __init__(self, role, text="", calls=()):
        self.role, self.text, self.calls = role, text, list(calls)


def _text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def openai_conversation(body):
    """(system text, turns) of a chat completions or Ollama request."""
    system, turns = [], []
    for m in body.get("messages", []):
        role = m.get("role")
        if role == "system":
            system.append(_text_of(m.get("content")))
        elif role == "tool":
            turns.append(Turn("tool", _text_of(m.get("content"))))
        elif role == "assistant":
            calls = [(c["function"]["name"], c["function"].get("arguments")) for c in m.get("tool_calls") or []]
            turns.append(Turn("assistant", _text_of(m.get("content")), calls))
        else:
            turns.append(Turn("user", _text_of(m.get("content"))))
    return "\n\n".join(system), turns


def anthropic_conversation(body):
    """(system text, turns) of a Messages request: content blocks become turns."""
    turns = []
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, str):
            turns.append(Turn(m["role"], content))
            continue
        calls = []
        for block in content or []:
            kind = block.get("type")
            if kind == "tool_result":
                turns.append(Turn("tool", _text_of(block.get("content"))))
            elif kind == "tool_use":
                calls.append((block["name"], block.get("input")))
            elif kind == "text" and m["role"] == "user":
                turns.append(Turn("user", block.get("text", "")))
            elif kind == "text":
                turns.append(Turn("assistant", block.get("text", "")))
        if calls:
            turns.append(Turn("assistant", "", calls))
    return _text_of(body.get("system", "")), turns


THOUGHTS = ["Let me think.", " Still thinking."]
THINK_PAUSE = 0.6
THOUGHT_SIGNATURE = "c2lnbmVkIGJ5IHRoZSBmYWtl"


def anthropic_thinking_refusal(body):
    """What Anthropic says of a request asking for thinking that it refuses, or None."""
    thinking = body["thinking"]
    budget = thinking.get("budget_tokens") or 0
    if thinking.get("type") != "enabled" or budget < 1024:
        return "thinking.budget_tokens: must be at least 1024"
    if budget >= (body.get("max_tokens") or 0):
        return "max_tokens must be greater than thinking.budget_tokens"
    if "temperature" in body or "top_p" in body:
        return "temperature and top_p may not be set when thinking is enabled"
    for m in body.get("messages", []):
        blocks = m.get("content")
        if m.get("role") != "assistant" or not isinstance(blocks, list):
            continue
        if any(b.get("type") == "tool_use" for b in blocks):
            head = blocks[0] if blocks else {}
            if head.get("type") != "thinking" or head.get("signature") != THOUGHT_SIGNATURE:
                return ("messages: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When "
                        "`thinking` is enabled, a final `assistant` message must start with a thinking block")
    return None


def gemini_conversation(body):
    """(system text, turns) of a Gemini generateContent request."""
    system = "\n".join(p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts") or [])
    turns = []
    for content in body.get("contents", []):
        texts, calls = [], []
        for part in content.get("parts") or []:
            if "text" in part:
                texts.append(part["text"])
            elif "functionCall" in part:
                calls.append((part["functionCall"]["name"], part["functionCall"].get("args")))
            elif "functionResponse" in part:
                response = part["functionResponse"].get("response") or {}
                turns.append(Turn("tool", str(response.get("result", json.dumps(response)))))
        role = "assistant" if content.get("role") == "model" else "user"
        if texts or calls:
            turns.append(Turn(role, "\n".join(texts), calls))
    return system, turns


def last_user_text(turns):
    return next((t.text for t in reversed(turns) if t.role == "user"), "")


def gemini_tools(body):
    """Gemini's function declarations of a request."""
    return [d for tool in body.get("tools") or [] for d in tool.get("functionDeclarations") or []]


def tool_names(body):
    names = [d["name"] for d in gemini_tools(body)]
    for tool in body.get("tools") or []:
        if "functionDeclarations" in tool:
            continue
        names.append(tool["function"]["name"] if "function" in tool else tool.get("name"))
    return names


def forced_tool(body):
    """The name of the one tool a request forces the model to call, or None."""
    names = tool_names(body)
    calling = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
    if calling.get("mode") == "ANY":
        allowed = calling.get("allowedFunctionNames") or names
        return allowed[0] if len(allowed) == 1 else None
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        if name:
            return name
        choice = choice.get("type")
    if choice in ("required", "any") and len(names) == 1:
        return names[0]
    return None


def tool_schema(body, name):
    """The JSON schema of the parameters of the offered tool `name` ({} if none)."""
    for declaration in gemini_tools(body):
        if declaration.get("name") == name:
            return declaration.get("parameters") or {}
    for tool in body.get("tools") or []:
        if "function" in tool:
            if tool["function"].get("name") == name:
                return tool["function"].get("parameters") or {}
        elif tool.get("name") == name:
            return tool.get("input_schema") or tool.get("parameters") or {}
    return {}


def example_of(schema):
    """A value of a JSON schema: strings "x", numbers 1, booleans true, enums their
    first value, arrays [], objects with every property."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        return {k: example_of(v) for k, v in (schema.get("properties") or {}).items()}
    return {"string": "x", "number": 1, "integer": 1, "boolean": True, "array": []}.get(kind)


# --- Directives ---------------------------------------------------------------------

_DIRECTIVE = re.compile(r"\b(CALL|LOOP|PARALLEL)\s")
_ROUTE = re.compile(r'\bROUTE\s+((?:"[^"]+"|[\w-]+)(?:,(?:"[^"]+"|[\w-]+))*)')
_TOOL_AND_JSON = re.compile(r"\s*(\S+)\s+(.*)", re.S)
_STRUCT = re.compile(r"\bSTRUCT(_BAD_ONCE)?\s+")
_SCENARIO_LIST = re.compile(r'"scenarios"\s*:\s*\[.*?\]', re.S)


def _json_prefix(text):
    text = text.strip()
    if text.startswith("{{"):
        text = text.replace("{{", "{").replace("}}", "}")
    value, _ = json.JSONDecoder().raw_decode(text)
    return value


def _tool_call(text):
    """`<tool> <json>` → (tool, arguments), or None."""
    m = _TOOL_AND_JSON.match(text)
    if not m:
        return None
    try:
        return m.group(1), _json_prefix(m.group(2))
    except ValueError:
        return None


def parse_directive(text):
    """("CALL" | "LOOP" | "PARALLEL", [(tool, arguments), ...]) or None."""
    m = _DIRECTIVE.search(text or "")
    if not m:
        return None
    kind, rest = m.group(1), text[m.end():]
    if kind == "CALL":
        calls = []
        for segment in rest.split(" ;; "):
            segment = segment.strip()
            segment = segment[len("CALL"):] if segment.startswith("CALL ") else segment
            call = _tool_call(segment)
            if call is None:
                break
            calls.append(call)
    elif kind == "LOOP":
        calls = [c for c in [_tool_call(rest)] if c]
    else:
        calls = [c for c in map(_tool_call, rest.split(" && ")) if c]
    return (kind, calls) if calls else None


class Answer:
    """What the fake model says: `calls` [(name, arguments)] or `text`."""

    def __init__(self, calls=None, text=None):
        self.calls, self.text = calls, text


# --- The servers ----------------------------------------------------------------------

def serve(handler, host="127.0.0.1"):
    """Serves `handler` on `host`, a free port, from a daemon thread: (server, its URL)."""
    server = ThreadingHTTPServer((host, 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://{host}:{server.server_address[1]}"


class FakeProviders:
    def __init__(self):
        self.requests = []  # (path, headers, body)
        self.disconnected = threading.Event()
        self.lock = threading.Lock()
        self.routes = {}  # supervisor calls seen per ROUTE message text
        self.structs = {}  # structured_output calls seen per STRUCT message text
        self.embed_failures = []  # statuses the next embedding requests answer
        self.replies = []  # (fragment, answer): a question holding the fragment gets the answer
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake.lock:
                    fake.requests.append((self.path, dict(self.headers), body))
                path = self.path.split("?", 1)[0]
                try:
                    if path.endswith(("/api/embed", "/api/embeddings")):
                        fake.ollama_embed(self, body, path)
                    elif path.endswith("/embeddings"):
                        fake.embeddings(self, body)
                    elif path.endswith("/chat/completions"):
                        fake.openai(self, body)
                    elif path.endswith("/v1/messages"):
                        fake.anthropic(self, body)
                    elif path.endswith("/api/chat"):
                        fake.ollama(self, body)
                    elif "/v1beta/models/" in path:
                        fake.gemini(self, body, path)
                    elif path.endswith(("/v2/rerank", "/v1/rerank")):
                        fake.rerank(self, body, path)
                    else:
                        self.send_error(404)
                except (BrokenPipeError, ConnectionResetError):
                    fake.disconnected.set()

        self.server, self.url = serve(Handler)

    def reply_when(self, fragment, answer):
        """From now on, a question (the last user message) holding `fragment` is
        answered `answer` (streamed word by word) instead of its echo."""
        with self.lock:
            self.replies.append((fragment, answer))

    def close(self):
        self.server.shutdown()

    def last_request(self, suffix):
        """(path with query, headers with lower-case names, body) of the last request
        whose path (query left out) ends with `suffix`."""
        with self.lock:
            for path, headers, body in reversed(self.requests):
                if path.split("?", 1)[0].endswith(suffix):
                    return path, {k.lower(): v for k, v in headers.items()}, body
        raise AssertionError(f"no request to {suffix}")

    def last(self, suffix):
        return self.last_request(suffix)[2]

    def count(self, suffix):
        with self.lock:
            return sum(1 for p, _, _ in self.requests if p.split("?", 1)[0].endswith(suffix))

    def bodies(self, suffix, containing=""):
        """Bodies of every request to `suffix` whose JSON text contains `containing`."""
        with self.lock:
            return [b for p, _, b in self.requests
                    if p.split("?", 1)[0].endswith(suffix) and containing in json.dumps(b)]

    def fail_embeddings(self, times, status=500, after=0):
        """After `after` more good answers, the next `times` embedding requests (with
        a good key) answer `status`; `fail_embeddings(0)` ends a failure."""
        with self.lock:
            self.embed_failures = [None] * after + [status] * times

    def embedded_texts(self, suffix="/embeddings"):
        """The texts of every embedding request to `suffix`, one list per request."""
        texts = [b.get("input", b.get("prompt")) for b in self.bodies(suffix)]
        return [[t] if isinstance(t, str) else t for t in texts]

    def supervisor_calls(self, fragment):
        """How many supervisor (route) calls were made for the ROUTE question
        containing `fragment`."""
        with self.lock:
            return sum(n for text, n in self.routes.items() if fragment in text)

    @staticmethod
    def reply_json(h, status, payload):
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def start_stream(h, content_type):
        h.send_response(200)
        h.send_header("Content-Type", content_type)
        h.end_headers()

    def script(self, question):
        """Echo chunks for a question: (chunks, delay between them, fail after)."""
        # A webhook asks its body as JSON text: {"q": "SLOW"} counts as ending in SLOW.
        ending = question.rstrip('"}')
        if ending.endswith("SLOWISH"):
            return ["tick "] * 10, 0.1, False
        if ending.endswith("SLOW"):
            return ["tick "] * 100, 0.2, False
        if ending.endswith("FAIL_MIDWAY"):
            return ["Partial", " answer"], 0.0, True
        for fragment, reply in self.replies:
            if fragment in question:
                return pieces(reply), 0.0, False
        # sqlDatabaseChain's request for a query: "... SQL <query>" in the question, which
        # LangChain's prompt ends with "\nSQLQuery:".
        query = re.search(r"SQL (.+)\nSQLQuery:$", question)
        if query:
            return [query.group(1)], 0.0, False
        # The CSV agent's request for pandas code: "... CODE <python>" in the question.
        code = re.search(r"CODE (.+)\nOutput Code:$", question)
        if code:
            return [code.group(1)], 0.0, False
        # An output parser's fix-up request (LangChain's prompt) whose completion
        # says what the fixed answer is: "... FIX_TO <answer>" on one line.
        if question.startswith("Instructions:\n--------------\n") and "FIX_TO " in question:
            return pieces(question.split("FIX_TO ", 1)[1].split("\n", 1)[0]), 0.0, False
        return pieces(f"Echo: {question}"), 0.0, False

    def decide(self, body, system, turns):
        """The tool calls or the final text a directive asks for; None to echo."""
        names = tool_names(body)
        if not names:
            return None
        forced = forced_tool(body)
        if forced == "structured_output":
            return Answer(calls=[(forced, self.structured(body, turns))])
        if forced == "choose_scenario":
            return Answer(calls=[(forced, self.scenario(body, turns))])
        if "route" in names:
            for turn in turns:
                m = _ROUTE.search(turn.text) if turn.role == "user" else None
                if m:
                    names = [n.strip('"') for n in re.findall(r'"[^"]+"|[\w-]+', m.group(1))]
                    return Answer(calls=[self.route(turn.text, names)])
        last_user = max((i for i, t in enumerate(turns) if t.role == "user"), default=-1)
        results = [t.text for t in turns[last_user + 1:] if t.role == "tool"]
        directive = parse_directive(turns[last_user].text if last_user >= 0 else "") or parse_directive(system)
        if directive is None:
            return None
        kind, calls = directive
        done = Answer(text=f"Done: {results[-1]}" if results else "Done: nothing")
        if kind == "LOOP":
            return Answer(calls=calls[:1])
        if kind == "PARALLEL":
            return Answer(calls=calls) if not results else done
        return Answer(calls=[calls[len(results)]]) if len(results) < len(calls) else done

    def route(self, text, names):
        with self.lock:
            k = self.routes.get(text, 0)
            self.routes[text] = k + 1
        nxt = names[k] if k < len(names) else "FINISH"
        return "route", {"reasoning": f"step {k + 1}", "next": nxt, "instructions": f"do part {k + 1}"}

    def structured(self, body, turns):
        """The arguments of a forced `structured_output` call (module docstring)."""
        schema = tool_schema(body, "structured_output")
        for turn in reversed(turns):
            m = _STRUCT.search(turn.text) if turn.role == "user" else None
            if not m:
                continue
            try:
                value = _json_prefix(turn.text[m.end():])
            except ValueError:
                break
            with self.lock:
                seen = self.structs.get(turn.text, 0)
                self.structs[turn.text] = seen + 1
            return {} if m.group(1) and seen == 0 else value
        return example_of(schema)

    def struct_requests(self, fragment):
        """How many structured_output calls were answered for the STRUCT messages
        containing `fragment`."""
        with self.lock:
            return sum(n for text, n in self.structs.items() if fragment in text)

    @staticmethod
    def scenario(body, turns):
        """The arguments of a forced `choose_scenario` call (module docstring)."""
        output = (tool_schema(body, "choose_scenario").get("properties") or {}).get("output") or {}
        text = _SCENARIO_LIST.sub("", last_user_text(turns)).lower()
        for option in output.get("enum") or []:
            if str(option).lower() in text:
                return {"output": option}
        return {"output": "none of these"}

    # OpenAI-compatible (OpenAI, Azure OpenAI, Mistral, vLLM...)

    @staticmethod
    def key_ok(h):
        auth = h.headers.get("Authorization")
        return auth == f"Bearer {GOOD_KEY}" if auth is not None else h.headers.get("api-key") == GOOD_KEY

    def openai(self, h, body):
        if not self.key_ok(h):
            return self.reply_json(h, 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
        if body.get("model") == "missing-model":
            return self.reply_json(h, 404, {"error": {"message": "The model `missing-model` does not exist"}})
        if body.get("model") == "server-error":
            return self.reply_json(h, 500, {"error": {"message": "The server had an error", "type": "server_error"}})
        system, turns = openai_conversation(body)
        answer = self.decide(body, system, turns)
        self.start_stream(h, "text/event-stream")
        # A forced call (a structured answer) is made without reasoning.
        thinks = "THINK" in last_user_text(turns) and not forced_tool(body)

        def send(payload):
            h.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            h.wfile.flush()

        def choice(delta, finish=None):
            return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": body.get("model"),
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        def usage(completion_tokens):
            # What OpenAI sends last when asked (`stream_options.include_usage`):
            # here one prompt token per word of the messages, one per chunk.
            if (body.get("stream_options") or {}).get("include_usage"):
                prompt = sum(len(str(m.get("content") or "").split()) for m in body.get("messages", []))
                send({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [],
                      "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                                "total_tokens": prompt + completion_tokens}})

        for thought in THOUGHTS if thinks else []:
            send(choice({"content": None, "reasoning_content": thought}))
            time.sleep(THINK_PAUSE)
        if answer and answer.calls:
            send(choice({"role": "assistant", "content": None}))
            for k, (name, arguments) in enumerate(answer.calls):
                send(choice({"tool_calls": [{"index": k, "id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
                for part in halves(json.dumps(arguments)):
                    send(choice({"tool_calls": [{"index": k, "function": {"arguments": part}}]}))
            send(choice({}, "tool_calls"))
            usage(7 * len(answer.calls))
            h.wfile.write(b"data: [DONE]\n\n")
            return
        chunks, delay, fail = (pieces(answer.text), 0.0, False) if answer else self.script(last_user_text(turns))
        h.wfile.write(b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n')
        for c in chunks:
            h.wfile.write(f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': c}}]})}\n\n".encode())
            h.wfile.flush()
            time.sleep(delay)
        if fail:
            h.wfile.write(b'data: {"error":{"message":"upstream exploded"}}\n\n')
            return
        h.wfile.write(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
        usage(len(chunks))
        h.wfile.write(b"data: [DONE]\n\n")

    # Embeddings

    def failure(self):
        """The status the next embedding request must fail with, if any."""
        with self.lock:
            return self.embed_failures.pop(0) if self.embed_failures else None

    def embeddings(self, h, body):
        if not self.key_ok(h):
            return self.reply_json(h, 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
        if body.get("model") == "missing-model":
            return self.reply_json(h, 404, {"error": {"message": "The model `missing-model` does not exist"}})
        status = self.failure()
        if status is not None:
            return self.reply_json(h, status, {"error": {"message": f"embeddings failed with {status}", "type": "server_error"}})
        slow = re.fullmatch(r"slow-(\d+)ms", str(body.get("model", "")))
        if slow:  # a model named slow-<N>ms answers after N milliseconds
            time.sleep(int(slow.group(1)) / 1000)
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return self.reply_json(h, 400, {"error": {"message": "input must be a text or a non-empty list of texts"}})
        dims = body.get("dimensions") or EMBED_DIMS
        data = []
        for i, text in enumerate(texts):
            vector = embed_text(text, dims)
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
            data.append({"object": "embedding", "index": i, "embedding": vector})
        tokens = sum(len(t.split()) for t in texts)
        self.reply_json(h, 200, {"object": "list", "data": data, "model": body.get("model"),
                                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def ollama_embed(self, h, body, path):
        if body.get("model") == "missing-model":
            return self.reply_json(h, 404, {"error": "model 'missing-model' not found"})
        status = self.failure()
        if status is not None:
            return self.reply_json(h, status, {"error": f"embeddings failed with {status}"})
        if path.endswith("/api/embeddings"):
            return self.reply_json(h, 200, {"embedding": embed_text(body.get("prompt", ""))})
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return self.reply_json(h, 400, {"error": "input must be a text or a list of texts"})
        self.reply_json(h, 200, {"model": body.get("model"), "embeddings": [embed_text(t) for t in texts],
                                 "prompt_eval_count": sum(len(t.split()) for t in texts)})

    # Anthropic Messages

    def anthropic(self, h, body):
        if h.headers.get("x-api-key") != GOOD_KEY:
            return self.reply_json(h, 401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
        thinking = body.get("thinking") or {}
        if thinking:
            refused = anthropic_thinking_refusal(body)
            if refused:
                return self.reply_json(h, 400, {"type": "error", "error": {"type": "invalid_request_error", "message": refused}})
        system, turns = anthropic_conversation(body)
        answer = self.decide(body, system, turns)
        self.start_stream(h, "text/event-stream")

        def event(name, data):
            h.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            h.wfile.flush()

        event("message_start", {"type": "message_start", "message": {
            "id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant", "content": [],
            "model": body.get("model"), "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}})
        first = 0
        if thinking:
            event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "thinking", "thinking": ""}})
            for thought in THOUGHTS:
                event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                              "delta": {"type": "thinking_delta", "thinking": thought}})
                time.sleep(THINK_PAUSE)
            event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "signature_delta", "signature": THOUGHT_SIGNATURE}})
            event("content_block_stop", {"type": "content_block_stop", "index": 0})
            first = 1
        if answer and answer.calls:
            for k, (name, arguments) in enumerate(answer.calls, start=first):
                event("content_block_start", {"type": "content_block_start", "index": k, "content_block": {
                    "type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": name, "input": {}}})
                for part in halves(json.dumps(arguments)):
                    event("content_block_delta", {"type": "content_block_delta", "index": k,
                                                  "delta": {"type": "input_json_delta", "partial_json": part}})
                event("content_block_stop", {"type": "content_block_stop", "index": k})
            event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                    "usage": {"output_tokens": 20}})
            event("message_stop", {"type": "message_stop"})
            return
        chunks, delay, fail = (pieces(answer.text), 0.0, False) if answer else self.script(last_user_text(turns))
        event("content_block_start", {"type": "content_block_start", "index": first, "content_block": {"type": "text", "text": ""}})
        event("ping", {"type": "ping"})
        for c in chunks:
            event("content_block_delta", {"type": "content_block_delta", "index": first, "delta": {"type": "text_delta", "text": c}})
            time.sleep(delay)
        if fail:
            event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            return
        event("content_block_stop", {"type": "content_block_stop", "index": first})
        event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                "usage": {"output_tokens": len(chunks)}})
        event("message_stop", {"type": "message_stop"})

    # Rerank services (Cohere's /v2/rerank, Jina's and Voyage's /v1/rerank)

    def rerank(self, h, body, path):
        if h.headers.get("Authorization") != f"Bearer {GOOD_KEY}":
            return self.reply_json(h, 401, {"message": "invalid api token"})
        query = set(re.findall(r"\w+", body.get("query", "").lower()))
        documents = body.get("documents") or []
        scored = []
        for index, text in enumerate(documents):
            words = set(re.findall(r"\w+", str(text).lower()))
            scored.append((len(query & words) / (len(words) or 1), index))
        scored.sort(key=lambda s: (-s[0], s[1]))
        top = body.get("top_k") if "top_k" in body else body.get("top_n")
        ranked = [{"index": i, "relevance_score": round(score, 4)} for score, i in scored[:top or len(scored)]]
        key = "data" if "top_k" in body else "results"
        self.reply_json(h, 200, {key: ranked, "model": body.get("model")})

    # Google Gemini (the Generative Language API)

    def gemini(self, h, body, path):
        if h.headers.get("x-goog-api-key") != GOOD_KEY:
            return self.reply_json(h, 400, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                                      "message": "API key not valid. Please pass a valid API key."}})
        model, _, method = path.split("/v1beta/models/", 1)[1].partition(":")
        if model == "missing-model":
            return self.reply_json(h, 404, {"error": {"code": 404, "status": "NOT_FOUND",
                                                      "message": f"models/{model} is not found for API version v1beta"}})
        if method == "batchEmbedContents":
            texts = ["".join(p.get("text", "") for p in r["content"]["parts"]) for r in body.get("requests", [])]
            dims = (body.get("requests") or [{}])[0].get("outputDimensionality") or EMBED_DIMS
            return self.reply_json(h, 200, {"embeddings": [{"values": embed_text(t, dims)} for t in texts]})
        if method != "streamGenerateContent":
            return self.reply_json(h, 404, {"error": {"code": 404, "message": f"no method {method} here"}})
        thinking = ((body.get("generationConfig") or {}).get("thinkingConfig") or {}).get("includeThoughts")
        for content in body.get("contents", []) if thinking else []:
            calls = [p for p in content.get("parts") or [] if "functionCall" in p]
            if calls and calls[0].get("thoughtSignature") != THOUGHT_SIGNATURE:
                return self.reply_json(h, 400, {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                                                          "Function call is missing a thought_signature"}})
        system, turns = gemini_conversation(body)
        answer = self.decide(body, system, turns)
        self.start_stream(h, "text/event-stream")
        prompt = sum(len(t.text.split()) for t in turns)

        def send(parts, finish=None, output=0):
            candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
            if finish:
                candidate["finishReason"] = finish
            chunk = {"candidates": [candidate], "modelVersion": model,
                     "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": output,
                                       "totalTokenCount": prompt + output}}
            h.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
            h.wfile.flush()

        for thought in THOUGHTS if thinking else []:
            send([{"text": thought, "thought": True}])
            time.sleep(THINK_PAUSE)
        if answer and answer.calls:
            parts = [{"functionCall": {"name": name, "args": arguments}} for name, arguments in answer.calls]
            if thinking:
                parts[0]["thoughtSignature"] = THOUGHT_SIGNATURE
            send(parts, "STOP", 5 * len(parts))
            return
        chunks, delay, fail = (pieces(answer.text), 0.0, False) if answer else self.script(last_user_text(turns))
        for k, c in enumerate(chunks):
            send([{"text": c}], "STOP" if k == len(chunks) - 1 and not fail else None, k + 1)
            time.sleep(delay)
        if fail:
            h.wfile.write(b'data: {"error": {"code": 503, "message": "The model is overloaded."}}\r\n\r\n')

    # Ollama native chat

    def ollama(self, h, body):
        if body.get("model") == "missing-model":
            return self.reply_json(h, 404, {"error": "model 'missing-model' not found"})
        system, turns = openai_conversation(body)
        answer = self.decide(body, system, turns)
        self.start_stream(h, "application/x-ndjson")

        def line(message, done, **extra):
            h.wfile.write((json.dumps({"model": body["model"], "created_at": "2024-01-01T00:00:00Z",
                                       "message": message, "done": done, **extra}) + "\n").encode())
            h.wfile.flush()

        if answer and answer.calls:
            line({"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": name, "arguments": arguments}} for name, arguments in answer.calls]}, False)
            line({"role": "assistant", "content": ""}, True, done_reason="stop", prompt_eval_count=12, eval_count=3)
            return
        chunks, delay, fail = (pieces(answer.text), 0.0, False) if answer else self.script(last_user_text(turns))
        for thought in THOUGHTS if "THINK" in last_user_text(turns) else []:
            line({"role": "assistant", "content": "", "thinking": thought}, False)
            time.sleep(THINK_PAUSE)
        for c in chunks:
            line({"role": "assistant", "content": c}, False)
            time.sleep(delay)
        if fail:
            h.wfile.write(b'{"error":"runner crashed"}\n')
            return
        line({"role": "assistant", "content": ""}, True, prompt_eval_count=12, eval_count=len(chunks))


class FakeTelegram:
    """A fake Telegram Bot API on loopback: records every call as (token, method,
    body) and answers ok, unless `fail_with` holds a description to refuse with."""

    def __init__(self):
        self.calls = []
        self.fail_with = None
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                _, bot, method = self.path.split("/", 2)
                with fake.lock:
                    fake.calls.append((bot.removeprefix("bot"), method, body))
                if fake.fail_with:
                    FakeProviders.reply_json(self, 400, {"ok": False, "error_code": 400,
                                                         "description": fake.fail_with})
                else:
                    FakeProviders.reply_json(self, 200, {"ok": True, "result": True})

        self.server, self.url = serve(Handler)

    def methods(self, method):
        with self.lock:
            return [(token, body) for token, m, body in self.calls if m == method]

    def close(self):
        self.server.shutdown()


class FakeSite:
    """A web site on a loopback address (any of 127.0.0.0/8): GET answers `body`
    (as `content_type`, text/plain by default), POST answers `posted: <request
    body>`, PUT `put: <request body>`, DELETE `deleted: <path>`, as text/plain; with `redirect_to` every request is a 302
    there; with `pages` ({path: html, or path: (content type, bytes)}), GET of such a
    path answers it (other paths 404); POST answers with `status` (200 unless a test
    sets another). Records each request as (method, path, headers with lower-case
    names, body)."""

    def __init__(self, host="127.0.0.1", body="hello from the site", redirect_to=None, pages=None,
                 content_type="text/plain; charset=utf-8"):
        self.hits = []
        # The status POSTs are answered with (a test may change it: a receiver down).
        self.status = 200
        self.body = body
        self.content_type = content_type
        self.pages = pages
        self.redirect_to = redirect_to
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def answer(self, method):
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length).decode(errors="replace") if length else ""
                site.hits.append((method, self.path, {k.lower(): v for k, v in self.headers.items()}, data))
                if site.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", site.redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if site.pages is not None and method == "GET":
                    page = site.pages.get(self.path)
                    kind, payload = page if isinstance(page, tuple) else \
                        ("text/html; charset=utf-8", (page or "not found").encode())
                    self.send_response(200 if page is not None else 404)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                payload = {"GET": site.body, "POST": f"posted: {data}", "PUT": f"put: {data}",
                           "DELETE": f"deleted: {self.path}"}[method].encode()
                self.send_response(200 if method == "GET" else site.status)
                kind = site.content_type if method == "GET" else "text/plain; charset=utf-8"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                self.answer("GET")

            def do_POST(self):
                self.answer("POST")

            def do_PUT(self):
                self.answer("PUT")

            def do_DELETE(self):
                self.answer("DELETE")

        self.server, self.url = serve(Handler, host)
        self.port = self.server.server_address[1]

    def close(self):
        self.server.shutdown()


def recorded_get(handler, queries):
    """(path, query parameters, lower-case headers) of a GET, appended to `queries`."""
    from urllib.parse import parse_qs, urlsplit
    parts = urlsplit(handler.path)
    seen = (parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()},
            {k.lower(): v for k, v in handler.headers.items()})
    queries.append(seen)
    return seen


class FakeSearxng:
    """A SearXNG instance on a loopback address: `GET /search?q=…&format=json`
    answers `{"query", "results": [{title, url, content}], "answers", "infoboxes",
    "suggestions"}` — three results naming the query, or for the query `answer me`
    only an answer, for `nothing` nothing. Without `format=json` it answers 403, as an
    instance without the JSON format enabled does. Records each request's query
    parameters and lower-case headers."""

    def __init__(self, host="127.0.0.2"):
        self.queries = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path, query, _ = recorded_get(self, fake.queries)
                if path != "/search" or query.get("format") != "json":
                    payload, status = b"Forbidden", 403
                else:
                    q = query.get("q", "")
                    answer = {"query": q, "results": [], "answers": [], "infoboxes": [], "suggestions": []}
                    if q == "answer me":
                        answer["answers"] = ["42"]
                    elif q != "nothing":
                        answer["results"] = [{"title": f"{q} {n}", "url": f"https://example.com/{n}",
                                              "content": f"About {q}, part {n}.", "engine": "fake"}
                                             for n in range(1, 4)]
                    payload, status = json.dumps(answer).encode(), 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if status == 200 else "text/plain")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server, self.url = serve(Handler, host)

    def close(self):
        self.server.shutdown()


class FakeSearchApis:
    """Brave's, SerpAPI's, Serper's and Google Custom Search's APIs on one loopback address,
    each on its own path and with its own key: `GET /res/v1/web/search?q=` with
    `X-Subscription-Token: brave-key` answers `{"web": {"results": [{title, url,
    description}]}}`; `GET /search?api_key=serp-key&q=` an answer box for `When
    does the library open?`, else organic results; `GET /customsearch/v1?key=
    google-key&cx=cx-1&q=` `{"items": [{title, link, snippet}]}`; `POST /search` of
    `{"q"}` with `X-API-KEY: serper-key` Serper's `{"answerBox"}` for `When does the
    library open?`, else `{"organic": [{title, link, snippet}]}`. Three results
    naming the query, none for `nothing`; a wrong key is the service's own
    refusal (401, SerpAPI's `{"error"}`). Records (path, query, lower-case headers)."""

    KEYS = {"brave": "brave-key", "serpapi": "serp-key", "serper": "serper-key", "google": "google-key"}

    def __init__(self, host="127.0.0.2"):
        self.queries = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path, query, headers = recorded_get(self, fake.queries)
                q = query.get("q", "")
                found = [] if q == "nothing" else [
                    (f"{q} {n}", f"https://example.com/{n}", f"About {q}, part {n}.") for n in range(1, 4)]
                if path == "/res/v1/web/search":
                    ok = headers.get("x-subscription-token") == fake.KEYS["brave"]
                    answer = {"type": "search", "web": {"type": "search", "results": [
                        {"title": t, "url": u, "description": d, "language": "en"} for t, u, d in found]}} \
                        if ok else {"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}}
                elif path == "/search":
                    ok = query.get("api_key") == fake.KEYS["serpapi"]
                    if not ok:
                        answer = {"error": "Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key"}
                    elif q == "When does the library open?":
                        answer = {"answer_box": {"type": "organic_result", "answer": "9 am"}}
                    else:
                        answer = {"organic_results": [{"position": n, "title": t, "link": u, "snippet": d}
                                                      for n, (t, u, d) in enumerate(found, 1)]}
                elif path == "/customsearch/v1":
                    ok = query.get("key") == fake.KEYS["google"] and query.get("cx") == "cx-1"
                    answer = {"kind": "customsearch#search", "items": [
                        {"kind": "customsearch#result", "title": t, "link": u, "snippet": d} for t, u, d in found]} \
                        if ok else {"error": {"code": 400, "message": "API key not valid."}}
                else:
                    ok, answer = False, {"error": "no such path"}
                FakeProviders.reply_json(self, 200 if ok else 401, answer)

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                asked = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                fake.queries.append((self.path, asked, headers))
                ok = self.path == "/search" and headers.get("x-api-key") == fake.KEYS["serper"]
                q = asked.get("q", "")
                if not ok:
                    answer = {"message": "Unauthorized.", "statusCode": 403}
                elif q == "When does the library open?":
                    answer = {"answerBox": {"snippet": "9 am"}, "organic": [{"snippet": "later"}]}
                else:
                    answer = {"organic": [{"title": f"{q} {n}", "link": f"https://example.com/{n}",
                                           "snippet": f"About {q}, part {n}.", "position": n} for n in range(1, 4)]}
                FakeProviders.reply_json(self, 200 if ok else 403, answer)

        self.server, self.url = serve(Handler, host)

    def close(self):
        self.server.shutdown()


class FakeUpstash:
    """Upstash's Redis REST API on loopback: `POST /` with a command as a JSON array
    (`["LPUSH", key, v, ...]`, `["LRANGE", key, start, stop]`, `["EXPIRE", key, s]`,
    `["TTL", key]`) and `Authorization: Bearer <token>` answers `{"result": …}` from
    its lists in memory; another token is a 401 `{"error": …}`."""

    def __init__(self, token="up-token"):
        self.lists, self.ttls, self.commands = {}, {}, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_POST(self):
                command = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"[]")
                fake.commands.append(command)
                if self.headers.get("Authorization") != f"Bearer {token}":
                    return FakeProviders.reply_json(self, 401, {"error": "Unauthorized"})
                name, key, args = command[0].upper(), command[1], command[2:]
                items = fake.lists.setdefault(key, [])
                if name == "LPUSH":
                    for value in args:
                        items.insert(0, value)
                    result = len(items)
                elif name == "LRANGE":
                    start, stop = int(args[0]), int(args[1])
                    result = items[start:] if stop == -1 else items[start:stop + 1]
                elif name == "EXPIRE":
                    fake.ttls[key] = int(args[0])
                    result = 1
                else:
                    return FakeProviders.reply_json(self, 400, {"error": f"ERR unknown command {name}"})
                FakeProviders.reply_json(self, 200, {"result": result})

        self.server, self.url = serve(Handler)

    def close(self):
        self.server.shutdown()
