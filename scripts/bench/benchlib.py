"""Shared helpers of the benchmark scripts (scripts/bench/run, triggers, scaling, pgvector …).

Nothing here measures by itself: it builds the release binaries, starts and stops
`weir serve` and the fake OpenAI-compatible provider (api/examples/fake_provider.rs)
on free loopback ports, creates chatflows over the HTTP API, runs wrk (installed from
Debian when missing) and parses its report, writes wrk's Lua request scripts, seeds a
store directly (SQLite with python's sqlite3, PostgreSQL with psql), starts a throwaway
PostgreSQL from a PostgreSQL tree (LocalPostgres) and reads a process's memory and CPU
from /proc. Standard library only.
"""

import json
import os
import pwd
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def log(message):
    """Progress goes to stderr so that stdout stays the result."""
    print(message, file=sys.stderr, flush=True)


# --- building -------------------------------------------------------------------------


def target_dir():
    """Cargo's target directory: CARGO_TARGET_DIR when set, else ./target."""
    configured = os.environ.get("CARGO_TARGET_DIR")
    return Path(configured) if configured else ROOT / "target"


def bin_dir():
    """Where the binaries are taken from: the snapshot of this run (WEIR_BENCH_BIN_DIR,
    inherited by the scripts it runs), else the target directory's release/."""
    snapshot = os.environ.get("WEIR_BENCH_BIN_DIR")
    return Path(snapshot) if snapshot else target_dir() / "release"


def release_bin(name, example=False):
    base = bin_dir()
    return base / "examples" / name if example else base / name


def snapshot_binaries(names):
    """Copies the built binaries (paths under release/) to a private directory used for
    the rest of the run, so that a build sharing the target directory cannot swap them
    in the middle of a run. Returns the directory (the caller removes it)."""
    snapshot = Path(tempfile.mkdtemp(prefix="weir-bench-bin-"))
    (snapshot / "examples").mkdir()
    for name in names:
        shutil.copy2(target_dir() / "release" / name, snapshot / name)
    os.environ["WEIR_BENCH_BIN_DIR"] = str(snapshot)
    return snapshot


def source_version():
    """The commit of the tree the binaries are built from, and whether its Rust sources
    have uncommitted changes (with --no-build, whoever built last decides)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--", "*.rs", "Cargo.toml", "Cargo.lock")
    return commit + (" with uncommitted Rust changes" if changed else "")


def cargo_build(*args):
    """`cargo build --release ARGS` in the repository, niced (the machine has 2 cores)."""
    cmd = ["nice", "cargo", "build", "--release", "-q", *args]
    log("building: " + " ".join(cmd[1:]))
    subprocess.run(cmd, cwd=ROOT, check=True)


# --- processes ------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc, timeout=20):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def proc_status_kib(pid, field):
    """A `VmRSS` / `VmHWM` line of /proc/PID/status, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pinned(cpus):
    """A `preexec_fn` that pins the child to `cpus` (None: wherever the kernel likes)."""
    if not cpus:
        return None
    cpus = set(cpus)
    return lambda: os.sched_setaffinity(0, cpus)


class FakeProvider:
    """The Rust fake OpenAI-compatible provider: streams `Echo: <question>` as SSE."""

    def __init__(self, cpus=None):
        self.proc = subprocess.Popen([str(release_bin("fake_provider", example=True))],
                                     stdout=subprocess.PIPE, text=True, preexec_fn=pinned(cpus))
        self.url = self.proc.stdout.readline().strip()
        self.completions = f"{self.url}/v1/chat/completions"

    def request_body(self, question="hello"):
        return {"model": "fake", "stream": True, "messages": [{"role": "user", "content": question}]}

    def close(self):
        stop_process(self.proc)


