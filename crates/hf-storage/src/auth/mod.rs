//! Authentication and IAM state in PostgreSQL: principals and their database roles, credentials,
//! signing keys, one-time secrets (setup tokens, session codes, SSH nonces) and login throttling.
//!
//! Everything lives in the database rather than in memory so that several instances of the service
//! behind a load balancer agree: a code issued by one instance is exchanged at another, a login
//! failure counted by one blocks at all. Expiry is always judged with the database's `now()`, so
//! instances with skewed clocks still agree.
//!
//! User problems (a taken name, the last admin, a used code) are returned as data — enums such as
//! [`CreatePrincipal`] — and `Err` means the database could not be used. The cryptography (hashes,
//! keys, signatures) is `hf-auth`'s; this module stores what it produces.

mod barrier;
mod credentials;
mod keys;
mod principal_cache;
mod principals;
mod roles;
mod secrets;
mod throttle;

use std::time::Duration;

pub use barrier::{
    Acknowledgements, PrincipalBarrier, ACKS_CHANNEL, BARRIER_SETUP_TIMEOUT, LISTENER_NAME_PREFIX,
};
pub use credentials::{
    attach_ssh_key, list_credentials, mark_credential_used, password_login, revoke_credential,
    ssh_login_keys, AttachSshKey, Credential, CredentialKind, PasswordLogin, RevokeCredential,
    SshLoginKey,
};
pub use keys::{ensure_signing_key, load_signing_keys, prune_signing_keys, rotate_signing_key};
pub use principal_cache::{PrincipalCache, LISTENER_APPLICATION_NAME, MAX_AGE, PRINCIPALS_CHANNEL};
pub use principals::{
    bootstrap_admin, create_principal, delete_principal, get_principal, get_principal_by_name,
    list_principals, set_admin, Bootstrap, CreatePrincipal, DeletePrincipal, Principal, SetAdmin,
    LOOKUP_SILENCE,
};
pub use roles::{ADMIN_ROLE, AUTHENTICATED_ROLE};
pub use secrets::{
    consume_session_code, consume_ssh_nonce, create_session_code, create_ssh_nonce,
    issue_reset_token, set_password_with_token, setup_token_is_valid,
};
pub use throttle::{login_blocked_for, record_login_failure, reset_login_failures, LoginThrottle};

/// Seconds of a duration as the `double precision` PostgreSQL multiplies `interval '1 second'` by.
fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}
