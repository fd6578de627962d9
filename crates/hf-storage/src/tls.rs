//! TLS for database connections, with the `sslmode` meanings of libpq (and so of `psql`).
//!
//! tokio-postgres understands only `sslmode=disable|prefer|require` and has no notion of a root
//! certificate, so hf takes `sslmode` and `sslrootcert` out of the database URL itself, passes
//! the rest on, and builds the rustls connector that gives each mode its libpq meaning:
//!
//! | `sslmode`          | encrypted                    | server certificate checked                   |
//! |--------------------|------------------------------|----------------------------------------------|
//! | `disable`          | never                        | —                                            |
//! | `allow`, `prefer` (default) | when the server offers it | no                                  |
//! | `require`          | always                       | no; its chain when `sslrootcert` is given    |
//! | `verify-ca`        | always                       | its chain                                    |
//! | `verify-full`      | always                       | its chain and that it names the host         |
//!
//! Chains are checked against `sslrootcert`, a PEM file. As in libpq 16, `sslrootcert=system`
//! means the system's roots and implies `verify-full`, the only mode it allows, since the public
//! roots vouch for every site; `verify-full` without `sslrootcert` uses the system's roots too,
//! and `verify-ca` without it is refused. Connections over a Unix socket (the embedded cluster)
//! never use TLS. With SCRAM authentication the connector also offers channel binding.
//!
//! Stricter than libpq, because rustls/webpki are: a certificate must carry its host name as a
//! subjectAltName (the common name is not read), and a self-signed server certificate used as
//! its own root must not be a CA certificate (`CA:FALSE`, as Debian's "snakeoil" one is).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::{Error, Result};

/// The TLS connector every database connection of the service is made with.
pub type Tls = MakeRustlsConnect;

/// How strictly the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verification {
    /// Encrypt, but accept any certificate (libpq's `prefer` and `require`).
    None,
    /// The certificate must chain to a trusted root; its names are not checked.
    Chain,
    /// The certificate must chain to a trusted root and name the host.
    Full,
}

/// Parses a PostgreSQL URL (or key=value string) with libpq's TLS options; returns the
/// tokio-postgres configuration and the connector to use with it.
pub fn parse(database_url: &str) -> Result<(tokio_postgres::Config, Tls)> {
    let options = TlsOptions::take_from(database_url)?;
    let mut config: tokio_postgres::Config = options
        .rest
        .parse()
        .map_err(|error: tokio_postgres::Error| Error::Config(error.to_string()))?;
    let system_roots = options.root_cert.as_deref() == Some("system");
    let verification = match options.mode.as_deref() {
        // libpq 16: `sslrootcert=system` makes `verify-full` the default, and the only mode.
        None | Some("verify-full") if system_roots => {
            config.ssl_mode(SslMode::Require);
            Verification::Full
        }
        Some(mode) if system_roots => {
            return Err(Error::Config(format!(
                "sslrootcert=system needs sslmode=verify-full, not {mode}: the public roots vouch \
                 for every site, so only a certificate that also names the host proves anything"
            )))
        }
        None => Verification::None,
        Some("disable") => {
            config.ssl_mode(SslMode::Disable);
            Verification::None
        }
        // libpq's `allow` tries without TLS first; here it behaves as `prefer`.
        Some("allow" | "prefer") => {
            config.ssl_mode(SslMode::Prefer);
            Verification::None
        }
        Some("require") => {
            config.ssl_mode(SslMode::Require);
            if options.root_cert.is_some() {
                Verification::Chain
            } else {
                Verification::None
            }
        }
        Some("verify-ca") if options.root_cert.is_none() => {
            return Err(Error::Config(
                "sslmode=verify-ca needs sslrootcert=<PEM file>: checking only the chain against \
                 the public roots would accept any site's certificate"
                    .to_owned(),
            ))
        }
        Some("verify-ca") => {
            config.ssl_mode(SslMode::Require);
            Verification::Chain
        }
        Some("verify-full") => {
            config.ssl_mode(SslMode::Require);
            Verification::Full
        }
        Some(other) => {
            return Err(Error::Config(format!(
                "sslmode `{other}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
            )))
        }
    };
    let tls = connector(verification, options.root_cert.as_deref())?;
    Ok((config, tls))
}

