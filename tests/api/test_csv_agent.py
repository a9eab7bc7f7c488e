"""The CSV agent (`csvAgent`) over HTTP, on the real Python runtime: the runtime
reads the node's CSV with pandas (installed into the workspace's venv), the model
writes pandas code from the columns' types, the runtime runs it in its isolation,
and the model words the value. The fake model answers the code request with the
code after `CODE` in the question, and echoes the rest."""

import base64
import uuid

import pytest

import flows
from fakes import FakeProviders
from prediction_client import ask, create_flow, predict
from tool_runtime import use_runtime
from weir_harness import Api, Weir, assert_error

PEOPLE = "name,age\nada,36\nbob,41\ncy,29\n"


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module")
def csv_api(py_runtime, tmp_path_factory):
    """One server on the shared runtime, one workspace: pandas is installed once."""
    w = use_runtime(Weir(tmp_path_factory.mktemp("weir-csv"), "sqlite"), py_runtime)
    w.start()
    yield Api(w.url, w.create_key(workspace=f"ws-{uuid.uuid4().hex[:8]}"))
    w.cleanup()


def csv_flow(fake, csv=PEOPLE, **inputs):
    model = flows.openai_model(fake.url)
    data = "data:text/csv;base64," + base64.b64encode(csv.encode()).decode() + ",filename:people.csv"
    agent = flows.node("csvAgent_0", "csvAgent", {"csvFile": data, "model": flows.ref(model["id"]), **inputs})
    return flows.graph([model, agent], [flows.edge(model["id"], "csvAgent_0")])


def test_questions_are_answered_with_pandas(csv_api, fake):
    flow = create_flow(csv_api, csv_flow(fake, systemMessagePrompt="Be brief."))
    body = ask(csv_api, flow, "How many people? CODE len(df)")
    asked = fake.bodies("/chat/completions", "How many people?")
    code_request = asked[-2]["messages"][0]["content"]
    assert code_request.startswith("You are working with a pandas dataframe in Python.")
    # The columns' types as JSON, as Flowise gives them (pandas names the text type).
    assert '{"name": "' in code_request and '"age": "int64"}' in code_request
    assert body["text"].startswith("Echo: Be brief.\nYou are given the question: How many people?")
    assert "You have an answer to the question: 3." in body["text"]
    oldest = ask(csv_api, flow, "Who is oldest? CODE df.loc[df['age'].idxmax(), 'name']")
    assert "You have an answer to the question: bob." in oldest["text"]
    # Statements first, then an expression: its value is the answer.
    mean = ask(csv_api, flow, "Mean age? CODE m = df['age'].mean(); round(m, 1)")
    assert "You have an answer to the question: 35.3." in mean["text"]


def test_code_that_fails_is_a_500_naming_it(csv_api, fake):
    flow = create_flow(csv_api, csv_flow(fake))
    message = assert_error(predict(csv_api, flow, "Height? CODE df['height'].max()"), 500)["message"]
    assert "csvAgent_0" in message and "df['height'].max()" in message and "KeyError" in message


def test_the_code_runs_in_the_runtime_not_the_server(csv_api, fake):
    """The model's code sees the runtime's isolated view: the server's files are not there."""
    flow = create_flow(csv_api, csv_flow(fake))
    here = str(__file__)
    body = predict(csv_api, flow, f"Peek? CODE __import__('os').path.exists({here!r})")
    assert body.status_code == 200, body.text
    assert "You have an answer to the question: False." in body.json()["text"]


def test_a_broken_csv_file_input_is_a_400(csv_api, fake):
    flow = create_flow(csv_api, flows.graph([flows.openai_model(fake.url), flows.node(
        "csvAgent_0", "csvAgent", {"csvFile": "FILE-STORAGE::[\"people.csv\"]",
                                   "model": flows.ref("chatOpenAI_0")})]))
    assert "FILE-STORAGE" in assert_error(predict(csv_api, flow, "hi"), 400)["message"]
