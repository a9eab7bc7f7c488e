"""Flowise 3.1's schedule Start node (`startInputType: scheduleInput`) on weir's
trigger engine: saving the agentflow makes a trigger the chatflow owns, changing
or deleting the chatflow changes or removes it, `/triggers` shows it but refuses
to change it, and Flowise's schedule routes (status, enabled, trigger-logs) read
and switch it. The Start nodes are written as Flowise 3.1 exports them."""
import json

from flows import af_reply, af_start, agentflow
from prediction_client import ask
from weir_harness import PG_URL, Api, assert_error, wait_for

REPLY = "directReplyAgentflow_0"


def schedule_start(**inputs):
    """A Start node as Flowise 3.1 writes one that runs on a schedule."""
    values = {"startInputType": "scheduleInput", "scheduleType": "cronExpression",
              "scheduleCronExpression": "0 9 * * 1-5", "scheduleFrequency": "", "scheduleOnMinute": "",
              "scheduleOnTime": "", "scheduleOnDayOfWeek": "", "scheduleOnDayOfMonth": "",
              "scheduleEndDate": "", "scheduleTimezone": "Europe/Berlin", "scheduleInputMode": "text",
              "scheduleDefaultInput": "Daily report", "scheduleFormInputTypes": "",
              "scheduleFormDefaults": ""}
    return af_start(**{**values, **inputs})


def flow_data(start):
    nodes = [start, af_reply(REPLY, "Report on: {{ question }}")]
    return agentflow(nodes, [(nodes[0]["id"], REPLY)])


