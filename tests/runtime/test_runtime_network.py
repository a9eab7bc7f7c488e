"""PY_TOOL_NETWORK: `public` (the default) reaches the internet but never the host, its
loopback (the runtime's and the API's ports) or private, link-local and reserved
addresses; `allow` reaches everything (documented as unsafe); `deny` nothing.

The tests listen on the host, on every address it has, and let tool code try to reach
that listener and the runtime's own port: under `public` every attempt is refused at
once and the listener accepts nothing.
"""

import os
import socket
import subprocess
import textwrap
import threading

import pytest

ROOT = os.geteuid() == 0


def host_addresses():
    """The host's IPv4 addresses, loopback included."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    return sorted({line.split()[3].split("/")[0] for line in out.splitlines() if " inet " in line})


class Listener:
    """A TCP listener on every address of the host, counting what it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self):
        self.sock.close()


@pytest.fixture
def listener():
    found = Listener()
    yield found
    found.close()


PROBE = textwrap.dedent(
    """
    import socket, time
    def main(targets):
        outcome = {}
        for host, port in targets:
            s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            s.settimeout(3)
            started = time.monotonic()
            try:
                s.connect((host, port))
                outcome[f"{host}:{port}"] = "connected"
            except OSError as e:
                outcome[f"{host}:{port}"] = f"{type(e).__name__}:{e.errno}:{time.monotonic() - started:.2f}"
            finally:
                s.close()
        return outcome
    """
)


def public_layer(runtime):
    health = runtime.get("/tools/health").json()["isolation"]
    if health["network"] != "public":
        pytest.skip(f"public is not in force here: {health['layers']['network']['detail']}")
    return health


@pytest.mark.skipif(not ROOT, reason="public needs a root runtime")
def test_public_is_the_default_and_health_says_how(runtime):
    health = public_layer(runtime)
    network = health["layers"]["network"]
    assert network["state"] == "enforced", network
    assert "pasta" in network["detail"] and "nftables" in network["detail"]


@pytest.mark.skipif(not ROOT, reason="public needs a root runtime")
def test_public_runs_reach_neither_the_host_nor_private_addresses(runtime, workspace, listener):
    public_layer(runtime)
    runtime_port = int(runtime.url.rsplit(":", 1)[1])
    targets = [(address, listener.port) for address in host_addresses()]
    targets += [
        ("127.0.0.1", runtime_port),
        ("::1", listener.port),
        ("::ffff:127.0.0.1", listener.port),
        ("10.0.0.1", 80),
        ("172.16.0.1", 80),
        ("192.168.0.1", 80),
        ("169.254.169.254", 80),
        ("100.64.0.1", 80),
    ]
    body = runtime.execute(PROBE, variables={"targets": targets}, workspaceId=workspace)
    assert body["success"], body
    outcome = body["result"]
    assert all(result != "connected" for result in outcome.values()), outcome
    # Refused at once by the filter (or by the namespace's own empty loopback), never
    # left to time out on a real host.
    assert all(float(result.rsplit(":", 1)[1]) < 2 for result in outcome.values()), outcome
    assert listener.accepted == 0, "a run reached a listener of the host"


@pytest.mark.skipif(not ROOT, reason="public needs a root runtime")
def test_public_dns_goes_to_the_forwarder(runtime, workspace):
    public_layer(runtime)
    code = textwrap.dedent(
        """
        import socket, struct
        query = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\\x09localhost\\x00" + struct.pack(">HH", 1, 1)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.settimeout(5)
        udp.sendto(query, ("169.254.1.53", 53))
        answer = udp.recv(512)
        result = {"resolv": open("/etc/resolv.conf").read().split(), "id": struct.unpack(">H", answer[:2])[0]}
        """
    )
    body = runtime.execute(code, workspaceId=workspace)
    assert body["success"], body
    assert body["result"]["resolv"] == ["nameserver", "169.254.1.53"]
    assert body["result"]["id"] == 7, "the forwarder answered the query"


def test_allow_reaches_the_hosts_loopback(start_runtime, listener):
    # Documented as unsafe: this is what `public` exists to prevent.
    open_network = start_runtime({"PY_TOOL_NETWORK": "allow"})
    assert open_network.get("/tools/health").json()["isolation"]["network"] == "allow"
    body = open_network.execute(PROBE, variables={"targets": [("127.0.0.1", listener.port)]})
    assert body["success"], body
    assert body["result"] == {f"127.0.0.1:{listener.port}": "connected"}


@pytest.mark.skipif(not ROOT, reason="public needs a root runtime")
def test_installs_follow_the_public_policy(runtime, workspace):
    public_layer(runtime)
    # The registry is reached through the same egress (an install in `public` mode).
    body = runtime.execute("import six\nresult = six.__name__", workspaceId=workspace)
    assert body["success"] and body["result"] == "six", body


def pastas_for(pids):
    """pids of pasta processes attached to one of `pids`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            args = open(f"/proc/{entry.name}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in args if a]
        if words and words[0].endswith("pasta") and words[-1] in {str(p) for p in pids}:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not ROOT, reason="public needs a root runtime")
def test_each_zygotes_pasta_goes_with_it(start_runtime):
    import time

    server = start_runtime()
    public_layer(server)
    assert server.execute("result = 1", workspaceId="pasta-a")["success"]
    keepers = [
        int(e.name) for e in os.scandir("/proc") if e.name.isdigit() and _parent(int(e.name)) == server.process.pid
    ]
    attached = pastas_for(keepers)
    assert attached, "a public zygote has its pasta"
    server.stop()
    deadline = time.monotonic() + 10
    while pastas_for(keepers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pastas_for(keepers) == [], "pasta outlived its zygote"


def _parent(pid):
    try:
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        return None
    return int(next(l for l in status.splitlines() if l.startswith("PPid:")).split()[1])
