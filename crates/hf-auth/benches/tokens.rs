//! Benchmarks of the per-request auth costs: verifying a token (every authenticated request),
//! issuing one (every login), and one argon2id password hash with the OWASP parameters.
//!
//! Run with `cargo bench -p hf-auth --bench tokens`.

#![expect(clippy::unwrap_used, reason = "a failing benchmark should stop loudly")]

use std::time::{Duration, SystemTime};

use criterion::{criterion_group, criterion_main, Criterion};
use hf_auth::keys::{KeySet, SigningKey};
use hf_auth::password::{hash_password, verify_password, PasswordParams};
use hf_auth::token::{self, Subject, DEFAULT_LEEWAY};

const ISSUER: &str = "https://hf.bench";
const TTL: Duration = Duration::from_secs(3600);

fn subject() -> Subject {
    Subject {
        sub: "3f1c2b9e-5d4a-4e8b-9c7d-1a2b3c4d5e6f".to_owned(),
        role: "alice".to_owned(),
        admin: false,
    }
}

fn tokens(c: &mut Criterion) {
    let keys = KeySet::new(SigningKey::generate().unwrap(), Vec::new());
    let now = SystemTime::now();
    let token = token::issue(keys.current(), ISSUER, &subject(), now, TTL).unwrap();
    c.bench_function("token verify", |b| {
        b.iter(|| token::verify(&token, &keys, ISSUER, now, DEFAULT_LEEWAY).unwrap())
    });
    c.bench_function("token issue", |b| {
        b.iter(|| token::issue(keys.current(), ISSUER, &subject(), now, TTL).unwrap())
    });
}

fn passwords(c: &mut Criterion) {
    let mut group = c.benchmark_group("password");
    group.sample_size(10);
    let params = PasswordParams::OWASP;
    group.bench_function("argon2id hash (m=19456,t=2,p=1)", |b| {
        b.iter(|| hash_password("correct horse battery staple", &params).unwrap())
    });
    let phc = hash_password("correct horse battery staple", &params).unwrap();
    group.bench_function("argon2id verify (m=19456,t=2,p=1)", |b| {
        b.iter(|| verify_password(&phc, "correct horse battery staple"))
    });
    group.finish();
}

criterion_group!(benches, tokens, passwords);
criterion_main!(benches);
