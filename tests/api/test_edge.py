"""The edge against hostile clients: connections that never finish their headers are
closed after WEIR_HEADER_TIMEOUT_SECS, at most WEIR_MAX_CONNECTIONS are held at once (the
rest wait in the kernel's backlog, not as our open files), the open-file limit is raised
at start, and through all of it /ping keeps answering.
"""

import resource
import socket
import time

import requests

import flows
from fakes import FakeProviders
from weir_harness import Api


def half_open(url: str, count: int) -> list[socket.socket]:
    """`count` connections that start a request and never finish its headers."""
    host, port = url.removeprefix("http://").split(":")
    sockets = []
    for _ in range(count):
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(b"GET /api/v1/ping HTTP/1.1\r\nHost: x\r\n")
        sockets.append(s)
    return sockets


def closed_by_server(s: socket.socket) -> bool:
    s.settimeout(0.05)
    try:
        return s.recv(1) == b""
    except (TimeoutError, BlockingIOError):
        return False
    except OSError:
        return True


def ping_seconds(url: str) -> float:
    started = time.monotonic()
    assert requests.get(f"{url}/api/v1/ping", timeout=10).status_code == 200
    return time.monotonic() - started


def test_two_thousand_half_open_connections_do_not_take_the_server_offline(make_weir):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    w = make_weir()
    w.env["WEIR_HEADER_TIMEOUT_SECS"] = "3"
    w.start()
    sockets = []
    try:
        sockets = half_open(w.url, 2000)
        assert ping_seconds(w.url) < 2, "a complete request waits behind half-open ones"
        time.sleep(4)
        still_open = [s for s in sockets[:200] if not closed_by_server(s)]
        assert still_open == [], f"{len(still_open)} of 200 half-open connections outlived the header timeout"
        assert ping_seconds(w.url) < 2
    finally:
        for s in sockets:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert w.stop() == 0


def test_connections_beyond_the_bound_wait_for_a_free_one(make_weir):
    w = make_weir()
    w.env.update(WEIR_MAX_CONNECTIONS="20", WEIR_HEADER_TIMEOUT_SECS="2")
    w.start()
    sockets = half_open(w.url, 20)
    try:
        # All slots are taken by clients that say nothing: the next request waits in the
        # backlog until the header timeout frees them, then is served.
        waited = ping_seconds(w.url)
        assert 1 <= waited < 6, waited
    finally:
        for s in sockets:
            s.close()
    assert w.stop() == 0


def test_the_open_file_limit_is_raised_to_the_hard_limit_at_start(make_weir):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = min(1024, hard - 1)
    w = make_weir()
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
        w.start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    limits = open(f"/proc/{w.proc.pid}/limits").read()
    line = next(line for line in limits.splitlines() if line.startswith("Max open files"))
    assert line.split()[3] == line.split()[4] == str(hard), line
    assert "open-file limit raised" in w.logs()
    assert w.stop() == 0


def read_all(s: socket.socket, seconds: float) -> bytes:
    """What the server sends until it closes the connection (or `seconds` pass)."""
    s.settimeout(seconds)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except TimeoutError:
        pass
    return data


def test_a_slow_body_is_cut_and_a_long_run_is_not(make_weir):
    """WEIR_BODY_TIMEOUT_SECS bounds the time from the headers to the body's last byte:
    a body that stalls is a 408 on a closed connection, with nothing stored; a body that
    arrives in time in small pieces is served; a run that goes on long after its body
    (a streamed answer) is never cut."""
    fake = FakeProviders()
    w = make_weir()
    w.env["WEIR_BODY_TIMEOUT_SECS"] = "2"
    w.start()
    key = w.create_key()
    api = Api(w.url, key)
    host, port = w.url.removeprefix("http://").split(":")
    body = b'{"name": "slow", "flowData": {"nodes": [], "edges": []}}'
    head = (f"POST /api/v1/chatflows HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    try:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(head + body[:10])
            started = time.monotonic()
            answer = read_all(s, 10)
            took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout"), answer[:200]
        assert b"WEIR_BODY_TIMEOUT_SECS" in answer and 1.5 < took < 6, took
        assert api.get("/chatflows").json() == []

        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(head)
            for i in range(0, len(body), 20):
                time.sleep(0.3)
                s.sendall(body[i:i + 20])
            assert read_all(s, 5).startswith(b"HTTP/1.1 201 Created")

        flow_id = api.post("/chatflows", json={"name": "f", "flowData": flows.conversation(
            flows.openai_model(fake.url))}).json()["id"]
        r = api.post(f"/prediction/{flow_id}", json={"question": "SLOW", "streaming": True},
                     headers={"Accept": "text/event-stream"}, stream=True)
        started = time.monotonic()
        lines = r.iter_lines()
        while time.monotonic() - started < 3.5:
            assert next(lines) is not None  # still streaming past the 2 s body limit
        r.close()
    finally:
        fake.close()
