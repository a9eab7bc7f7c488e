"""The `postgres` vector store node (Flowise's pgvector node) on a PostgreSQL that
has pgvector (pgvector_server.py): weir installs the extension, writes every
chunk's vector into it and lets PostgreSQL search the node's chunks
(`similarity`, and `mmr`'s fetchK nearest), with the same answers as its own
index; chunks stored before (or with `PGVECTOR=off`) get their vectors at the
next start; without the right to install the extension it says so and searches
its own index."""

import uuid

import pytest

import flows
from fakes import FakeProviders
from pgvector_server import BundledPostgres
from prediction_client import ask, create_flow
from test_retrieval import (CORPUS, FACTS, MINILM, PART, TOWER, check_chat_uploads, contents, qa_flow, upsert,
                            upserted)
from weir_harness import Api, wait_for

needs_minilm = pytest.mark.skipif(not MINILM.is_dir(), reason=f"no {MINILM}: run scripts/fetch-models")
# The nearest-chunks statement: the only one of weir's that orders by pgvector's
# cosine distance operator.
NEAREST = 'OPERATOR("public".<=>)'


@pytest.fixture(scope="module")
def pg():
    server = BundledPostgres().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture
def on_pgvector(make_weir, pg):
    """Unstarted installations, each on a fresh database of the pgvector server."""

    def make(database=None, user="postgres", **env):
        w = make_weir()
        w.backend = "pgvector"
        w.database = database or pg.new_database()
        w.env.update(DATABASE_URL=pg.url(w.database, user), **env)
        return w

    return make


def said(weir, words):
    return [line for line in weir.logs().splitlines() if words in line]


def stored_vectors(pg, database):
    """(chunks, chunks with a pgvector vector, their distinct lengths)."""
    row = pg.psql("SELECT count(*), count(embedding_v), "
                  "coalesce(string_agg(DISTINCT vector_dims(embedding_v)::text, ','), '') FROM vector_chunks",
                  database)
    total, with_vector, dims = row.split("|")
    return int(total), int(with_vector), dims


def corpus_flow(api, fake, store, **inputs):
    splitter = flows.character_splitter(120, 0, "\n")
    flow = create_flow(api, qa_flow(fake, [splitter, flows.plain_text("\n".join(CORPUS), splitter)],
                                    flows.local_embeddings(), store, **inputs))
    assert contents(upserted(upsert(api, flow))["addedDocs"]) == CORPUS
    return flow


def sources(api, flow, question, **kw):
    return contents(ask(api, flow, question, **kw)["sourceDocuments"])


@needs_minilm
def test_postgres_node_is_searched_by_pgvector_with_the_same_answers(on_pgvector, pg, fake):
    w = on_pgvector().start()
    [line] = said(w, "pgvector is in use")
    assert "backfilled=0" in line, line
    api = Api(w.url, w.create_key())
    one = corpus_flow(api, fake, flows.postgres_store, topK=1)
    two = corpus_flow(api, fake, flows.postgres_store, topK=2)
    mmr = corpus_flow(api, fake, flows.postgres_store, topK=2, searchType="mmr", fetchK=10, **{"lambda": 0.5})
    memory = corpus_flow(api, fake, flows.memory_vector_store, topK=2)
    hybrid = corpus_flow(api, fake, flows.postgres_store, searchType="hybrid")
    # Every chunk (of every store) has its vector in pgvector's column.
    assert stored_vectors(pg, w.database) == (5 * len(CORPUS), 5 * len(CORPUS), "384")

    before = pg.log_size()
    for fact, question in FACTS:
        assert sources(api, one, question) == [fact], question
    searched = pg.statements_since(before)
    assert searched.count(NEAREST) >= len(FACTS), "each question was searched by PostgreSQL"

    question = "How tall is the Eiffel Tower?"
    assert sorted(sources(api, two, question)) == sorted(TOWER[:2]) == sorted(sources(api, memory, question))
    diverse = sources(api, mmr, question)
    assert len(diverse) == 2 and diverse[0] in TOWER[:2] and diverse[1] not in TOWER[:2], diverse

    # hybrid ranks every chunk's words as well: weir's own index, not a pgvector search.
    before = pg.log_size()
    assert sources(api, hybrid, "XJ-4471-B")[0] == PART
    assert NEAREST not in pg.statements_since(before)
    # Other kinds of store are never searched by PostgreSQL.
    before = pg.log_size()
    sources(api, memory, question)
    assert NEAREST not in pg.statements_since(before)


HNSW_384 = "vector_chunks_hnsw_384"


def hnsw_state(pg, database):
    """'true' / 'false' (valid or not) for the 384-float index, 'missing' without one."""
    return pg.psql("SELECT coalesce((SELECT i.indisvalid::text FROM pg_index i JOIN pg_class c "
                   f"ON c.oid = i.indexrelid WHERE c.relname = '{HNSW_384}'), 'missing')", database)


