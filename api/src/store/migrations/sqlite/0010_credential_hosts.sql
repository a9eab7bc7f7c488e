-- The hosts a credential's fields may be sent to besides its provider's own (a
-- comma-separated list of `host` or `host:port`; empty for none). Not secret, so
-- not sealed; only a key with credentials:write sets it.
ALTER TABLE credentials ADD COLUMN allowed_hosts TEXT NOT NULL DEFAULT '';