class Weir:
    """One `weir serve` on a free port with its own data dir (SQLite), or a fresh
    PostgreSQL schema when `postgres` is a URL (the schema is dropped by `cleanup`)."""

    def __init__(self, postgres=None, extra_env=None, cpus=None):
        self.cpus = cpus
        self.data = Path(tempfile.mkdtemp(prefix="weir-bench-"))
        self.postgres = postgres
        self.schema = f"weir_bench_{uuid.uuid4().hex[:12]}" if postgres else None
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "PORT", "HOST"))}
        self.env.update(WEIR_DATA_DIR=str(self.data), HOST="127.0.0.1", LOG_LEVEL="info")
        # No local model: the idle-RSS figure is without one.
        self.env.setdefault("WEIR_MODELS_DIR", str(self.data / "no-models"))
        if postgres:
            self.env.update(DATABASE_URL=postgres, DATABASE_SCHEMA=self.schema)
        self.env.update(extra_env or {})
        self.proc = None
        self.base = None
        self.key = None

    @property
    def backend(self):
        return "PostgreSQL" if self.postgres else "SQLite"

    @property
    def db_path(self):
        return self.data / "weir.db"

    def start(self, same_port=False):
        """Starts `weir serve`; `same_port`: where it listened before (a restart
        that clients must find again)."""
        port = int(self.env["PORT"]) if same_port and "PORT" in self.env else free_port()
        self.env["PORT"] = str(port)
        self.base = f"http://127.0.0.1:{port}/api/v1"
        self.proc = subprocess.Popen([str(release_bin("weir")), "serve"], env=self.env,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(self.data / "serve.log", "ab"),
                                     preexec_fn=pinned(self.cpus))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("weir serve exited:\n" + (self.data / "serve.log").read_text())
            try:
                call("GET", f"{self.base}/ping", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("weir serve did not answer /ping within 30 s")
        if self.key is None:
            self.key = (self.data / "initial-api-key").read_text().strip()
        return self

    def stop(self):
        stop_process(self.proc)
        self.proc = None

    def restart(self):
        self.stop()
        return self.start()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.data, ignore_errors=True)
        if self.schema:
            psql(self.postgres, f"DROP SCHEMA IF EXISTS {self.schema} CASCADE", check=False)

    def api(self, method, path, body=None):
        return call(method, f"{self.base}{path}", self.key, body)

    def create_chatflow(self, name, flow_data):
        return self.api("POST", "/chatflows", {"name": name, "flowData": flow_data})["id"]

    def rss_kib(self):
        return proc_status_kib(self.proc.pid, "VmRSS")

    def peak_rss_kib(self):
        return proc_status_kib(self.proc.pid, "VmHWM")


def call(method, url, key=None, body=None, headers=None, timeout=60):
    """One JSON request with urllib; returns the decoded answer (or raw bytes)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        text = r.read()
        return json.loads(text) if text and r.headers.get("content-type", "").startswith("application/json") else text


# --- flows (built with the test suite's builders: the same shapes the tests run) ------

sys.path.insert(0, str(ROOT / "tests" / "api"))
from flows import (af_condition, af_inside, af_iteration, af_llm, af_openai, af_reply,  # noqa: E402
                   af_start, agentflow, edge, graph, node, ref)


def openai_model(provider_url):
    return node("chatOpenAI_0", "chatOpenAI", {"modelName": "fake", "temperature": 0.9,
                                               "basePath": f"{provider_url}/v1", "openAIApiKey": "sk-bench"})


def memory_flow(provider_url, window=None):
    """`chatOpenAI` -> `conversationChain` + `bufferMemory` (or `bufferWindowMemory` k=window)."""
    model = openai_model(provider_url)
    if window is None:
        memory = node("bufferMemory_0", "bufferMemory", {})
    else:
        memory = node("bufferWindowMemory_0", "bufferWindowMemory", {"k": str(window)})
    chain = node("conversationChain_0", "conversationChain",
                 {"model": ref(model["id"]), "memory": ref(memory["id"])})
    return graph([model, memory, chain], [edge(model["id"], chain["id"]), edge(memory["id"], chain["id"])])


def agentflow_five(provider_url):
    """An agentflow of five nodes: start -> LLM -> condition (does the answer mention
    billing?) -> one of two LLMs -> direct reply. Two model calls a request."""
    def model():
        return af_openai(provider_url, key="sk-bench", model="fake")

    nodes = [af_start(), af_llm("llmAgentflow_0", model(), [{"role": "system", "content": "Classify."}]),
             af_condition("conditionAgentflow_0", [{"type": "string", "value1": "{{ llmAgentflow_0 }}",
                                                    "operation": "contains", "value2": "billing"}]),
             af_llm("llmAgentflow_1", model(), [{"role": "system", "content": "Billing."}]),
             af_llm("llmAgentflow_2", model(), [{"role": "system", "content": "Anything else."}]),
             af_reply("directReplyAgentflow_0", "Done.")]
    links = [("startAgentflow_0", "llmAgentflow_0"), ("llmAgentflow_0", "conditionAgentflow_0"),
             ("conditionAgentflow_0", "llmAgentflow_1", 0), ("conditionAgentflow_0", "llmAgentflow_2", 1),
             ("llmAgentflow_1", "directReplyAgentflow_0"), ("llmAgentflow_2", "directReplyAgentflow_0")]
    return agentflow(nodes, links)


def agentflow_iteration(provider_url, items):
    """start -> an iteration over `items` numbers whose block is one LLM node asked
    "Item <n>" -> direct reply: `items` model calls, one after the other."""
    iteration = af_iteration("iterationAgentflow_0", json.dumps(list(range(items))))
    block = af_inside(iteration, af_llm("llmAgentflow_0", af_openai(provider_url, key="sk-bench", model="fake"),
                                        [{"role": "user", "content": "Item {{ $iteration }}"}]))
    nodes = [af_start(), iteration, *block, af_reply("directReplyAgentflow_0", "Done.")]
    return agentflow(nodes, [("startAgentflow_0", "iterationAgentflow_0"),
                             ("iterationAgentflow_0", "directReplyAgentflow_0")])


def llm_chain_flow(provider_url):
    """`chatOpenAI` + `promptTemplate` -> `llmChain`, no memory."""
    model = openai_model(provider_url)
    prompt = node("promptTemplate_0", "promptTemplate",
                  {"template": "Answer briefly: {question}", "promptValues": json.dumps({})})
    chain = node("llmChain_0", "llmChain", {"model": ref(model["id"]), "prompt": ref(prompt["id"])})
    return graph([model, prompt, chain], [edge(model["id"], chain["id"]), edge(prompt["id"], chain["id"])])


# --- wrk ------------------------------------------------------------------------------


def ensure_debian_tool(command, package=None):
    """`command`, installed from Debian's `package` (default: the same name) when missing."""
    if shutil.which(command):
        return command
    package = package or command
    log(f"installing {package} (Debian package)...")
    install = ["apt-get", "install", "-y", "-qq", package]
    if subprocess.run(install, stdout=subprocess.DEVNULL).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(install, check=True, stdout=subprocess.DEVNULL)
    return command


