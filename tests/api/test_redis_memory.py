"""Flowise's `RedisBackedChatMemory` on the machine's Redis (and
`upstashRedisBackedChatMemory` on a fake Upstash REST API): a chat's turns are
kept in the list Flowise keeps them in (the session id its key, the newest first,
LangChain's stored messages), read back as the next question's history — also
turns Flowise itself wrote there — within `windowSize`, expiring after
`sessionTTL`; a Redis that cannot be reached fails the question naming the node."""

import json
import os
import subprocess
import uuid

import pytest

import flows
from fakes import FakeProviders
from prediction_client import ask, create_flow, predict
from weir_harness import Api, assert_error, backends

REDIS_URL = os.environ.get("WEIR_TEST_REDIS_URL")
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="WEIR_TEST_REDIS_URL is not set: Redis not tested")


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def redis(*args):
    done = subprocess.run(["redis-cli", "-u", REDIS_URL, *args], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def redis_memory(api, url, **inputs):
    credential = api.post("/credentials", json={"name": "redis", "credentialName": "redisCacheUrlApi",
                                                "plainDataObj": {"redisUrl": url}})
    assert credential.status_code == 201, credential.text
    memory = flows.node("RedisBackedChatMemory_0", "RedisBackedChatMemory", inputs)
    memory["data"]["credential"] = credential.json()["id"]
    return memory


def stored(role, content):
    return json.dumps({"type": role, "data": {"content": content, "additional_kwargs": {}}})


@needs_redis
def test_a_chat_is_remembered_in_redis_as_flowise_keeps_it(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url),
                                               redis_memory(api, REDIS_URL, sessionTTL=120)))
    chat = f"weir-test-{uuid.uuid4().hex[:10]}"
    assert ask(api, flow, "hello", chatId=chat)["memoryType"] == "Redis-Backed Chat Memory"
    kept = redis("LRANGE", chat, "0", "-1").splitlines()
    assert [json.loads(m) for m in kept] == [json.loads(stored("ai", "Echo: hello")), json.loads(stored("human", "hello"))]
    assert 0 < int(redis("TTL", chat)) <= 120
    ask(api, flow, "again", chatId=chat)
    sent = fake.last("/chat/completions")["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "hello"), ("assistant", "Echo: hello"), ("user", "again")]
    redis("DEL", chat)


@needs_redis
def test_turns_flowise_wrote_are_read_within_the_window(api, fake):
    chat = f"weir-test-{uuid.uuid4().hex[:10]}"
    # As Flowise left them: newest first.
    redis("LPUSH", chat, stored("human", "one"), stored("ai", "first"), stored("human", "two"), stored("ai", "second"))
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), redis_memory(api, REDIS_URL, windowSize=1)))
    ask(api, flow, "three", chatId=chat)
    sent = fake.last("/chat/completions")["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [("user", "two"), ("assistant", "second"), ("user", "three")]
    assert int(redis("LLEN", chat)) == 6 and int(redis("TTL", chat)) == -1  # no sessionTTL: kept
    redis("DEL", chat)


@needs_redis
def test_a_redis_that_cannot_be_reached_fails_the_question(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), redis_memory(api, "redis://127.0.0.1:9")))
    message = assert_error(predict(api, flow, "hello"), 500)["message"]
    assert "RedisBackedChatMemory_0" in message and "Redis" in message


def test_an_upstash_database_keeps_the_chat_through_its_rest_api(api, fake):
    from fakes import FakeUpstash
    upstash = FakeUpstash()
    try:
        credential = api.post("/credentials", json={"name": "upstash", "credentialName": "upstashRedisMemoryApi",
                                                    "plainDataObj": {"upstashRestToken": "up-token"},
                                                    "allowedHosts": ["127.0.0.1"]})
        assert credential.status_code == 201, credential.text
        memory = flows.node("upstashRedisBackedChatMemory_0", "upstashRedisBackedChatMemory",
                            {"baseURL": upstash.url, "sessionTTL": 30})
        memory["data"]["credential"] = credential.json()["id"]
        flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), memory))
        chat = f"up-{uuid.uuid4().hex[:8]}"
        ask(api, flow, "hello", chatId=chat)
        ask(api, flow, "again", chatId=chat)
        sent = fake.last("/chat/completions")["messages"]
        assert [(m["role"], m["content"]) for m in sent[1:]] == [
            ("user", "hello"), ("assistant", "Echo: hello"), ("user", "again")]
        assert [json.loads(m)["data"]["content"] for m in upstash.lists[chat]] == [
            "Echo: again", "again", "Echo: hello", "hello"]
        assert upstash.ttls[chat] == 30 and ["LRANGE", chat, "0", "-1"] in upstash.commands
    finally:
        upstash.close()


