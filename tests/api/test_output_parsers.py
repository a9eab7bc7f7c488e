"""Output parsers on an llmChain (csvOutputParser, structuredOutputParser,
advancedStructuredOutputParser): the format instructions reach the model after
the prompt, the answer comes back as Flowise's `json` (a list or an object
checked against the schema), `autofixParser` makes one fix-up call, a flow with
a parser answers a streaming request with JSON, and an answer that does not
parse is a 500 naming the parser.

The fake model echoes the last user message ("Echo: ..."), so a question holding
a fenced JSON block is answered with that block."""

import json

import pytest

import flows
from fakes import FakeProviders
from prediction_client import ask, create_flow, predict
from weir_harness import assert_error

MOVIE_SCHEMA = """z.object({
    title: z.string(), // Title of the movie as a string
    yearOfRelease: z.number().int(), // Release year as an integer number,
    genres: z.enum([
        "Action", "Comedy", "Drama", "Fantasy", "Horror",
        "Mystery", "Romance", "Science Fiction", "Thriller", "Documentary"
    ]).array().max(2), // Array of genres, max of 2 from the defined enum
    shortDescription: z.string().max(500) // Short description, max 500 characters
})"""
MOVIE = {"title": "Alien", "yearOfRelease": 1979, "genres": ["Horror", "Science Fiction"],
         "shortDescription": "A crew meets something in space."}
CSV_INSTRUCTIONS = "Your response should be a list of comma separated values, eg: `foo, bar, baz`"


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def fenced(value):
    return "```json\n" + json.dumps(value) + "\n```"


def parser_flow(api, fake, parser, prompt=None):
    prompt = prompt or flows.prompt_template("{question}")
    return create_flow(api, flows.parsed_chain(flows.openai_model(fake.url), prompt, parser))


def sent_messages(fake):
    return fake.last("/chat/completions")["messages"]


def test_a_csv_parser_answers_a_list_and_instructs_the_system_message(api, fake):
    prompt = flows.chat_prompt_template("You list colours.", "{question}")
    flow = parser_flow(api, fake, flows.csv_output_parser(), prompt)
    body = ask(api, flow, "red, green ,blue", chatId="csv-chat")
    assert body["json"] == ["Echo: red", "green", "blue"]
    system, user = sent_messages(fake)
    assert system == {"role": "system", "content": f"You list colours.\n{CSV_INSTRUCTIONS}"}
    assert user["content"] == "red, green ,blue"
    # The text (and the stored answer) is the JSON in a fenced block.
    assert body["text"] == "```json\n" + json.dumps(body["json"], indent=2) + "\n```"
    stored = api.get(f"/chatmessage/{flow}", params={"chatId": "csv-chat"}).json()
    assert [m["content"] for m in stored] == ["red, green ,blue", body["text"]]


def test_a_structured_parser_answers_an_object_of_its_rows(api, fake):
    flow = parser_flow(api, fake, flows.structured_output_parser())
    body = ask(api, flow, fenced({"answer": "Paris", "source": "atlas.example", "extra": 1}))
    assert body["json"] == {"answer": "Paris", "source": "atlas.example"}, "keys not in the rows are dropped"
    [user] = sent_messages(fake)
    head, instructions = user["content"].split("\n", 2)[0], user["content"]
    assert head == "```json"
    assert "You must format your output as a JSON value that adheres to a given \"JSON Schema\" instance." in instructions
    assert '"answer":{"description":"answer to the user\'s question","type":"string"}' in instructions
    assert instructions.endswith("```\n")

    rows = [{"property": "city", "type": "string", "description": "a city"},
            {"property": "people", "type": "number", "description": "how many live there"}]
    flow = parser_flow(api, fake, flows.structured_output_parser(jsonStructure=json.dumps(rows)))
    assert ask(api, flow, fenced({"city": "Oslo", "people": 709000}))["json"] == {"city": "Oslo", "people": 709000}
    r = predict(api, flow, fenced({"city": "Oslo", "people": "many"}))
    assert_error(r, 500, "structuredOutputParser_0")
    assert "'people' is not a number" in r.json()["message"]


