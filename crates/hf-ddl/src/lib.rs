//! The DDL planner: metadata to PostgreSQL, as an ordered plan.
