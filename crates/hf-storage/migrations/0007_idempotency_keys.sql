-- Idempotency keys of record creates. A client that sends `Idempotency-Key` with a create and
-- gets no answer (or `COMMIT_OUTCOME_UNKNOWN`) sends the same request again with the same key;
-- if the first one committed, the key is here, in the same transaction as the record, and the
-- repeat is answered with that record instead of creating a second one. Keys belong to their
-- principal and are kept 24 hours.
CREATE TABLE hf.idempotency_keys (
    principal_id uuid        NOT NULL,
    key          text        NOT NULL,
    -- SHA-256 (hex) of the object and the request body: the same key with another request is
    -- refused.
    fingerprint  text        NOT NULL,
    record_id    uuid        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal_id, key)
);
CREATE INDEX idempotency_keys_created_at ON hf.idempotency_keys (created_at);
REVOKE ALL ON hf.idempotency_keys FROM PUBLIC;

-- What a caller's role may run of the service's own: only this function. The key is stored by
-- the create's own transaction, which runs as the caller's role; the function runs as the
-- service's role, writes only the calling principal's key (the session's `hf.caller_id`, which
-- the service sets), and first removes that key if it expired.
CREATE SCHEMA hf_caller;
REVOKE ALL ON SCHEMA hf_caller FROM PUBLIC;
CREATE FUNCTION hf_caller.remember_idempotency_key(p_key text, p_fingerprint text, p_record_id uuid)
RETURNS void
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM hf.idempotency_keys
     WHERE principal_id = nullif(current_setting('hf.caller_id', true), '')::uuid
       AND key = p_key
       AND created_at < now() - interval '24 hours';
    INSERT INTO hf.idempotency_keys (principal_id, key, fingerprint, record_id)
    VALUES (nullif(current_setting('hf.caller_id', true), '')::uuid, p_key, p_fingerprint, p_record_id);
$$;
REVOKE ALL ON FUNCTION hf_caller.remember_idempotency_key(text, text, uuid) FROM PUBLIC;
GRANT USAGE ON SCHEMA hf_caller TO "hf:authenticated";
GRANT EXECUTE ON FUNCTION hf_caller.remember_idempotency_key(text, text, uuid) TO "hf:authenticated";