def save(api, start, name="morning report"):
    r = api.post("/chatflows", json={"name": name, "flowData": flow_data(start), "type": "AGENTFLOW"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def owned(api, flow):
    mine = [t for t in api.get("/triggers").json() if t["chatflowId"] == flow]
    assert len(mine) <= 1, mine
    return mine[0] if mine else None


def test_a_schedule_start_node_is_a_trigger_its_chatflow_owns(api):
    flow = save(api, schedule_start())
    trigger = owned(api, flow)
    assert trigger["ownedByChatflow"] is True and trigger["type"] == "cron"
    assert trigger["cronExpression"] == "0 9 * * 1-5" and trigger["timezone"] == "Europe/Berlin"
    assert trigger["nodeId"] == "startAgentflow_0" and trigger["triggerMessage"] == "Daily report"
    assert trigger["enabled"] is True and trigger["nextExecution"] and trigger["endDate"] is None
    assert trigger["name"] == "morning report"

    # weir's own trigger API shows it but does not change it.
    for r in (api.put(f"/triggers/{trigger['id']}", json={"enabled": False}),
              api.put(f"/triggers/{trigger['id']}", json={"timeout": 60, "cronExpression": "* * * * *"}),
              api.delete(f"/triggers/{trigger['id']}")):
        assert flow in assert_error(r, 409)["message"]
    # Only how its runs go: failure mail, run time, a cap.
    r = api.put(f"/triggers/{trigger['id']}",
                json={"notificationEmail": "ops@example.com", "timeout": 120, "maxExecutions": 500})
    assert r.status_code == 200, r.text
    assert r.json()["notificationEmail"] == "ops@example.com" and r.json()["timeout"] == 120
    assert r.json()["maxExecutions"] == 500 and r.json()["nextExecution"] == trigger["nextExecution"]

    status = api.get(f"/chatflows/{flow}/schedule/status").json()
    assert status["enabled"] is True and status["canEnable"] is True and "reason" not in status
    record = status["record"]
    assert record["id"] == trigger["id"] and record["triggerType"] == "AGENTFLOW"
    assert record["targetId"] == flow and record["scheduleInputMode"] == "text"
    assert record["defaultInput"] == "Daily report" and record["nextRunAt"] == trigger["nextExecution"]

    # Switched off and on through Flowise's route.
    assert "boolean" in assert_error(api.patch(f"/chatflows/{flow}/schedule/enabled",
                                               json={"enabled": "no"}), 400)["message"]
    r = api.patch(f"/chatflows/{flow}/schedule/enabled", json={"enabled": False})
    assert r.status_code == 200, r.text
    assert r.json()["enabled"] is False and r.json()["nextRunAt"] is None
    assert owned(api, flow)["enabled"] is False

    # Saving the chatflow changes the schedule; one switched off stays off.
    r = api.put(f"/chatflows/{flow}", json={"flowData": flow_data(schedule_start(
        scheduleCronExpression="30 6 * * *", scheduleTimezone="UTC", scheduleDefaultInput="Early report"))})
    assert r.status_code == 200, r.text
    changed = owned(api, flow)
    assert changed["id"] == trigger["id"] and changed["cronExpression"] == "30 6 * * *"
    assert changed["timezone"] == "UTC" and changed["triggerMessage"] == "Early report"
    assert changed["enabled"] is False and changed["notificationEmail"] == "ops@example.com"
    r = api.patch(f"/chatflows/{flow}/schedule/enabled", json={"enabled": True})
    assert r.status_code == 200 and r.json()["nextRunAt"].endswith("06:30:00.000Z"), r.text

    # The prediction API still runs the flow (a way to try it).
    assert ask(api, flow, "now")["text"] == "Report on: now"

    # A chat Start node has no schedule: the trigger goes.
    r = api.put(f"/chatflows/{flow}", json={"flowData": flow_data(af_start())})
    assert r.status_code == 200, r.text
    assert owned(api, flow) is None
    status = api.get(f"/chatflows/{flow}/schedule/status").json()
    assert status == {"enabled": False, "canEnable": False,
                      "reason": "Flow is not configured as a scheduled flow", "record": None}
    assert_error(api.patch(f"/chatflows/{flow}/schedule/enabled", json={"enabled": True}), 404)

    # Deleting the chatflow deletes its trigger.
    api.put(f"/chatflows/{flow}", json={"flowData": flow_data(schedule_start())})
    assert owned(api, flow) is not None
    assert api.delete(f"/chatflows/{flow}").status_code == 204
    assert owned(api, flow) is None
    assert_error(api.get(f"/chatflows/{flow}/schedule/status"), 404)


def test_a_schedule_that_cannot_be_read_is_refused_and_one_that_cannot_run_is_off(api):
    before = len(api.get("/chatflows").json())
    for inputs, words in [({"scheduleCronExpression": "every morning"}, "every morning"),
                          ({"scheduleTimezone": "Mars/Olympus"}, "Mars/Olympus"),
                          ({"scheduleEndDate": "next week"}, "next week"),
                          ({"scheduleInputMode": ""}, "Schedule Input Mode is required")]:
        r = api.post("/chatflows", json={"name": "x", "flowData": flow_data(schedule_start(**inputs))})
        assert words in assert_error(r, 400)["message"]
    assert len(api.get("/chatflows").json()) == before and api.get("/triggers").json() == []

    # Saved, but off, with Flowise's reason.
    for inputs, reason in [({"scheduleEndDate": "2020-01-01"}, "End date is in the past"),
                           ({"scheduleDefaultInput": "<p></p>"}, "Default input is required to enable schedule")]:
        flow = save(api, schedule_start(**inputs))
        assert owned(api, flow)["enabled"] is False
        status = api.get(f"/chatflows/{flow}/schedule/status").json()
        assert status["canEnable"] is False and status["reason"] == reason
        assert reason in assert_error(api.patch(f"/chatflows/{flow}/schedule/enabled",
                                                json={"enabled": True}), 400)["message"]

    # The picker's fields become a cron expression (Flowise's Sunday is 7, cron's 0).
    flow = save(api, schedule_start(scheduleType="visualPicker", scheduleFrequency="weekly",
                                    scheduleOnTime="08:30", scheduleOnDayOfWeek="1,7",
                                    scheduleEndDate="2099-12-31"))
    trigger = owned(api, flow)
    assert trigger["cronExpression"] == "30 8 * * 1,0"
    assert trigger["endDate"] == "2099-12-31T00:00:00.000Z"


def test_a_schedule_start_node_fires_and_its_runs_are_logged(make_weir):
    """Every minute, on both stores at once (one wait for both)."""
    servers = []
    for backend in ["sqlite"] + (["postgres"] if PG_URL else []):
        w = make_weir(backend)
        w.start()
        api = Api(w.url, w.create_key())
        flow = save(api, schedule_start(scheduleCronExpression="* * * * *", scheduleTimezone="UTC",
                                        scheduleDefaultInput="Minute report"))
        servers.append((backend, api, flow))
    for backend, api, flow in servers:
        def logged():
            body = api.get(f"/chatflows/{flow}/schedule/trigger-logs").json()
            return body if body["data"] else None

        logs = wait_for(logged, 75, f"a scheduled run ({backend})")
        assert logs["total"] >= 1 and logs["page"] == 1 and logs["limit"] == 20
        run = logs["data"][0]
        trigger = owned(api, flow)
        assert run["status"] == "SUCCEEDED", run
        assert run["scheduleRecordId"] == trigger["id"] and run["targetId"] == flow
        assert run["triggerType"] == "AGENTFLOW" and run["scheduledAt"].endswith(":00.000Z")
        [result] = api.get(f"/triggers/{trigger['id']}/results").json()[:1]
        assert result["input"] == "Minute report" and result["output"] == "Report on: Minute report"
        assert result["chatId"] == run["chatId"]
        # Filters and pages.
        none = api.get(f"/chatflows/{flow}/schedule/trigger-logs?status=FAILED&limit=5").json()
        assert none["data"] == [] and none["total"] == 0 and none["limit"] == 5
        both = api.get(f"/chatflows/{flow}/schedule/trigger-logs?status=FAILED&status=SUCCEEDED").json()
        assert both["total"] == logs["total"]
        assert json.dumps(both).count('"SUCCEEDED"') == len(both["data"])
        # Logs are deleted by id.
        r = api.delete(f"/chatflows/{flow}/schedule/trigger-logs", json={"logIds": "all"})
        assert "logIds must be a string[]" in assert_error(r, 400)["message"]
        r = api.delete(f"/chatflows/{flow}/schedule/trigger-logs", json={"logIds": [run["id"], "not-an-id"]})
        assert r.status_code == 200 and r.json() == {"success": True, "deletedLogs": 1, "deletedExecutions": 0}
        left = api.get(f"/chatflows/{flow}/schedule/trigger-logs").json()["data"]
        assert run["id"] not in [log["id"] for log in left]
