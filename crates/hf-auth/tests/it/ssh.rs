//! SSH public keys and signatures, with keys and signatures made by the real `ssh-keygen`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hf_auth::ssh::{verify_ssh_signature, SshKeyAlgorithm, SshPublicKey, SSH_NAMESPACE};
use hf_auth::{Error, ErrorKind};
use tempfile::TempDir;

const NONCE: &[u8] = b"q7Xw3vJ0c8kz1R4mYpT9bL2nF6hD5sA0eG1iK3oU8wE";

/// Runs `ssh-keygen` and fails the test with its output when it fails.
fn ssh_keygen(args: &[&str]) -> String {
    let output = Command::new("ssh-keygen")
        .args(args)
        .output()
        .expect("ssh-keygen must be installed");
    assert!(
        output.status.success(),
        "ssh-keygen {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Generates a key pair `dir/name` with comment `name@hf.test`; returns the private key's path.
fn keygen(dir: &Path, name: &str, type_args: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let comment = format!("{name}@hf.test");
    let mut args = vec!["-q", "-N", "", "-C", &comment, "-f", path.to_str().unwrap()];
    args.extend_from_slice(type_args);
    ssh_keygen(&args);
    path
}

fn public_line(key: &Path) -> String {
    std::fs::read_to_string(key.with_extension("pub")).unwrap()
}

/// Signs `message` like a user would: `ssh-keygen -Y sign -n NAMESPACE -f KEY FILE`.
fn sign(key: &Path, namespace: &str, message: &[u8]) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let number = COUNTER.fetch_add(1, Ordering::Relaxed);
    let file = PathBuf::from(format!("{}.{number}.msg", key.display()));
    std::fs::write(&file, message).unwrap();
    ssh_keygen(&[
        "-Y",
        "sign",
        "-n",
        namespace,
        "-f",
        key.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    std::fs::read_to_string(format!("{}.sig", file.display())).unwrap()
}

/// The fingerprint `ssh-keygen -l -E sha256` prints for a public key file.
fn keygen_fingerprint(key: &Path) -> String {
    let listing = ssh_keygen(&[
        "-l",
        "-E",
        "sha256",
        "-f",
        key.with_extension("pub").to_str().unwrap(),
    ]);
    listing.split_whitespace().nth(1).unwrap().to_owned()
}

/// The key types hf accepts: a file name, the `ssh-keygen` type arguments, the parsed algorithm.
const ACCEPTED: [(&str, &[&str], SshKeyAlgorithm); 3] = [
    ("ed25519", &["-t", "ed25519"], SshKeyAlgorithm::Ed25519),
    (
        "ecdsa256",
        &["-t", "ecdsa", "-b", "256"],
        SshKeyAlgorithm::EcdsaP256,
    ),
    (
        "rsa2048",
        &["-t", "rsa", "-b", "2048"],
        SshKeyAlgorithm::Rsa { bits: 2048 },
    ),
];

#[test]
fn accepted_key_types_parse_like_ssh_keygen_sees_them() {
    let dir = TempDir::new().unwrap();
    for (name, args, algorithm) in ACCEPTED {
        let key = keygen(dir.path(), name, args);
        let line = public_line(&key);
        let parsed = SshPublicKey::parse(&line).unwrap();
        assert_eq!(parsed.algorithm(), algorithm, "{name}");
        assert!(line.starts_with(parsed.algorithm().as_str()));
        assert_eq!(parsed.fingerprint(), keygen_fingerprint(&key), "{name}");
        assert_eq!(parsed.comment(), Some(format!("{name}@hf.test").as_str()));
        assert_eq!(
            parsed.to_openssh(),
            line.trim_end(),
            "canonical form of a canonical line"
        );
    }
}

#[test]
fn accepted_key_types_verify_ssh_keygen_signatures() {
    let dir = TempDir::new().unwrap();
    for (name, args, _) in ACCEPTED {
        let key = keygen(dir.path(), name, args);
        let parsed = SshPublicKey::parse(&public_line(&key)).unwrap();
        let signature = sign(&key, SSH_NAMESPACE, NONCE);
        verify_ssh_signature(&parsed, SSH_NAMESPACE, NONCE, &signature)
            .unwrap_or_else(|err| panic!("{name}: {err:?}"));
    }
}

#[test]
fn rsa_signatures_use_sha2_512_and_verify() {
    let dir = TempDir::new().unwrap();
    let key = keygen(dir.path(), "rsa", &["-t", "rsa", "-b", "2048"]);
    let signature = sign(&key, SSH_NAMESPACE, NONCE);
    let parsed_signature = ssh_key::SshSig::from_pem(&signature).unwrap();
    assert_eq!(
        parsed_signature.signature().algorithm(),
        ssh_key::Algorithm::Rsa {
            hash: Some(ssh_key::HashAlg::Sha512)
        },
        "ssh-keygen signs with rsa-sha2-512"
    );
    let parsed = SshPublicKey::parse(&public_line(&key)).unwrap();
    assert!(verify_ssh_signature(&parsed, SSH_NAMESPACE, NONCE, &signature).is_ok());
}

/// Asserts the error is a signature refusal and returns it for a closer look.
fn refused(result: Result<(), Error>) -> Error {
    let err = result.expect_err("the signature must be refused");
    assert_eq!(err.kind(), ErrorKind::InvalidSignature, "{err:?}");
    err
}

#[test]
fn wrong_namespace_is_refused() {
    let dir = TempDir::new().unwrap();
    for (name, args, _) in ACCEPTED {
        let key = keygen(dir.path(), name, args);
        let parsed = SshPublicKey::parse(&public_line(&key)).unwrap();
        let signature = sign(&key, "git", NONCE);
        let err = refused(verify_ssh_signature(
            &parsed,
            SSH_NAMESPACE,
            NONCE,
            &signature,
        ));
        assert!(
            matches!(&err, Error::WrongNamespace { expected, found } if expected == "hf-auth" && found == "git"),
            "{name}: {err:?}"
        );
    }
}

#[test]
fn wrong_message_is_refused() {
    let dir = TempDir::new().unwrap();
    for (name, args, _) in ACCEPTED {
        let key = keygen(dir.path(), name, args);
        let parsed = SshPublicKey::parse(&public_line(&key)).unwrap();
        let signature = sign(&key, SSH_NAMESPACE, NONCE);
        let mut with_newline = NONCE.to_vec();
        with_newline.push(b'\n');
        for other in [&b"another nonce"[..], &NONCE[1..], &with_newline, b""] {
            let err = refused(verify_ssh_signature(
                &parsed,
                SSH_NAMESPACE,
                other,
                &signature,
            ));
            assert!(matches!(err, Error::BadSshSignature(_)), "{name}: {err:?}");
        }
    }
}

#[test]
fn signature_by_another_key_is_refused() {
    let dir = TempDir::new().unwrap();
    let mut keys = Vec::new();
    for (name, args, _) in ACCEPTED {
        keys.push(keygen(dir.path(), name, args));
        keys.push(keygen(dir.path(), &format!("{name}-other"), args));
    }
    let signatures: Vec<String> = keys
        .iter()
        .map(|key| sign(key, SSH_NAMESPACE, NONCE))
        .collect();
    for (registered_index, registered) in keys.iter().enumerate() {
        let parsed = SshPublicKey::parse(&public_line(registered)).unwrap();
        for (signer_index, signer) in keys
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != registered_index)
        {
            let signature = &signatures[signer_index];
            let err = refused(verify_ssh_signature(
                &parsed,
                SSH_NAMESPACE,
                NONCE,
                signature,
            ));
            assert!(
                matches!(err, Error::SignatureKeyMismatch),
                "{registered:?} / {signer:?}: {err:?}"
            );
        }
    }
}

#[test]
fn small_and_unsupported_keys_are_refused() {
    let dir = TempDir::new().unwrap();
    let rsa1024 = keygen(dir.path(), "rsa1024", &["-t", "rsa", "-b", "1024"]);
    let err = SshPublicKey::parse(&public_line(&rsa1024)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::RsaKeyTooSmall {
                bits: 1024,
                min: 2048
            }
        ),
        "{err:?}"
    );

    let rsa_big = keygen(dir.path(), "rsa4200", &["-t", "rsa", "-b", "4200"]);
    let err = SshPublicKey::parse(&public_line(&rsa_big)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::RsaKeyTooLarge {
                bits: 4200,
                max: 4096
            }
        ),
        "{err:?}"
    );

    for (name, args, algorithm) in [
        (
            "ecdsa384",
            &["-t", "ecdsa", "-b", "384"][..],
            "ecdsa-sha2-nistp384",
        ),
        (
            "ecdsa521",
            &["-t", "ecdsa", "-b", "521"][..],
            "ecdsa-sha2-nistp521",
        ),
        ("dsa", &["-t", "dsa"][..], "ssh-dss"),
    ] {
        let key = keygen(dir.path(), name, args);
        let err = SshPublicKey::parse(&public_line(&key)).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedKeyAlgorithm { algorithm: found } if found == algorithm),
            "{name}: {err:?}"
        );
        assert_eq!(err.kind(), ErrorKind::InvalidPublicKey);
    }
}

