//! Unit tests for the private parts of `password`: the dummy hash must cost what a real one does.

use argon2::password_hash::PasswordHash;

use super::{PasswordParams, DUMMY_PHC, OUTPUT_BYTES, SALT_BYTES};

#[test]
fn dummy_hash_has_the_same_cost_and_shape_as_real_hashes() {
    let hash = PasswordHash::new(DUMMY_PHC).unwrap();
    assert_eq!(hash.algorithm, argon2::ARGON2ID_IDENT);
    let params = argon2::Params::try_from(&hash).unwrap();
    let owasp = PasswordParams::OWASP;
    assert_eq!(params.m_cost(), owasp.memory_kib);
    assert_eq!(params.t_cost(), owasp.iterations);
    assert_eq!(params.p_cost(), owasp.parallelism);
    assert_eq!(hash.hash.unwrap().len(), OUTPUT_BYTES);
    let mut salt = [0u8; 64];
    assert_eq!(
        hash.salt.unwrap().decode_b64(&mut salt).unwrap().len(),
        SALT_BYTES
    );
}
