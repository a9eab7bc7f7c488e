"""`sqlDatabaseChain` (Flowise's "SQL DB Chain" template): the fake model writes
the query the question carries ("… SQL <query>"), weir runs it read only on a
SQLite file in SQL_DATABASE_DIR or on a PostgreSQL database (the machine's, through
the address guard), and the model answers from its rows. Writes, a second
statement, ATTACH, a file outside the directory, a private address and a query past
SQL_QUERY_TIMEOUT_MS are all refused; the data stays as it was."""

import json
import sqlite3
import subprocess
import uuid

import pytest

import flows
from fakes import FakeProviders
from prediction_client import ask, create_flow, nonce, predict, stream
from weir_harness import PG_URL, Api, Weir, assert_error, backends

ROWS = [("Ada", "Oslo"), ("Grace", "Lima"), ("Linus", None)]


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module", params=backends())
def sql_weir(request, tmp_path_factory):
    """A weir whose SQL_DATABASE_DIR holds shop.db, that may reach 127.0.0.1 (the
    machine's PostgreSQL), with a short query timeout."""
    w = Weir(tmp_path_factory.mktemp(f"weir-sql-{request.param}"), request.param)
    sql_dir = w.data_dir / "sql"
    sql_dir.mkdir()
    db = sqlite3.connect(sql_dir / "shop.db")
    db.execute("CREATE TABLE customers (name TEXT NOT NULL, city TEXT)")
    db.executemany("INSERT INTO customers VALUES (?, ?)", ROWS)
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT)")
    db.commit()
    db.close()
    w.env.update(SQL_DATABASE_DIR=str(sql_dir), ALLOW_PRIVATE_REQUESTS="127.0.0.1", SQL_QUERY_TIMEOUT_MS="1500")
    w.start()
    yield w
    w.cleanup()


@pytest.fixture
def sql_api(sql_weir) -> Api:
    return Api(sql_weir.url, sql_weir.create_key(workspace=f"ws-{nonce()}"))


def sql_chain(fake, database, url, **inputs):
    model = flows.openai_model(fake.url)
    chain = flows.node("sqlDatabaseChain_0", "sqlDatabaseChain", {
        "model": flows.ref("chatOpenAI_0"), "database": database, "url": url, "inputModeration": "",
        "customPrompt": "", **inputs})
    return flows.graph([model, chain], [flows.edge("chatOpenAI_0", "sqlDatabaseChain_0")])


def query(body):
    [used] = body["usedTools"]
    assert used["tool"] == "sql_db_query"
    return used["toolInput"]["query"], used["toolOutput"]


def sqlite_rows(weir):
    db = sqlite3.connect(weir.data_dir / "sql" / "shop.db")
    try:
        return db.execute("SELECT count(*) FROM customers").fetchone()[0]
    finally:
        db.close()


def test_a_question_is_answered_from_a_sqlite_database(sql_api, fake):
    flow = create_flow(sql_api, sql_chain(fake, "sqlite", "shop.db", includesTables="customers"))
    marker = nonce()
    body = ask(sql_api, flow, f"Who lives in Oslo {marker}? SQL SELECT \"name\" FROM customers WHERE city = 'Oslo'")
    sql, rows = query(body)
    assert sql == "SELECT \"name\" FROM customers WHERE city = 'Oslo'"
    assert json.loads(rows) == [{"name": "Ada"}]
    # The answer is the model's second completion, which reads the rows.
    assert body["text"].startswith("Echo: You are a SQLite expert.")
    assert body["text"].endswith(f"SQLQuery:{sql}\nSQLResult: {rows}\nAnswer:")
    # The first prompt described the table kept, with LangChain's sample rows.
    [first, _] = fake.bodies("/chat/completions", marker)
    prompt = first["messages"][0]["content"]
    assert ('CREATE TABLE "customers" (\nname TEXT NOT NULL, city TEXT) \n'
            'SELECT * FROM "customers" LIMIT 3;\n name city\n Ada Oslo\n Grace Lima\n Linus null\n') in prompt
    assert "orders" not in prompt and "at most 5 results" in prompt
    # Streamed: the second completion's tokens, then the end.
    events = stream(sql_api, flow, "How many? SQL SELECT count(*) AS n FROM customers")
    assert "".join(d for e, d in events if e == "token").endswith('SQLResult: [{"n":3}]\nAnswer:')


