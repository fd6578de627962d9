-- Every change to a principal is announced on channel `hf_principals`, so each instance's
-- in-process principal cache (hf_storage::auth::PrincipalCache) forgets it. PostgreSQL sends a
-- notification only when its transaction commits, and each row's payload is its `sub`.
-- TRUNCATE announces '*' (forget everything). A trigger rather than calls in the Rust code, so a
-- change made by any tool (the CLI, psql, a restore) is announced too.
CREATE FUNCTION hf.announce_principal_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('hf_principals', '*');
    ELSE
        PERFORM pg_notify('hf_principals', OLD.sub);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER principals_announce_row
    AFTER UPDATE OR DELETE ON hf.principals
    FOR EACH ROW EXECUTE FUNCTION hf.announce_principal_change();

CREATE TRIGGER principals_announce_truncate
    AFTER TRUNCATE ON hf.principals
    FOR EACH STATEMENT EXECUTE FUNCTION hf.announce_principal_change();
