-- Secrets every instance of the service shares, by name: several `hf serve` processes on one
-- database must agree on them (a paging cursor signed by one instance is checked by another).
-- Each is random bytes the service generates and inserts once (`ON CONFLICT DO NOTHING`, so two
-- instances starting together keep the first one); no one but the service's own role reads them.
CREATE TABLE hf.server_secrets (
    name   text PRIMARY KEY,
    secret bytea NOT NULL CHECK (octet_length(secret) >= 32)
);
REVOKE ALL ON hf.server_secrets FROM PUBLIC;
