"""Measures weir's time-to-first-token overhead against a fake provider (see ttft)."""

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "api"))
import flows  # noqa: E402
from fakes import FakeProviders  # noqa: E402
from weir_harness import Weir  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 200


def first_chunk_direct(session, url):
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "bench"}]}
    start = time.perf_counter()
    with session.post(url, json=body, headers={"Authorization": "Bearer sk-good"}, stream=True) as r:
        for line in r.iter_lines():
            if line.startswith(b"data:") and b'"content"' in line:
                return time.perf_counter() - start
    raise RuntimeError("no chunk")


def first_token_weir(session, url, key):
    start = time.perf_counter()
    with session.post(url, json={"question": "bench", "streaming": True},
                      headers={"Authorization": f"Bearer {key}"}, stream=True) as r:
        for line in r.iter_lines():
            if line.startswith(b"data:") and json.loads(line[5:])["event"] == "token":
                return time.perf_counter() - start
    raise RuntimeError("no token")


def main():
    fake = FakeProviders()
    with tempfile.TemporaryDirectory() as tmp:
        w = Weir(Path(tmp), "sqlite")
        w.env["LOG_LEVEL"] = "warn"
        w.start()
        try:
            key = w.create_key()
            s = requests.Session()
            flow = s.post(f"{w.url}/api/v1/chatflows", headers={"Authorization": f"Bearer {key}"},
                          json={"name": "bench", "flowData": flows.conversation(flows.openai_model(fake.url))}).json()["id"]
            direct_url = f"{fake.url}/v1/chat/completions"
            weir_url = f"{w.url}/api/v1/prediction/{flow}"
            for _ in range(20):  # warm-up: connections, plan cache
                first_chunk_direct(s, direct_url)
                first_token_weir(s, weir_url, key)
            direct, via = [], []
            for _ in range(ROUNDS):
                direct.append(first_chunk_direct(s, direct_url))
                via.append(first_token_weir(s, weir_url, key))
        finally:
            w.stop()
            fake.close()
    ms = lambda xs, q: statistics.quantiles(xs, n=100)[q - 1] * 1000  # noqa: E731
    print(f"rounds: {ROUNDS}")
    print(f"direct to provider, first chunk: median {statistics.median(direct)*1000:.2f} ms, p95 {ms(direct, 95):.2f} ms")
    print(f"through weir, first token:       median {statistics.median(via)*1000:.2f} ms, p95 {ms(via, 95):.2f} ms")
    print(f"overhead (median): {(statistics.median(via) - statistics.median(direct))*1000:.2f} ms "
          "(includes weir's own HTTP hop, auth lookup and the provider request it makes)")


if __name__ == "__main__":
    main()
