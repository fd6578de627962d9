-- The metadata repository in the database: every git object of every branch, and the branch
-- heads. Several instances of the service share these tables; each keeps a repository on disk only
-- as a cache of objects (hf_metastore::Store::open_shared, hf_storage::metadata).

-- Git objects, content without git's "<kind> <size>\0" header; `kind` is git's type number
-- (1 commit, 2 tree, 3 blob, 4 tag) and `id` the SHA-1 of the two, checked by every reader.
CREATE TABLE hf.metadata_objects (
    id   bytea    PRIMARY KEY CHECK (length(id) = 20),
    kind smallint NOT NULL CHECK (kind BETWEEN 1 AND 4),
    data bytea    NOT NULL
);

-- Increases with every move of any branch, so an instance that hears of two moves late and out
-- of order keeps the newer one (and a branch deleted and created again still counts as newer).
CREATE SEQUENCE hf.metadata_ref_version;

-- Branch heads. A move is a compare-and-swap: UPDATE ... WHERE head = <the head the writer read>.
CREATE TABLE hf.metadata_refs (
    branch     text        PRIMARY KEY,
    head       bytea       NOT NULL REFERENCES hf.metadata_objects (id),
    version    bigint      NOT NULL DEFAULT nextval('hf.metadata_ref_version'),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Every move is announced on channel `hf_metadata` as "<version> <branch> <head hex>" (a
-- deletion as "<version> <branch> -"), delivered when the moving transaction commits, whoever
-- made it; each instance listens and keeps the heads in memory.
CREATE FUNCTION hf.announce_metadata_ref() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog
AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('hf_metadata',
            nextval('hf.metadata_ref_version')::text || ' ' || OLD.branch || ' -');
    ELSE
        PERFORM pg_notify('hf_metadata',
            NEW.version::text || ' ' || NEW.branch || ' ' || encode(NEW.head, 'hex'));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER metadata_refs_announce
    AFTER INSERT OR UPDATE OR DELETE ON hf.metadata_refs
    FOR EACH ROW EXECUTE FUNCTION hf.announce_metadata_ref();
