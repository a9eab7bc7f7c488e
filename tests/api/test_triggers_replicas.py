"""Three `weir serve` replicas on one PostgreSQL firing every-minute schedules for
three minutes; the replica running the first minute's firings is killed with
SIGKILL mid-run and restarted. Every scheduled minute of every trigger must have
exactly one result: no duplicates, no misses, and the firings in flight at the kill
recorded as failed — not run again."""

import re
import subprocess
import time

import pytest

from fakes import FakeProviders
from test_triggers import conversation_flow, create_flow, cron_body, wait_for
from weir_harness import PG_URL, Api, start_replicas

pytestmark = pytest.mark.skipif(not PG_URL, reason="WEIR_TEST_DATABASE_URL is not set: PostgreSQL not tested")

TRIGGERS = 12
LEASE_SECS = "6"


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def replica_id(weir):
    return wait_for(lambda: (m := re.search(r"replica=([0-9a-f-]{36})", weir.logs())) and m[1], 10,
                    "the scheduler's start line")


def owners(schema):
    out = subprocess.run(["psql", PG_URL, "-Atc", f"SELECT DISTINCT owner FROM {schema}.trigger_firings"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def slow_calls(fake):
    with fake.lock:
        return sum(1 for p, _, b in fake.requests
                   if p.endswith("/chat/completions") and b["messages"][-1]["content"] == "SLOW")


def test_three_replicas_fire_each_minute_exactly_once(make_weir, fake):
    replicas = start_replicas(make_weir, 3, TRIGGER_LEASE_SECS=LEASE_SECS)
    first = replicas[0]
    ids = {replica_id(w): w for w in replicas}
    key = first.create_key()
    api = Api(first.url, key)
    flow_id = create_flow(api, conversation_flow(fake.url))
    if time.time() % 60 > 50:
        time.sleep(12)
    triggers = [api.post("/triggers", json=cron_body(flow_id, name=f"t{i}", triggerMessage="SLOW", timeout=60)).json()
                for i in range(TRIGGERS)]
    minute1 = triggers[0]["nextExecution"]
    assert all(t["nextExecution"] == minute1 for t in triggers)
    start_calls = slow_calls(fake)

    # Minute 1: find the replica running the firings, kill it mid-run.
    wait_for(lambda: owners(first.schema), 75, "the first minute's firings")
    time.sleep(3)
    running = owners(first.schema)
    assert running and running <= set(ids), running
    victims = [ids[o] for o in running]
    for v in victims:
        v.proc.kill()
        v.proc.wait()
    survivor = next(w for w in replicas if w not in victims)
    api = Api(survivor.url, key)
    # The others record them as failed once the lease runs out; then the victim returns.
    time.sleep(int(LEASE_SECS) + 6)
    for v in victims:
        v.start()

    # Minutes 2 and 3 run normally (each firing takes ~20 s).
    minutes = [minute1]
    for _ in range(2):
        nxt = wait_for(lambda: (n := api.get(f"/triggers/{triggers[0]['id']}").json()["nextExecution"])
                       and n not in minutes and n, 90, "the next minute")
        minutes.append(nxt)
    last = minutes[-1]
    wait_for(lambda: api.get(f"/triggers/{triggers[0]['id']}").json()["nextExecution"] != last, 90, "the third minute")

    def all_done():
        results = [api.get(f"/triggers/{t['id']}/results", params={"limit": 100}).json() for t in triggers]
        return results if all(len([r for r in rs if r["scheduledAt"] == last]) == 1 for rs in results) else None

    per_trigger = wait_for(all_done, 60, "the third minute's results")
    for t, results in zip(triggers, per_trigger):
        scheduled = [r["scheduledAt"] for r in results if r["scheduledAt"] in minutes]
        assert sorted(scheduled) == sorted(minutes), (t["name"], results)  # once each: no duplicates, no misses
        by_minute = {r["scheduledAt"]: r for r in results}
        first_result = by_minute[minute1]
        assert first_result["status"] == "failed", first_result
        assert "not run again" in first_result["error"]
        for m in minutes[1:]:
            assert by_minute[m]["status"] == "success", by_minute[m]
        assert not [r for r in results if r["status"] == "missed"]
    # Each scheduled minute reached the provider once: the killed runs were not re-run.
    assert slow_calls(fake) == start_calls + TRIGGERS * len(minutes)