@pytest.mark.parametrize("statement, words", [
    ("DELETE FROM customers", "only statements that read"),
    ("SELECT 1; DROP TABLE customers", "one SQL statement"),
    ("ATTACH DATABASE 'other.db' AS other", "too many attached databases"),
    ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
     "1500 ms limit"),
])
def test_sqlite_runs_only_one_statement_that_reads_in_time(sql_api, sql_weir, fake, statement, words):
    flow = create_flow(sql_api, sql_chain(fake, "sqlite", "shop.db"))
    sql, result = query(ask(sql_api, flow, f"Do it. SQL {statement}"))
    assert sql == statement and result.startswith("Error: ") and words in result, result
    assert sqlite_rows(sql_weir) == len(ROWS)


@pytest.mark.parametrize("path", ["../weir.db", "/etc/passwd", "missing.db"])
def test_a_sqlite_file_outside_sql_database_dir_is_refused(sql_api, fake, path):
    flow = create_flow(sql_api, sql_chain(fake, "sqlite", path))
    message = assert_error(predict(sql_api, flow, "SQL SELECT 1"), 500)["message"]
    assert "sqlDatabaseChain_0" in message and "SQL_DATABASE_DIR" in message, message


@pytest.mark.parametrize("inputs, words", [
    ({"database": "mysql", "url": "db:3306/x"}, "mysql"),
    ({"url": ""}, "url"),
    ({"includesTables": "a", "ignoreTables": "b"}, "includesTables"),
    ({"customPrompt": "Answer {input}"}, "customPrompt"),
])
def test_what_the_chain_cannot_read_is_a_400(sql_api, fake, inputs, words):
    settings = {"database": "sqlite", "url": "shop.db", **inputs}
    r = sql_api.post("/chatflows", json={"name": "sql", "flowData": json.dumps(
        sql_chain(fake, settings.pop("database"), settings.pop("url"), **settings))})
    if r.status_code == 201:
        r = predict(sql_api, r.json()["id"], "SQL SELECT 1")
    assert_error(r, 400, words)


def test_a_table_the_database_lacks_fails_naming_it(sql_api, fake):
    flow = create_flow(sql_api, sql_chain(fake, "sqlite", "shop.db", includesTables="customers, invoices"))
    message = assert_error(predict(sql_api, flow, "SQL SELECT 1"), 500)["message"]
    assert "invoices" in message, message


@pytest.fixture(scope="module")
def pg_database():
    """A PostgreSQL database of its own, with the same customers."""
    if not PG_URL:
        pytest.skip("WEIR_TEST_DATABASE_URL is not set: PostgreSQL not tested")
    name = f"weir_sql_{uuid.uuid4().hex[:12]}"
    subprocess.run(["psql", PG_URL, "-qAtc", f"CREATE DATABASE {name}"], check=True)
    url = PG_URL.rsplit("/", 1)[0] + f"/{name}"
    values = ", ".join(f"('{n}', {'NULL' if c is None else repr(c)})" for n, c in ROWS)
    subprocess.run(["psql", url, "-qAtc", "CREATE TABLE customers (name text NOT NULL, city text); "
                    f"INSERT INTO customers VALUES {values}"], check=True)
    yield url
    subprocess.run(["psql", PG_URL, "-qAtc", f"DROP DATABASE {name} WITH (FORCE)"], check=True)


def pg_rows(url):
    out = subprocess.run(["psql", url, "-qAtc", "SELECT count(*) FROM customers"], check=True,
                         capture_output=True, text=True)
    return int(out.stdout.strip())


