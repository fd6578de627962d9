//! PostgreSQL: the pool, the embedded cluster, the service's own schema.
