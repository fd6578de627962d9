-- Idempotency keys of record creates. A client that sends `Idempotency-Key` with a create and
-- gets no answer (or `COMMIT_OUTCOME_UNKNOWN`) sends the same request again with the same key;
-- if the first one committed, the key is here, stored by the create's own statement, and the
-- repeat is answered with that record instead of creating a second one. Keys belong to their
-- principal and are kept 24 hours.
--
-- The schema `hf_caller` holds what callers' roles may touch of the service's own: the create
-- runs as the caller's role, so it may insert a key, but only the key, the fingerprint and the
-- record id; the principal is the session's `hf.caller_id` (which the service sets) and the
-- time is now. Reading and deleting keys is the service's own.
CREATE SCHEMA hf_caller;
REVOKE ALL ON SCHEMA hf_caller FROM PUBLIC;
GRANT USAGE ON SCHEMA hf_caller TO "hf:authenticated";
CREATE TABLE hf_caller.idempotency_keys (
    principal_id uuid        NOT NULL DEFAULT nullif(current_setting('hf.caller_id', true), '')::uuid,
    key          text        NOT NULL,
    -- SHA-256 (hex) of the object and the request body: the same key with another request is
    -- refused.
    fingerprint  text        NOT NULL,
    record_id    uuid        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal_id, key)
);
CREATE INDEX idempotency_keys_created_at ON hf_caller.idempotency_keys (created_at);
REVOKE ALL ON hf_caller.idempotency_keys FROM PUBLIC;
GRANT INSERT (key, fingerprint, record_id) ON hf_caller.idempotency_keys TO "hf:authenticated";