def test_an_advanced_parser_checks_the_zod_schema(api, fake):
    flow = parser_flow(api, fake, flows.advanced_structured_output_parser(MOVIE_SCHEMA))
    assert ask(api, flow, fenced(MOVIE))["json"] == MOVIE
    for wrong, why in [({**MOVIE, "yearOfRelease": 1979.5}, "'yearOfRelease' is not an integer"),
                       ({**MOVIE, "genres": ["Western"]}, "'genres.0' is not one of"),
                       ({k: v for k, v in MOVIE.items() if k != "title"}, "'title' is missing")]:
        r = predict(api, flow, fenced(wrong))
        assert_error(r, 500, "advancedStructuredOutputParser_0")
        assert why in r.json()["message"], r.json()
    # Unlike Flowise, a list at the root is read too.
    flow = parser_flow(api, fake, flows.advanced_structured_output_parser("z.array(z.object({ name: z.string() }))"))
    assert ask(api, flow, fenced([{"name": "a"}, {"name": "b"}]))["json"] == [{"name": "a"}, {"name": "b"}]


def test_autofix_makes_one_fix_up_call(api, fake):
    fixed = json.dumps(MOVIE)
    # A chat prompt: the instructions go to the system message, the echo is the question's.
    prompt = flows.chat_prompt_template("You describe movies.", "{question}")
    flow = parser_flow(api, fake, flows.advanced_structured_output_parser(MOVIE_SCHEMA, autofixParser=True),
                       prompt)
    before = fake.count("/chat/completions")
    assert ask(api, flow, f"not json at all FIX_TO {fixed}")["json"] == MOVIE
    assert fake.count("/chat/completions") == before + 2
    [fix] = sent_messages(fake)
    assert fix["content"].startswith("Instructions:\n--------------\nYou must format your output")
    assert "Completion:\n--------------\nEcho: not json at all FIX_TO" in fix["content"]
    assert "Error:\n--------------\nthe answer is not JSON" in fix["content"]

    # Still wrong after the fix: a 500 that says a fix was tried.
    before = fake.count("/chat/completions")
    r = predict(api, flow, "not json FIX_TO {\"title\": 1}")
    assert_error(r, 500, "after one attempt to fix it")
    assert fake.count("/chat/completions") == before + 2

    # Without autofix, one call and the error.
    plain = parser_flow(api, fake, flows.advanced_structured_output_parser(MOVIE_SCHEMA), prompt)
    before = fake.count("/chat/completions")
    assert_error(predict(api, plain, f"not json FIX_TO {fixed}"), 500, "the answer is not JSON")
    assert fake.count("/chat/completions") == before + 1


def test_a_flow_with_a_parser_answers_streaming_requests_with_json(api, fake):
    flow = parser_flow(api, fake, flows.csv_output_parser(),
                       flows.chat_prompt_template("You list letters.", "{question}"))
    plain = create_flow(api, flows.llm_chain(flows.openai_model(fake.url), flows.prompt_template("{question}")))
    assert api.get(f"/chatflows-streaming/{flow}").json() == {"isStreaming": False}
    assert api.get(f"/chatflows-streaming/{plain}").json() == {"isStreaming": True}
    r = api.post(f"/prediction/{flow}", json={"question": "a, b", "streaming": True},
                 headers={"Accept": "text/event-stream"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json"), r.headers
    assert r.json()["json"][1:] == ["b"]


def test_a_zod_schema_weir_cannot_read_is_a_400_naming_it(api, fake):
    flow = parser_flow(api, fake, flows.advanced_structured_output_parser("z.object({ a: z.bigint() })"))
    r = predict(api, flow, "hi")
    assert_error(r, 400, "advancedStructuredOutputParser_0")
    assert "z.bigint()" in r.json()["message"] and "exampleJson" in r.json()["message"]
    flow = parser_flow(api, fake, flows.structured_output_parser(jsonStructure="{not json"))
    assert_error(predict(api, flow, "hi"), 400, "jsonStructure")
