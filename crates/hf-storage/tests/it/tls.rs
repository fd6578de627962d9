//! TLS to the database with libpq's `sslmode` meanings, against the test server's own
//! certificate (`ssl_cert_file`; on Debian the "snakeoil" certificate, issued to `localhost`).

use hf_storage::{Pool, PoolSettings};
use hf_testkit::TestDb;

/// The test server's certificate file, or `None` when it does not offer TLS (the private
/// cluster the test kit falls back to has no certificate).
async fn server_certificate(db: &TestDb) -> Option<String> {
    let client = db.client().await;
    let ssl: String = client.query_one("SHOW ssl", &[]).await.unwrap().get(0);
    if ssl != "on" {
        eprintln!("the test server does not offer TLS; nothing to check");
        return None;
    }
    let file: String = client
        .query_one("SHOW ssl_cert_file", &[])
        .await
        .unwrap()
        .get(0);
    Some(file)
}

fn with_options(url: &str, options: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{options}")
}

fn pool(url: &str) -> Pool {
    hf_storage::connect(url, &PoolSettings::default()).unwrap()
}

/// Whether a connection made with `url` is encrypted; `Err` when it cannot be made.
async fn encrypted(url: &str) -> Result<bool, hf_storage::Error> {
    hf_storage::database_status(&pool(url))
        .await
        .map(|status| status.ssl.enabled)
}

#[tokio::test]
async fn modes_without_verification_encrypt_when_asked() {
    let db = TestDb::new().await;
    if server_certificate(&db).await.is_none() {
        return;
    }
    let url = db.url();
    assert!(!encrypted(&with_options(url, "sslmode=disable"))
        .await
        .unwrap());
    assert!(
        encrypted(url).await.unwrap(),
        "the default (prefer) encrypts when the server offers TLS, as libpq does"
    );
    assert!(encrypted(&with_options(url, "sslmode=prefer"))
        .await
        .unwrap());
    assert!(encrypted(&with_options(url, "sslmode=require"))
        .await
        .unwrap());
}

#[tokio::test]
async fn verification_checks_the_chain_and_the_host_name() {
    let db = TestDb::new().await;
    let Some(certificate) = server_certificate(&db).await else {
        return;
    };
    let by_address = db.url().to_owned();
    assert!(by_address.contains("@127.0.0.1:"), "{by_address}");
    let by_name = by_address.replace("@127.0.0.1:", "@localhost:");
    let root = format!("sslrootcert={certificate}");

    // The certificate names localhost: verify-full holds by name, not by address.
    assert!(encrypted(&with_options(
        &by_name,
        &format!("sslmode=verify-full&{root}")
    ))
    .await
    .unwrap());
    let error = encrypted(&with_options(
        &by_address,
        &format!("sslmode=verify-full&{root}"),
    ))
    .await
    .unwrap_err();
    assert!(
        format!("{error:?}").contains("NotValidForName"),
        "{error:?}"
    );
    // verify-ca, and require with a root certificate, check the chain only.
    for mode in ["verify-ca", "require"] {
        let url = with_options(&by_address, &format!("sslmode={mode}&{root}"));
        assert!(encrypted(&url).await.unwrap(), "{mode}");
    }
    // Roots that do not include the server's certificate (the public CAs) refuse it.
    let public_roots = "sslrootcert=/etc/ssl/certs/ca-certificates.crt";
    let error = encrypted(&with_options(
        &by_name,
        &format!("sslmode=verify-full&{public_roots}"),
    ))
    .await
    .unwrap_err();
    assert!(format!("{error:?}").contains("UnknownIssuer"), "{error:?}");
}

#[tokio::test]
async fn bad_tls_options_are_configuration_errors() {
    let db = TestDb::new().await;
    let cases = [
        "sslmode=verify-full&sslrootcert=/nonexistent/root.pem",
        "sslmode=sometimes",
        "sslmode=verify-ca&sslrootcert=/etc/hostname",
    ];
    for options in cases {
        let error = hf_storage::connect(&with_options(db.url(), options), &PoolSettings::default())
            .err()
            .unwrap_or_else(|| panic!("{options} was accepted"));
        assert!(
            matches!(error, hf_storage::Error::Config(_)),
            "{options}: {error:?}"
        );
    }
}