def ensure_wrk():
    return ensure_debian_tool("wrk")


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def _ms(text):
    number, unit = re.fullmatch(r"([\d.]+)([a-z]+)", text).groups()
    return float(number) * _UNITS[unit]


class WrkResult:
    """What one wrk run reports: requests/s, latency p50/p99 (ms), non-2xx and socket errors."""

    def __init__(self, output):
        self.output = output
        lines = output.splitlines()
        self.rps = float(next(l for l in lines if l.startswith("Requests/sec")).split()[1])
        self.requests = int(next(l for l in lines if "requests in" in l).split()[0])
        self.p50 = _ms(next(l for l in lines if l.strip().startswith("50%")).split()[1])
        self.p99 = _ms(next(l for l in lines if l.strip().startswith("99%")).split()[1])
        self.non2xx = sum(int(l.split()[-1]) for l in lines if "Non-2xx" in l)
        self.socket_errors = sum(int(n) for l in lines if "Socket errors" in l
                                 for n in re.findall(r"\d+", l))

    @property
    def errors(self):
        return self.non2xx + self.socket_errors

    def summary(self):
        return (f"{self.rps:,.0f} req/s, p50 {self.p50:.2f} ms, p99 {self.p99:.2f} ms, "
                f"errors {self.errors}")


def wrk(url, seconds, connections, script=None, threads=None, cpus=None):
    threads = threads or min(2, connections)
    cmd = [ensure_wrk(), f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    if script:
        cmd[1:1] = ["-s", str(script)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         preexec_fn=pinned(cpus)).stdout
    return WrkResult(out)


def lua_string(text):
    return json.dumps(text)  # a JSON string literal is a valid Lua string literal here


def wrk_post_script(path, body, key=None):
    """A wrk script POSTing the same JSON body on every request."""
    lines = ['wrk.method = "POST"', f"wrk.body = {lua_string(json.dumps(body))}",
             'wrk.headers["Content-Type"] = "application/json"']
    if key:
        lines.append(f'wrk.headers["Authorization"] = {lua_string("Bearer " + key)}')
    Path(path).write_text("\n".join(lines) + "\n")
    return path


def wrk_get_script(path, key):
    Path(path).write_text(f'wrk.headers["Authorization"] = {lua_string("Bearer " + key)}\n')
    return path


def wrk_new_session_script(path, key, question="hello"):
    """A wrk script POSTing a prediction with a chatId never used before on every request:
    a per-run tag, the wrk thread's number and a counter."""
    tag = uuid.uuid4().hex[:8]
    Path(path).write_text(f"""
local threads_seen = 0
function setup(thread)
  threads_seen = threads_seen + 1
  thread:set("thread_no", threads_seen)
end
local counter = 0
local headers = {{["Content-Type"] = "application/json", ["Authorization"] = {lua_string("Bearer " + key)}}}
request = function()
  counter = counter + 1
  local body = string.format('{{"question":{json.dumps(question)},"chatId":"bench-{tag}-%d-%d"}}', thread_no, counter)
  return wrk.format("POST", nil, headers, body)
end
""")
    return path


# --- a local PostgreSQL ---------------------------------------------------------------


class LocalPostgres:
    """A throwaway PostgreSQL from DIR/bin on a free port (as `nobody` when run as
    root: postgres refuses root)."""

    def __init__(self, root, cpus, under=None):
        self.bin = Path(root).resolve() / "bin"
        self.dir = Path(tempfile.mkdtemp(prefix="weir-bench-pg-", dir=under))
        self.port = free_port()
        self.user = None
        if os.geteuid() == 0:
            self.user = pwd.getpwnam("nobody")
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        data = self.dir / "data"
        self.run([self.bin / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync"], cpus)
        conf = (f"port = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.dir}'\n"
                "max_connections = 400\nshared_buffers = 1GB\n")
        (data / "postgresql.auto.conf").write_text(conf)
        if self.user:
            os.chown(data / "postgresql.auto.conf", self.user.pw_uid, self.user.pw_gid)
        self.run([self.bin / "pg_ctl", "-D", data, "-l", self.dir / "log", "-w", "start"], cpus)
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        self.data = data

    def run(self, cmd, cpus):
        user = self.user

        def child():
            if cpus:
                os.sched_setaffinity(0, set(cpus))
            if user:
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)
        env = dict(os.environ, LD_LIBRARY_PATH=str(self.bin.parent / "lib"))
        subprocess.run([str(c) for c in cmd], check=True, preexec_fn=child, env=env,
                       stdout=subprocess.DEVNULL, cwd=self.dir)

    def close(self):
        try:
            self.run([self.bin / "pg_ctl", "-D", self.data, "-m", "fast", "stop"], None)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


# --- seeding a store directly ------------------------------------------------------------


def psql(url, sql, check=True):
    result = subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql],
                            capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"psql failed: {result.stderr.strip()}")
    return result.stdout