fn connector(verification: Verification, root_cert: Option<&str>) -> Result<Tls> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = match verification {
        Verification::None => None,
        Verification::Chain | Verification::Full => Some(
            WebPkiServerVerifier::builder_with_provider(
                Arc::new(root_store(root_cert)?),
                Arc::clone(&provider),
            )
            .build()
            .map_err(|error| Error::Config(format!("TLS roots: {error}")))?,
        ),
    };
    let verifier = LibpqVerifier {
        chain,
        check_name: verification == Verification::Full,
        provider: Arc::clone(&provider),
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::Config(format!("TLS: {error}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The trusted roots: the PEM file `sslrootcert` names, or the system's.
fn root_store(root_cert: Option<&str>) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match root_cert {
        Some(path) if path != "system" => {
            let certificates = CertificateDer::pem_file_iter(path)
                .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
                .map_err(|error| Error::Config(format!("sslrootcert {path}: {error}")))?;
            let (added, _ignored) = roots.add_parsable_certificates(certificates);
            if added == 0 {
                return Err(Error::Config(format!(
                    "sslrootcert {path}: no certificate in the file"
                )));
            }
        }
        _ => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(Error::Config(
                    "no system root certificates found; give sslrootcert=<PEM file>".to_owned(),
                ));
            }
        }
    }
    Ok(roots)
}

/// Checks the server's certificate as the `sslmode` asks: not at all (`prefer`, `require`:
/// encrypted against eavesdropping, not authenticated), its chain only (`verify-ca`), or its
/// chain and host name (`verify-full`). The handshake's own signatures are always checked, so
/// the session keys belong to whoever holds the certificate's key.
#[derive(Debug)]
struct LibpqVerifier {
    /// The chain verifier; `None` when certificates are not checked.
    chain: Option<Arc<WebPkiServerVerifier>>,
    /// Whether the certificate must name the host.
    check_name: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for LibpqVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A database URL split into the TLS options hf handles and the rest, for tokio-postgres.
#[derive(Debug, PartialEq, Eq)]
struct TlsOptions {
    mode: Option<String>,
    root_cert: Option<String>,
    rest: String,
}

impl TlsOptions {
    fn take_from(url: &str) -> Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Self::take_from_url(url)
        } else {
            Self::take_from_key_values(url)
        }
    }

    /// URL form: options are query parameters, percent-encoded.
    fn take_from_url(url: &str) -> Result<Self> {
        let mut options = TlsOptions {
            mode: None,
            root_cert: None,
            rest: String::new(),
        };
        // The query starts at the first `?` after the user and password, which end at the
        // authority's last `@` (as tokio-postgres and libpq read them).
        let after_scheme = url.find("://").map_or(0, |index| index + 3);
        let authority_end = url[after_scheme..]
            .find('/')
            .map_or(url.len(), |index| after_scheme + index);
        let host_start = url[after_scheme..authority_end]
            .rfind('@')
            .map_or(after_scheme, |index| after_scheme + index + 1);
        let Some(query_start) = url[host_start..].find('?').map(|index| host_start + index) else {
            options.rest = url.to_owned();
            return Ok(options);
        };
        let (base, query) = (&url[..query_start], &url[query_start + 1..]);
        let decode = |text: &str| {
            percent_encoding::percent_decode_str(text)
                .decode_utf8()
                .map(|text| text.into_owned())
                .map_err(|_| Error::Config(format!("`{text}` is not UTF-8 once decoded")))
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match decode(key)?.as_str() {
                "sslmode" => options.mode = Some(decode(value)?),
                "sslrootcert" => options.root_cert = Some(decode(value)?),
                _ => kept.push(pair),
            }
        }
        options.rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Ok(options)
    }

    /// key=value form: `key=value` pairs separated by spaces; a value may be single-quoted, and
    /// a backslash escapes the next character (libpq's rules, which tokio-postgres follows).
    fn take_from_key_values(text: &str) -> Result<Self> {
        let mut options = TlsOptions {
            mode: None,
            root_cert: None,
            rest: String::new(),
        };
        let mut kept: Vec<&str> = Vec::new();
        let mut rest = text;
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let (key, value, consumed) = key_value(rest)?;
            match key {
                "sslmode" => options.mode = Some(value),
                "sslrootcert" => options.root_cert = Some(value),
                _ => kept.push(&rest[..consumed]),
            }
            rest = &rest[consumed..];
        }
        options.rest = kept.join(" ");
        Ok(options)
    }
}