def test_a_question_is_answered_from_a_postgresql_database(sql_api, fake, pg_database):
    flow = create_flow(sql_api, sql_chain(fake, "postgres", pg_database))
    marker = nonce()
    body = ask(sql_api, flow, f"Where is Grace {marker}? SQL SELECT city FROM customers WHERE name = 'Grace';")
    sql, rows = query(body)
    assert json.loads(rows) == [{"city": "Lima"}]
    [first, _] = fake.bodies("/chat/completions", marker)
    prompt = first["messages"][0]["content"]
    assert "You are a PostgreSQL expert." in prompt
    assert ('CREATE TABLE "public"."customers" (\nname TEXT NOT NULL, city TEXT) \n'
            'SELECT * FROM "public"."customers" LIMIT 3;\n name city\n Ada Oslo\n') in prompt
    # Flowise's placeholder has no scheme: postgres:// is understood.
    flow = create_flow(sql_api, sql_chain(fake, "postgres", pg_database.split("://", 1)[1]))
    assert json.loads(query(ask(sql_api, flow, "SQL SELECT count(*) AS n FROM customers"))[1]) == [{"n": 3}]


@pytest.mark.parametrize("statement, words", [
    ("DELETE FROM customers RETURNING name", "syntax error"),
    ("SELECT 1; DROP TABLE customers", "syntax error"),
    ("SELECT 1) AS q; COMMIT; DELETE FROM customers; SELECT (1", "multiple commands"),
    ("SELECT pg_sleep(5)", "statement timeout"),
])
def test_postgresql_runs_only_one_statement_that_reads_in_time(sql_api, fake, pg_database, statement, words):
    flow = create_flow(sql_api, sql_chain(fake, "postgres", pg_database))
    _, result = query(ask(sql_api, flow, f"Do it. SQL {statement}"))
    assert result.startswith("Error: ") and words in result, result
    assert pg_rows(pg_database) == len(ROWS)


def test_postgresql_on_a_private_address_is_refused(sql_api, fake, pg_database):
    """127.0.0.1 is allowed to this weir; 127.0.0.2 (loopback too) is not."""
    url = pg_database.replace("127.0.0.1", "127.0.0.2")
    flow = create_flow(sql_api, sql_chain(fake, "postgres", url))
    message = assert_error(predict(sql_api, flow, "SQL SELECT 1"), 500)["message"]
    assert "may not be reached" in message and "127.0.0.2" in message, message
    assert "@" not in message.split("sqlDatabaseChain_0", 1)[1], "the URL's credentials were echoed"


def test_flowises_sql_db_chain_template_runs(sql_api, fake):
    """Flowise 3.1's "SQL DB Chain" marketplace template, written by hand from its
    node tables: only the model's base URL and key and the database path are set."""
    model = flows.flowise_node("chatOpenAI_0", "chatOpenAI", "ChatOpenAI", "Chat Models", {
        "cache": "", "modelName": "gpt-3.5-turbo", "temperature": "0", "maxTokens": "", "topP": "",
        "frequencyPenalty": "", "presencePenalty": "", "timeout": "", "basepath": "", "baseOptions": "",
        "allowImageUploads": True, "imageResolution": "low"})
    chain = flows.flowise_node("sqlDatabaseChain_0", "sqlDatabaseChain", "SqlDatabaseChain", "Chains", {
        "inputModeration": "", "model": "{{chatOpenAI_0.data.instance}}", "database": "sqlite", "url": "",
        "customPrompt": ""})
    edge = flows.flowise_edge("chatOpenAI_0", "chatOpenAI-ChatOpenAI|BaseChatModel|BaseLanguageModel",
                              "sqlDatabaseChain_0", "model-BaseLanguageModel")
    model["data"]["inputs"].update(basepath=f"{fake.url}/v1", openAIApiKey="sk-good")
    chain["data"]["inputs"]["url"] = "shop.db"
    flow = create_flow(sql_api, {"nodes": [model, chain], "edges": [edge]})
    body = ask(sql_api, flow, "Where does Grace live? SQL SELECT \"city\" FROM customers WHERE \"name\" = 'Grace'")
    assert json.loads(query(body)[1]) == [{"city": "Lima"}]
    assert body["text"].endswith('SQLResult: [{"city":"Lima"}]\nAnswer:')