class TlsRedis:
    """The machine's Redis behind TLS: a proxy on 127.0.0.1 that ends TLS with a
    certificate for `localhost` signed by a CA of the test's own (made with openssl),
    forwarding the bytes to REDIS_URL's server."""

    def __init__(self, workdir):
        import socket
        import ssl
        import threading
        from urllib.parse import urlparse

        self.ca = workdir / "ca.pem"
        key, cert, csr, ext = (workdir / n for n in ("server.key", "server.pem", "server.csr", "ext.cnf"))
        ca_key = workdir / "ca.key"

        def openssl(*args):
            subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(self.ca),
                "-days", "2", "-subj", "/CN=weir test CA")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
                "-subj", "/CN=localhost")
        ext.write_text("subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                       "extendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", str(csr), "-CA", str(self.ca), "-CAkey", str(ca_key), "-CAcreateserial",
                "-out", str(cert), "-days", "2", "-extfile", str(ext))
        target = urlparse(REDIS_URL)
        backend = (target.hostname or "127.0.0.1", target.port or 6379)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(cert), str(key))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.handshakes = 0

        def pipe(source, sink):
            try:
                while data := source.recv(65536):
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                for s in (source, sink):
                    try:
                        s.close()
                    except OSError:
                        pass

        def serve():
            while True:
                try:
                    raw, _ = self.listener.accept()
                except OSError:
                    return
                try:
                    secured = context.wrap_socket(raw, server_side=True)
                except (OSError, ssl.SSLError):
                    raw.close()
                    continue
                self.handshakes += 1
                upstream = socket.create_connection(backend)
                threading.Thread(target=pipe, args=(secured, upstream), daemon=True).start()
                threading.Thread(target=pipe, args=(upstream, secured), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()

    def close(self):
        self.listener.close()


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory):
    if not REDIS_URL:
        pytest.skip("WEIR_TEST_REDIS_URL is not set: Redis not tested")
    proxy = TlsRedis(tmp_path_factory.mktemp("tls-redis"))
    yield proxy
    proxy.close()


@needs_redis
@pytest.mark.parametrize("backend", backends())
def test_a_chat_is_kept_in_redis_over_tls(make_weir, fake, tls_redis, backend):
    """`rediss://`, and a `redisCacheApi` credential with `redisCacheSslEnabled`: the
    server's certificate is checked (against REDIS_TLS_CA_FILE here); a weir that
    does not trust its CA refuses the connection."""
    weir = make_weir(backend)
    weir.env["REDIS_TLS_CA_FILE"] = str(tls_redis.ca)
    weir.start()
    api = Api(weir.url, weir.create_key())
    chat = f"weir-test-{uuid.uuid4().hex[:10]}"
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url),
                                               redis_memory(api, f"rediss://localhost:{tls_redis.port}")))
    before = tls_redis.handshakes
    ask(api, flow, "over tls", chatId=chat)
    assert [json.loads(m)["data"]["content"] for m in redis("LRANGE", chat, "0", "-1").splitlines()] == [
        "Echo: over tls", "over tls"]
    assert tls_redis.handshakes > before
    # Flowise's host-and-port credential with its TLS switch.
    credential = api.post("/credentials", json={"name": "redis tls", "credentialName": "redisCacheApi",
                                                "plainDataObj": {"redisCacheHost": "localhost",
                                                                 "redisCachePort": str(tls_redis.port),
                                                                 "redisCacheSslEnabled": True}})
    assert credential.status_code == 201, credential.text
    memory = flows.node("RedisBackedChatMemory_0", "RedisBackedChatMemory", {})
    memory["data"]["credential"] = credential.json()["id"]
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), memory))
    ask(api, flow, "again", chatId=chat)
    assert int(redis("LLEN", chat)) == 4
    redis("DEL", chat)
    # Without the CA, the certificate is not trusted: the question fails naming it.
    stranger = make_weir(backend)
    stranger.start()
    other = Api(stranger.url, stranger.create_key())
    flow = create_flow(other, flows.conversation(flows.openai_model(fake.url),
                                                 redis_memory(other, f"rediss://localhost:{tls_redis.port}")))
    message = assert_error(predict(other, flow, "hi", chatId=chat), 500)["message"]
    assert "TLS" in message and "certificate" in message.lower(), message