/// Reads one `key = value` at the start of `text`: the key, the unescaped value and how many
/// bytes it took.
fn key_value(text: &str) -> Result<(&str, String, usize)> {
    let malformed = || Error::Config("malformed key=value connection string".to_owned());
    let key_end = text
        .find(|c: char| c == '=' || c.is_whitespace())
        .unwrap_or(text.len());
    let key = &text[..key_end];
    let after_key = &text[key_end..];
    let after_equals = after_key
        .trim_start()
        .strip_prefix('=')
        .ok_or_else(malformed)?;
    let value_text = after_equals.trim_start();
    let value_start = text.len() - value_text.len();
    let mut value = String::new();
    let mut chars = value_text.char_indices();
    let quoted = value_text.starts_with('\'');
    if quoted {
        chars.next();
    }
    let mut end = value_text.len();
    let mut closed = !quoted;
    while let Some((index, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, escaped) = chars.next().ok_or_else(malformed)?;
                value.push(escaped);
            }
            '\'' if quoted => {
                end = index + 1;
                closed = true;
                break;
            }
            c if !quoted && c.is_whitespace() => {
                end = index;
                break;
            }
            c => value.push(c),
        }
    }
    if !closed || key.is_empty() {
        return Err(malformed());
    }
    Ok((key, value, value_start + end))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;

    fn split(url: &str) -> (Option<String>, Option<String>, String) {
        let options = TlsOptions::take_from(url).unwrap();
        (options.mode, options.root_cert, options.rest)
    }

    #[test]
    fn url_options_are_taken_out_and_decoded() {
        assert_eq!(
            split("postgres://u@h:5432/db?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca%20file.pem"),
            (
                Some("verify-full".into()),
                Some("/etc/ca file.pem".into()),
                "postgres://u@h:5432/db?application_name=x".into()
            )
        );
        assert_eq!(
            split("postgresql://u@h/db?sslmode=require"),
            (Some("require".into()), None, "postgresql://u@h/db".into())
        );
        assert_eq!(
            split("postgres://u@h/db"),
            (None, None, "postgres://u@h/db".into())
        );
        // A `?` inside the password is not the query; encoded keys are recognised.
        assert_eq!(
            split("postgres://u:p?x@h/db?ssl%6Dode=verify-full&sslrootcert=/ca.pem"),
            (
                Some("verify-full".into()),
                Some("/ca.pem".into()),
                "postgres://u:p?x@h/db".into()
            )
        );
        assert_eq!(
            split("postgres://u:p?x@h?sslmode=require"),
            (Some("require".into()), None, "postgres://u:p?x@h".into())
        );
    }

    #[test]
    fn key_value_options_are_taken_out_with_quotes_and_escapes() {
        assert_eq!(
            split("host=h  sslmode = verify-ca dbname='my db' sslrootcert='/a b/it\\'s.pem' user=u\\ x"),
            (
                Some("verify-ca".into()),
                Some("/a b/it's.pem".into()),
                "host=h dbname='my db' user=u\\ x".into()
            )
        );
        assert_eq!(split(""), (None, None, String::new()));
    }

    #[test]
    fn malformed_key_values_are_refused() {
        for text in ["host", "host=h sslmode='open", "=x", "sslrootcert=a\\"] {
            assert!(TlsOptions::take_from(text).is_err(), "{text}");
        }
    }

    #[test]
    fn unknown_and_unsafe_modes_are_refused() {
        let cases = [
            ("sslmode=allow-anything", "allow-anything"),
            ("sslmode=verify-ca", "needs sslrootcert"),
            (
                "sslmode=require&sslrootcert=system",
                "needs sslmode=verify-full",
            ),
            (
                "sslmode=verify-ca&sslrootcert=system",
                "needs sslmode=verify-full",
            ),
        ];
        for (options, expected) in cases {
            let Err(error) = parse(&format!("postgres://u@h/db?{options}")) else {
                panic!("{options} was accepted");
            };
            assert!(error.to_string().contains(expected), "{options}: {error}");
        }
        for options in [
            "sslrootcert=system",
            "sslmode=verify-full&sslrootcert=system",
        ] {
            let parsed = parse(&format!("postgres://u@h/db?{options}"));
            let Ok((config, _)) = parsed else {
                panic!("{options} was refused");
            };
            assert_eq!(config.get_ssl_mode(), SslMode::Require, "{options}");
        }
    }
}
