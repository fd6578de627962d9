//! Reading and writing records as a principal: the `/data/{module}/{object}` routes are these
//! use cases.
//!
//! Each runs against the live branch's snapshot (resolved inline: a ref and a commit read, and
//! the model parsed once per tree) with the statement plans of the application's
//! [`PlanCache`](hf_storage::records::PlanCache), as the principal's role; what a write refuses
//! comes back as problems ([`Outcome::Rejected`]), not as an error. A request that finds the
//! data pool's wait full is refused at once (see [`crate::shed`]).

use hf_metastore::Snapshot;
use hf_storage::auth::Principal;
use hf_storage::records::{
    self, Body, Caller, Created, IdempotencyKey, ObjectRef, Outcome, Record, Upserted,
};

use crate::{App, Result};

impl App {
    /// Reads one record by id.
    pub async fn read_record(
        &self,
        principal: &Principal,
        object: ObjectRef<'_>,
        id: &str,
    ) -> Result<Outcome<Record>> {
        crate::shed::refuse_if_data_pool_backed_up(self.pool())?;
        let snapshot = self.live_snapshot()?;
        let caller = self.records_caller(principal, &snapshot);
        Ok(records::read(caller, object, id).await?)
    }

    /// Creates a record from a body of field values; with an idempotency key, a create already
    /// made with the same key and request is answered with its record instead.
    pub async fn create_record(
        &self,
        principal: &Principal,
        object: ObjectRef<'_>,
        body: &Body,
        key: Option<&IdempotencyKey>,
    ) -> Result<Outcome<Created>> {
        crate::shed::refuse_if_data_pool_backed_up(self.pool())?;
        let snapshot = self.live_snapshot()?;
        let caller = self.records_caller(principal, &snapshot);
        Ok(records::create(caller, object, body, key).await?)
    }

    /// Changes the fields a body gives of a record; `if_match` holds the versions the caller
    /// accepts (`None`: any).
    pub async fn update_record(
        &self,
        principal: &Principal,
        object: ObjectRef<'_>,
        id: &str,
        body: &Body,
        if_match: Option<&[String]>,
    ) -> Result<Outcome<Record>> {
        crate::shed::refuse_if_data_pool_backed_up(self.pool())?;
        let snapshot = self.live_snapshot()?;
        let caller = self.records_caller(principal, &snapshot);
        Ok(records::update(caller, object, id, body, if_match).await?)
    }

    /// Creates or updates the record whose unique field `field` has the body's value.
    pub async fn upsert_record(
        &self,
        principal: &Principal,
        object: ObjectRef<'_>,
        field: &str,
        body: &Body,
        if_match: Option<&[String]>,
    ) -> Result<Outcome<Upserted>> {
        crate::shed::refuse_if_data_pool_backed_up(self.pool())?;
        let snapshot = self.live_snapshot()?;
        let caller = self.records_caller(principal, &snapshot);
        Ok(records::upsert(caller, object, field, body, if_match).await?)
    }

    /// Deletes a record by id.
    pub async fn delete_record(
        &self,
        principal: &Principal,
        object: ObjectRef<'_>,
        id: &str,
        if_match: Option<&[String]>,
    ) -> Result<Outcome<()>> {
        crate::shed::refuse_if_data_pool_backed_up(self.pool())?;
        let snapshot = self.live_snapshot()?;
        let caller = self.records_caller(principal, &snapshot);
        Ok(records::delete(caller, object, id, if_match).await?)
    }

    /// The live branch's snapshot, resolved inline: a hop to the blocking pool would cost more
    /// than the read.
    fn live_snapshot(&self) -> Result<std::sync::Arc<Snapshot>> {
        Ok(self.store().live()?)
    }

    fn records_caller<'a>(
        &'a self,
        principal: &'a Principal,
        snapshot: &'a Snapshot,
    ) -> Caller<'a> {
        Caller {
            pool: self.pool(),
            role: &principal.name,
            principal_id: principal.id,
            snapshot,
            plans: &self.inner.plans,
        }
    }
}
