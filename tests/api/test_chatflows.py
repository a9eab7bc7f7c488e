"""Chatflow records: Flowise's fields, JSON-text fields, pagination."""

import json
import time

from weir_harness import FLOW, assert_error


def test_crud(api):
    r = api.post("/chatflows", json={"name": "Support bot", "flowData": json.dumps(FLOW),
                                     "chatbotConfig": {"welcomeMessage": "hi"}, "category": "demo"})
    assert r.status_code == 201, r.text
    flow = r.json()
    for field in ("id", "name", "flowData", "deployed", "isPublic", "apikeyid", "chatbotConfig",
                  "apiConfig", "category", "type", "createdDate", "updatedDate"):
        assert field in flow, field
    assert flow["flowData"] == json.dumps(FLOW), "flowData is stored as given"
    assert json.loads(flow["chatbotConfig"]) == {"welcomeMessage": "hi"}
    assert flow["type"] == "CHATFLOW" and flow["deployed"] is False and flow["isPublic"] is False
    assert flow["createdDate"].endswith("Z") and len(flow["createdDate"]) == 24

    got = api.get(f"/chatflows/{flow['id']}").json()
    assert got == flow

    time.sleep(0.005)
    r = api.put(f"/chatflows/{flow['id']}", json={"name": "Renamed", "isPublic": True, "category": None})
    assert r.status_code == 200, r.text
    updated = r.json()
    assert updated["name"] == "Renamed" and updated["isPublic"] is True and updated["category"] is None
    assert updated["flowData"] == flow["flowData"] and updated["createdDate"] == flow["createdDate"]
    assert updated["updatedDate"] > flow["updatedDate"]
    assert api.get(f"/chatflows/{flow['id']}").json() == updated

    assert api.delete(f"/chatflows/{flow['id']}").status_code == 204
    assert_error(api.get(f"/chatflows/{flow['id']}"), 404)
    assert_error(api.delete(f"/chatflows/{flow['id']}"), 404)


def test_flow_data_as_object_keeps_its_text(api):
    text = '{"nodes": [{"id": "chatOpenAI_0"}], "edges": [], "viewport": {"zoom": 1}}'
    r = api.post("/chatflows", data=f'{{"name": "obj", "flowData": {text}}}',
                 headers={"Content-Type": "application/json"})
    assert r.status_code == 201, r.text
    assert r.json()["flowData"] == text


def test_invalid_json_text_fields_are_400_and_nothing_is_stored(api):
    before = int(api.get("/chatflows").headers["x-total-count"])
    assert_error(api.post("/chatflows", json={"name": "x", "flowData": "not json"}), 400, "flowData")
    assert_error(api.post("/chatflows", json={"name": "x", "flowData": {"nodes": []}}), 400, "edges")
    assert_error(api.post("/chatflows", json={"name": "x", "flowData": FLOW, "apiConfig": "[1]"}), 400, "apiConfig")
    assert_error(api.post("/chatflows", json={"name": "x", "flowData": FLOW, "type": "ROBOT"}), 400)
    assert_error(api.post("/chatflows", json={"name": "  ", "flowData": FLOW}), 400)
    assert int(api.get("/chatflows").headers["x-total-count"]) == before
    flow = api.post("/chatflows", json={"name": "ok", "flowData": FLOW}).json()
    assert_error(api.put(f"/chatflows/{flow['id']}", json={"flowData": {"edges": []}}), 400)
    assert api.get(f"/chatflows/{flow['id']}").json() == flow


def test_apikeyid_must_be_a_key_of_the_workspace(api):
    key = api.post("/apikey", json={"keyName": "only-this"}).json()
    r = api.post("/chatflows", json={"name": "x", "flowData": FLOW, "apikeyid": key["id"]})
    assert r.status_code == 201 and r.json()["apikeyid"] == key["id"]
    assert_error(api.post("/chatflows", json={"name": "x", "flowData": FLOW,
                                               "apikeyid": "00000000-0000-4000-8000-000000000000"}), 400)
    assert_error(api.post("/chatflows", json={"name": "x", "flowData": FLOW, "apikeyid": "nope"}), 400)


def test_flowise_clients_extra_fields_are_tolerated(api):
    r = api.post("/chatflows", json={"name": "x", "flowData": FLOW, "id": "ignored", "workspaceId": None,
                                     "createdDate": "2020-01-01", "type": "AGENTFLOW"})
    assert r.status_code == 201, r.text
    assert r.json()["id"] != "ignored" and r.json()["type"] == "AGENTFLOW"


def test_pagination_newest_first_with_total(api):
    ids = []
    for i in range(5):
        ids.append(api.post("/chatflows", json={"name": f"f{i}", "flowData": FLOW}).json()["id"])
        time.sleep(0.005)
    api.put(f"/chatflows/{ids[1]}", json={"deployed": True})
    r = api.get("/chatflows")
    assert r.headers["x-total-count"] == "5"
    assert [f["name"] for f in r.json()] == ["f1", "f4", "f3", "f2", "f0"]
    page2 = api.get("/chatflows", params={"page": 2, "limit": 2})
    assert [f["name"] for f in page2.json()] == ["f3", "f2"] and page2.headers["x-total-count"] == "5"
    assert api.get("/chatflows", params={"page": 4, "limit": 2}).json() == []
    assert len(api.get("/chatflows", params={"limit": 100}).json()) == 5
    for bad in ({"page": 0}, {"limit": 0}, {"limit": 101}, {"page": -1}, {"page": "x"}):
        assert_error(api.get("/chatflows", params=bad), 400)
