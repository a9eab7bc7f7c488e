"""Fake LLM providers: real HTTP servers on loopback speaking the OpenAI chat
completions, Anthropic Messages and Ollama chat wire formats, streaming their
answers chunk by chunk. They record what they were sent, so tests can check the
messages a flow built (memory, prompts, overrides).

The answer to a conversation is `Echo: <last user message>`, sent word by word.
Special questions: `FAIL_MIDWAY` sends two chunks then a provider error;
`SLOW` sends a chunk every 0.2 s for 20 s (to observe a disconnect), `SLOWISH`
one every 0.1 s for 1 s."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD_KEY = "sk-good"


def answer_for(messages):
    last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return f"Echo: {last}"


def pieces(text):
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


class FakeProviders:
    def __init__(self):
        self.requests = []  # (path, headers, body)
        self.disconnected = threading.Event()
        self.lock = threading.Lock()
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
                try:
                    if self.path.endswith("/chat/completions"):
                        fake.openai(self, body)
                    elif self.path.endswith("/v1/messages"):
                        fake.anthropic(self, body)
                    elif self.path.endswith("/api/chat"):
                        fake.ollama(self, body)
                    else:
                        self.send_error(404)
                except (BrokenPipeError, ConnectionResetError):
                    fake.disconnected.set()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()

    def last(self, suffix):
        with self.lock:
            for path, headers, body in reversed(self.requests):
                if path.endswith(suffix):
                    return body
        raise AssertionError(f"no request to {suffix}")

    def count(self, suffix):
        with self.lock:
            return sum(1 for p, _, _ in self.requests if p.endswith(suffix))

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

    def script(self, messages):
        question = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        # A webhook asks its body as JSON text: {"q": "SLOW"} counts as ending in SLOW.
        question = question.rstrip('"}')
        if question.endswith("SLOWISH"):
            return ["tick "] * 10, 0.1, False
        if question.endswith("SLOW"):
            return ["tick "] * 100, 0.2, False
        if question.endswith("FAIL_MIDWAY"):
            return ["Partial", " answer"], 0.0, True
        return pieces(answer_for(messages)), 0.0, False

    def openai(self, h, body):
        if h.headers.get("Authorization") != f"Bearer {GOOD_KEY}":
            return self.reply_json(h, 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
        if body.get("model") == "missing-model":
            return self.reply_json(h, 404, {"error": {"message": "The model `missing-model` does not exist"}})
        chunks, delay, fail = self.script(body["messages"])
        self.start_stream(h, "text/event-stream")
        h.wfile.write(b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n')
        for c in chunks:
            h.wfile.write(f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': c}}]})}\n\n".encode())
            h.wfile.flush()
            time.sleep(delay)
        if fail:
            h.wfile.write(b'data: {"error":{"message":"upstream exploded"}}\n\n')
            return
        h.wfile.write(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')

    def anthropic(self, h, body):
        if h.headers.get("x-api-key") != GOOD_KEY:
            return self.reply_json(h, 401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
        msgs = body["messages"]
        chunks, delay, fail = self.script(msgs)
        self.start_stream(h, "text/event-stream")

        def event(name, data):
            h.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            h.wfile.flush()

        event("message_start", {"type": "message_start", "message": {"id": "m", "content": []}})
        event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        event("ping", {"type": "ping"})
        for c in chunks:
            event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": c}})
            time.sleep(delay)
        if fail:
            event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            return
        event("content_block_stop", {"type": "content_block_stop", "index": 0})
        event("message_stop", {"type": "message_stop"})

    def ollama(self, h, body):
        if body.get("model") == "missing-model":
            return self.reply_json(h, 404, {"error": "model 'missing-model' not found"})
        chunks, delay, fail = self.script(body["messages"])
        self.start_stream(h, "application/x-ndjson")
        for c in chunks:
            h.wfile.write((json.dumps({"model": body["model"], "message": {"role": "assistant", "content": c}, "done": False}) + "\n").encode())
            h.wfile.flush()
            time.sleep(delay)
        if fail:
            h.wfile.write(b'{"error":"runner crashed"}\n')
            return
        h.wfile.write((json.dumps({"model": body["model"], "message": {"role": "assistant", "content": ""}, "done": True}) + "\n").encode())


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

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def methods(self, method):
        with self.lock:
            return [(token, body) for token, m, body in self.calls if m == method]

    def close(self):
        self.server.shutdown()
