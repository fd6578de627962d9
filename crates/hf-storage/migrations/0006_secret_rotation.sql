-- Shared secrets rotate. Each name keeps generations: the newest signs; the one it replaced
-- still verifies until `verify_until` (the grace period given when rotating, so what it signed
-- just before keeps working on every instance); older ones are deleted by the rotation. The
-- existing secret of each name becomes its generation 1.
ALTER TABLE hf.server_secrets
    ADD COLUMN generation   integer NOT NULL DEFAULT 1 CHECK (generation >= 1),
    ADD COLUMN created_at   timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN verify_until timestamptz;
ALTER TABLE hf.server_secrets ALTER COLUMN generation DROP DEFAULT;
ALTER TABLE hf.server_secrets DROP CONSTRAINT server_secrets_pkey;
ALTER TABLE hf.server_secrets ADD PRIMARY KEY (name, generation);
