-- Authentication and IAM: signing keys, principals, credentials, one-time secrets, login throttling.
-- Every one-time secret is stored only as its SHA-256; expiry is judged with the database's now(),
-- so several instances with skewed clocks agree.

-- ES256 signing keys. The newest unretired key signs; retired keys stay until their tokens expire.
CREATE TABLE hf.signing_keys (
    kid         text        PRIMARY KEY,
    private_pem text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    retired_at  timestamptz
);
-- At most one current key, so two instances starting at once cannot both add a first key.
CREATE UNIQUE INDEX signing_keys_one_current ON hf.signing_keys ((true)) WHERE retired_at IS NULL;

-- A principal is a user of the service; `name` is also its PostgreSQL role (NOLOGIN).
CREATE TABLE hf.principals (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text        NOT NULL UNIQUE,
    sub        text        NOT NULL UNIQUE DEFAULT gen_random_uuid()::text,
    is_admin   boolean     NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX principals_admins ON hf.principals (id) WHERE is_admin;

-- How a principal logs in: one argon2id password hash, and any number of SSH public keys.
CREATE TABLE hf.credentials (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    principal_id  uuid        NOT NULL REFERENCES hf.principals (id) ON DELETE CASCADE,
    kind          text        NOT NULL CHECK (kind IN ('password', 'ssh')),
    password_hash text,
    public_key    text,
    fingerprint   text,
    comment       text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    CHECK ((kind = 'password') = (password_hash IS NOT NULL)),
    CHECK ((kind = 'ssh') = (public_key IS NOT NULL AND fingerprint IS NOT NULL))
);
CREATE UNIQUE INDEX credentials_one_password ON hf.credentials (principal_id) WHERE kind = 'password';
CREATE UNIQUE INDEX credentials_ssh_key ON hf.credentials (principal_id, fingerprint) WHERE kind = 'ssh';

-- Setup and reset tokens: set a password once, then gone.
CREATE TABLE hf.setup_tokens (
    token_hash   bytea       PRIMARY KEY,
    principal_id uuid        NOT NULL REFERENCES hf.principals (id) ON DELETE CASCADE,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX setup_tokens_expiry ON hf.setup_tokens (expires_at);
CREATE INDEX setup_tokens_principal ON hf.setup_tokens (principal_id);

-- One-time codes that a browser exchanges for the session cookie.
CREATE TABLE hf.session_codes (
    code_hash    bytea       PRIMARY KEY,
    principal_id uuid        NOT NULL REFERENCES hf.principals (id) ON DELETE CASCADE,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX session_codes_expiry ON hf.session_codes (expires_at);

-- SSH login nonces, bound to the username they were issued for (which may not exist).
CREATE TABLE hf.ssh_nonces (
    nonce_hash bytea       PRIMARY KEY,
    username   text        NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX ssh_nonces_expiry ON hf.ssh_nonces (expires_at);

-- Failed logins per username and per client address, in fixed windows starting at the first
-- failure. Kept here rather than in memory so every instance sees the same counts.
CREATE TABLE hf.login_failures (
    scope        text        NOT NULL CHECK (scope IN ('user', 'address')),
    key          text        NOT NULL,
    failures     integer     NOT NULL,
    window_start timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX login_failures_window ON hf.login_failures (window_start);

-- The group roles every principal's role joins. Roles belong to the whole cluster, not to this
-- database, so another database's migration may create them at the same moment: both outcomes of
-- that race (duplicate_object, unique_violation) mean "it exists now".
DO $$
BEGIN
    CREATE ROLE "hf:authenticated" NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;
DO $$
BEGIN
    CREATE ROLE "hf:admin" NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;