/// An SSH wire-format string: u32 length, then the bytes.
fn ssh_string(bytes: &[u8]) -> Vec<u8> {
    let mut out = (bytes.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

#[test]
fn security_key_types_are_refused() {
    let algorithm = "sk-ssh-ed25519@openssh.com";
    let blob = [
        ssh_string(algorithm.as_bytes()),
        ssh_string(&[9u8; 32]),
        ssh_string(b"ssh:"),
    ]
    .concat();
    let line = format!("{algorithm} {} me@hf.test", STANDARD.encode(blob));
    let err = SshPublicKey::parse(&line).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidPublicKey, "{err:?}");
}

#[test]
fn surrounding_whitespace_is_ignored_and_comments_are_optional() {
    let dir = TempDir::new().unwrap();
    let key = keygen(dir.path(), "ed", &["-t", "ed25519"]);
    let line = public_line(&key);
    let padded = format!("  {}\n\n", line.trim());
    assert_eq!(
        SshPublicKey::parse(&padded).unwrap().to_openssh(),
        line.trim()
    );
    let bare: Vec<&str> = line.split_whitespace().take(2).collect();
    let bare = bare.join(" ");
    let parsed = SshPublicKey::parse(&bare).unwrap();
    assert_eq!(parsed.comment(), None);
    assert_eq!(parsed.to_openssh(), bare);
}

#[test]
fn malformed_public_keys_are_refused_without_panicking() {
    let dir = TempDir::new().unwrap();
    let key = keygen(dir.path(), "ed", &["-t", "ed25519"]);
    let line = public_line(&key).trim().to_owned();
    let fields: Vec<&str> = line.split_whitespace().collect();
    let body = fields[1];
    let private_key = std::fs::read_to_string(&key).unwrap();
    let cases = [
        String::new(),
        "ssh-ed25519".to_owned(),
        "ssh-ed25519 !!!not-base64!!!".to_owned(),
        format!("ssh-ed25519 {}", &body[..body.len() - 8]),
        format!("ssh-ed25519 {body}AAAA"),
        format!("ssh-rsa {body}"),
        format!("ecdsa-sha2-nistp256 {body}"),
        format!("command=\"/bin/sh\" {line}"),
        format!("{line}\n{line}"),
        format!("{line} evil\u{1b}[2Jcomment"),
        format!("{line} a\0b"),
        private_key,
        "x".repeat(20_000),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA==".to_owned(),
        format!(
            "ssh-ed25519 {}",
            STANDARD.encode(ssh_string(b"ssh-ed25519"))
        ),
    ];
    for case in cases {
        let err = SshPublicKey::parse(&case).expect_err(&case);
        assert_eq!(err.kind(), ErrorKind::InvalidPublicKey, "{case:?}: {err:?}");
    }
}

#[test]
fn malformed_signatures_are_refused_without_panicking() {
    let dir = TempDir::new().unwrap();
    let key = keygen(dir.path(), "ed", &["-t", "ed25519"]);
    let parsed = SshPublicKey::parse(&public_line(&key)).unwrap();
    let signature = sign(&key, SSH_NAMESPACE, NONCE);
    let lines: Vec<&str> = signature.lines().collect();
    let body: String = lines[1..lines.len() - 1].concat();
    let armor = |body: &str| {
        format!("-----BEGIN SSH SIGNATURE-----\n{body}\n-----END SSH SIGNATURE-----\n")
    };
    // Flip one bit inside the raw signature bytes at the end of the blob.
    let mut raw = STANDARD.decode(&body).unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 0x01;
    let flipped = armor(&STANDARD.encode(&raw));
    let cases = [
        String::new(),
        "garbage".to_owned(),
        armor(""),
        armor("!!!!"),
        armor(&body[..body.len() / 2]),
        armor(&STANDARD.encode(b"SSHSIG\0\0\0\x01")),
        signature.replace("SSH SIGNATURE", "PGP SIGNATURE"),
        lines[1..lines.len() - 1].join("\n"),
        flipped,
        "A".repeat(100_000),
    ];
    for case in cases {
        let err = refused(verify_ssh_signature(&parsed, SSH_NAMESPACE, NONCE, &case));
        assert!(
            matches!(
                err,
                Error::MalformedSignature(_)
                    | Error::BadSshSignature(_)
                    | Error::SignatureTooLong { .. }
            ),
            "{case:?}: {err:?}"
        );
    }
}