def hnsw_scans(pg, database):
    return int(pg.psql("SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes "
                       f"WHERE indexrelname = '{HNSW_384}'", database))


@needs_minilm
def test_a_big_store_is_searched_through_its_hnsw_index(on_pgvector, pg, fake):
    """The first upsert of 384-float vectors builds pgvector's HNSW index for that
    length in the background; once the node holds many chunks, PostgreSQL walks it and
    the answers stay right."""
    w = on_pgvector(PGVECTOR_EF_SEARCH="64").start()
    api = Api(w.url, w.create_key())
    flow = corpus_flow(api, fake, flows.postgres_store, topK=1)
    wait_for(lambda: hnsw_state(pg, w.database) == "true", 30, "the HNSW index to be built")
    assert said(w, "built pgvector's HNSW index for 384-float embeddings")
    # 10,000 more chunks in the node, in random directions: far from every question.
    pg.psql(f"""INSERT INTO vector_chunks (id, chatflow_id, node_id, content_hash, source, page_content,
                                           metadata, embedding, embedding_v)
                SELECT gen_random_uuid(), '{flow}', 'postgres_0', md5(g::text), 'noise', 'noise ' || g,
                       '{{}}', '\\x'::bytea,
                       (SELECT array_agg(random() * 2 - 1) FROM generate_series(1, 384) WHERE g > 0)
                         ::real[]::vector
                FROM generate_series(1, 10000) g""", w.database)
    pg.psql("ANALYZE vector_chunks", w.database)
    scans = hnsw_scans(pg, w.database)
    for fact, question in FACTS:
        assert sources(api, flow, question) == [fact], question
    # Statistics reach pg_stat_user_indexes once the connection has been idle a moment.
    wait_for(lambda: hnsw_scans(pg, w.database) >= scans + len(FACTS), 30, "searches through the index")
    # A restart finds the index there and builds nothing.
    w.stop()
    w.start()
    assert sources(Api(w.url, api.key), flow, FACTS[0][1]) == [FACTS[0][0]]
    assert len(said(w, "built pgvector's HNSW index")) == 1


def test_chat_uploads_stay_in_their_chat(on_pgvector, pg, fake):
    w = on_pgvector().start()
    api = Api(w.url, w.create_key())
    before = pg.log_size()
    check_chat_uploads(api, fake, flows.postgres_store)
    assert NEAREST in pg.statements_since(before)


@needs_minilm
def test_chunks_stored_without_pgvector_get_their_vectors_at_the_next_start(on_pgvector, pg, fake):
    off = on_pgvector(PGVECTOR="off").start()
    assert said(off, "PGVECTOR=off") and not said(off, "pgvector is in use")
    api_key = off.create_key()
    flow = corpus_flow(Api(off.url, api_key), fake, flows.postgres_store, topK=1)
    assert pg.psql("SELECT count(*) FROM information_schema.columns WHERE column_name = 'embedding_v'",
                   off.database) == "0", "off: the table is left as it is"
    off.stop()

    on = on_pgvector(database=off.database).start()
    [line] = said(on, "pgvector is in use")
    assert f"backfilled={len(CORPUS)}" in line, line
    assert stored_vectors(pg, on.database) == (len(CORPUS), len(CORPUS), "384")
    api = Api(on.url, api_key)
    before = pg.log_size()
    fact, question = FACTS[2]
    assert sources(api, flow, question) == [fact]
    assert NEAREST in pg.statements_since(before)

    # A second start has nothing left to fill, and the index is as it was.
    on.stop()
    on.start()
    assert "backfilled=0" in said(on, "pgvector is in use")[-1]
    assert sources(Api(on.url, api_key), flow, question) == [fact]


def test_without_the_right_to_install_it_weir_says_so_and_uses_its_own_index(on_pgvector, pg, fake):
    role = f"weir_{uuid.uuid4().hex[:8]}"
    pg.psql(f"CREATE ROLE {role} LOGIN")
    w = on_pgvector(database=pg.new_database(owner=role), user=role).start()
    [line] = said(w, "pgvector cannot be used")
    assert "permission denied" in line and "weir's own index" in line, line
    api = Api(w.url, w.create_key())
    # Fake embeddings (a bag of words): the chunk sharing the question's words.
    splitter = flows.character_splitter(40, 0, "\n\n")
    docs = flows.plain_text("The canteen serves soup on Mondays.\n\nThe gym opens at six.", splitter)
    flow = create_flow(api, qa_flow(fake, [splitter, docs], store=flows.postgres_store, topK=1))
    upserted(upsert(api, flow))
    before = pg.log_size()
    assert sources(api, flow, "When does the gym open?") == ["The gym opens at six."]
    assert NEAREST not in pg.statements_since(before)
