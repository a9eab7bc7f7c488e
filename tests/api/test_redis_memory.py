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
from weir_harness import assert_error

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