def _uuid4():
    return str(uuid.UUID(int=random.getrandbits(128), version=4))


def seed_messages_sqlite(db_path, chatflow_id, messages, sessions=None, session_id=None):
    """Inserts `messages` chat messages for one chatflow in one transaction, round-robin
    over `sessions` new sessions (or all in `session_id`), alternating user and answer,
    in the formats weir writes (uuid text ids, epoch-millisecond times)."""
    now = int(time.time() * 1000) - messages
    if session_id is None:
        names = [_uuid4() for _ in range(sessions)]
        session_of = lambda i: names[(i // 2) % sessions]  # noqa: E731  (question and answer together)
    else:
        session_of = lambda i: session_id  # noqa: E731
    rows = ((_uuid4(), chatflow_id, session_of(i), "userMessage" if i % 2 == 0 else "apiMessage",
             "seeded question" if i % 2 == 0 else "Echo: seeded question", now + i)
            for i in range(messages))
    with sqlite3.connect(db_path) as db:
        db.executemany("INSERT INTO chat_messages (id, chatflow_id, chat_id, role, content, created_at) "
                       "VALUES (?, ?, ?, ?, ?, ?)", rows)


def seed_chatflows_sqlite(db_path, workspace_id, count, flow_data):
    now = int(time.time() * 1000) - count
    text = json.dumps(flow_data)
    rows = ((_uuid4(), workspace_id, f"seeded {i}", text, "CHATFLOW", now + i, now + i) for i in range(count))
    with sqlite3.connect(db_path) as db:
        db.executemany("INSERT INTO chatflows (id, workspace_id, name, flow_data, type, created_at, updated_at) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)


def workspace_of_sqlite(db_path, chatflow_id):
    with sqlite3.connect(db_path) as db:
        return db.execute("SELECT workspace_id FROM chatflows WHERE id = ?", (chatflow_id,)).fetchone()[0]


def seed_messages_postgres(url, schema, chatflow_id, messages, sessions=None, session_id=None):
    session = (f"'{session_id}'" if session_id is not None
               else f"'seed-' || ((g / 2) % {sessions})")
    psql(url, f"""
        INSERT INTO {schema}.chat_messages (id, chatflow_id, chat_id, role, content, created_at)
        SELECT gen_random_uuid(), '{chatflow_id}', {session},
               CASE WHEN g % 2 = 0 THEN 'userMessage' ELSE 'apiMessage' END,
               CASE WHEN g % 2 = 0 THEN 'seeded question' ELSE 'Echo: seeded question' END,
               now() - ({messages} - g) * interval '1 millisecond'
        FROM generate_series(0, {messages - 1}) AS g;
        ANALYZE {schema}.chat_messages;""")


def seed_chatflows_postgres(url, schema, workspace_id, count, flow_data):
    text = json.dumps(flow_data).replace("'", "''")
    psql(url, f"""
        INSERT INTO {schema}.chatflows (id, workspace_id, name, flow_data, type, created_at, updated_at)
        SELECT gen_random_uuid(), '{workspace_id}', 'seeded ' || g, '{text}', 'CHATFLOW',
               now() - ({count} - g) * interval '1 millisecond', now() - ({count} - g) * interval '1 millisecond'
        FROM generate_series(0, {count - 1}) AS g;
        ANALYZE {schema}.chatflows;""")


def workspace_of_postgres(url, schema, chatflow_id):
    return psql(url, f"SELECT workspace_id FROM {schema}.chatflows WHERE id = '{chatflow_id}'").strip()
