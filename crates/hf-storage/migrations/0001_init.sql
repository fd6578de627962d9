-- The service's own state. Everything hf keeps for itself lives in the schema `hf`.

-- What the database reflects: the metadata commit last applied by the planner, and its tree.
CREATE TABLE hf.schema_state (
    singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    applied_branch text        NOT NULL,
    applied_commit text        NOT NULL,
    applied_tree   text        NOT NULL,
    applied_at     timestamptz NOT NULL DEFAULT now()
);
