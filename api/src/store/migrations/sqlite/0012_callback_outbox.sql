-- The callback outbox: a webhook call answered at once (async mode) gets its
-- run's outcome POSTed to a callback URL. The row is written with the firing
-- (so a call accepted is a callback owed), its body when the firing ends (in
-- the same transaction as the result, or as an error when the firing's lease
-- runs out), and it is retried with backoff until delivered or given up. Its
-- id is the idempotency key the receiver sees.
CREATE TABLE callback_outbox (
    id               TEXT PRIMARY KEY,
    trigger_id       TEXT NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
    firing_id        TEXT NOT NULL UNIQUE,
    result_id        TEXT,
    url              TEXT NOT NULL,
    secret           TEXT,
    body             TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    delivered_at     INTEGER,
    failed_at        INTEGER,
    last_error       TEXT,
    created_at       INTEGER NOT NULL
);
CREATE INDEX callback_outbox_due ON callback_outbox (next_attempt_at)
    WHERE body IS NOT NULL AND delivered_at IS NULL AND failed_at IS NULL;
CREATE INDEX callback_outbox_by_result ON callback_outbox (result_id);
CREATE INDEX callback_outbox_by_time ON callback_outbox (created_at);
-- weir's own webhook triggers may answer at once too (`responseMode: async`),
-- their outcome POSTed to `callbackUrl`, signed with the sealed `callbackSecret`.
ALTER TABLE triggers ADD COLUMN response_mode TEXT NOT NULL DEFAULT 'sync';
ALTER TABLE triggers ADD COLUMN callback_url TEXT;
ALTER TABLE triggers ADD COLUMN callback_secret TEXT;
