//! OpenSSH public keys attached as credentials, and the `ssh-keygen -Y sign` signatures that
//! log in with them.
//!
//! Accepted keys: `ssh-ed25519`, `ecdsa-sha2-nistp256`, and `ssh-rsa` with 2048 to 4096 bits.
//! Signatures are SSHSIG (PROTOCOL.sshsig) and are checked with ssh-key's `PublicKey::verify`,
//! which compares the key embedded in the signature with the registered key and checks the
//! namespace; `SshSig::verify` alone would do neither, so a signature by any
//! key over any namespace would pass.

use ssh_key::{Algorithm, EcdsaCurve, HashAlg, PublicKey, SshSig};

use crate::Error;

/// The SSHSIG namespace of login signatures: `ssh-keygen -Y sign -n hf-auth`.
pub const SSH_NAMESPACE: &str = "hf-auth";
/// RSA keys shorter than this are refused.
pub const MIN_RSA_BITS: usize = 2048;
/// RSA keys longer than this are refused because the RSA verifier ssh-key uses cannot check them.
pub const MAX_RSA_BITS: usize = 4096;
/// Public key lines longer than this are refused before parsing (a 4096-bit RSA line is ~750).
pub const MAX_PUBLIC_KEY_BYTES: usize = 8 * 1024;
/// Armored signatures longer than this are refused before parsing (RSA-4096's is ~1.1 KiB).
pub const MAX_SIGNATURE_BYTES: usize = 8 * 1024;

/// The key types hf accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SshKeyAlgorithm {
    /// `ssh-ed25519`.
    Ed25519,
    /// `ecdsa-sha2-nistp256`.
    EcdsaP256,
    /// `ssh-rsa` (signatures use rsa-sha2-256 or rsa-sha2-512; SHA-1 is refused).
    Rsa {
        /// The modulus size.
        bits: usize,
    },
}

impl SshKeyAlgorithm {
    /// The OpenSSH name of the key type, as at the start of a public key line.
    pub fn as_str(&self) -> &'static str {
        match self {
            SshKeyAlgorithm::Ed25519 => "ssh-ed25519",
            SshKeyAlgorithm::EcdsaP256 => "ecdsa-sha2-nistp256",
            SshKeyAlgorithm::Rsa { .. } => "ssh-rsa",
        }
    }
}

/// A parsed, accepted OpenSSH public key.
#[derive(Debug, Clone)]
pub struct SshPublicKey {
    key: PublicKey,
    algorithm: SshKeyAlgorithm,
    openssh: String,
    fingerprint: String,
}

impl SshPublicKey {
    /// Parses one OpenSSH public key line (`<type> <base64> [comment]`, as in `id_ed25519.pub`)
    /// and refuses key types and sizes hf does not accept.
    ///
    /// Surrounding whitespace is ignored; control characters anywhere else (a second line, a
    /// terminal escape in the comment) are refused.
    pub fn parse(line: &str) -> Result<Self, Error> {
        let line = line.trim();
        if line.len() > MAX_PUBLIC_KEY_BYTES {
            return Err(Error::PublicKeyTooLong {
                bytes: line.len(),
                max: MAX_PUBLIC_KEY_BYTES,
            });
        }
        if line.chars().any(char::is_control) {
            return Err(Error::PublicKeyControlCharacter);
        }
        let key = PublicKey::from_openssh(line).map_err(Error::InvalidPublicKey)?;
        let algorithm = match key.algorithm() {
            Algorithm::Ed25519 => SshKeyAlgorithm::Ed25519,
            Algorithm::Ecdsa {
                curve: EcdsaCurve::NistP256,
            } => SshKeyAlgorithm::EcdsaP256,
            Algorithm::Rsa { .. } => {
                let bits = key.key_data().rsa().map_or(0, |rsa| modulus_bits(&rsa.n));
                if bits < MIN_RSA_BITS {
                    return Err(Error::RsaKeyTooSmall {
                        bits,
                        min: MIN_RSA_BITS,
                    });
                }
                if bits > MAX_RSA_BITS {
                    return Err(Error::RsaKeyTooLarge {
                        bits,
                        max: MAX_RSA_BITS,
                    });
                }
                SshKeyAlgorithm::Rsa { bits }
            }
            other => {
                return Err(Error::UnsupportedKeyAlgorithm {
                    algorithm: other.as_str().to_owned(),
                })
            }
        };
        let openssh = key.to_openssh().map_err(Error::InvalidPublicKey)?;
        let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
        Ok(Self {
            key,
            algorithm,
            openssh,
            fingerprint,
        })
    }

    /// The fingerprint as `ssh-keygen -l` prints it: `SHA256:` and unpadded base64.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The key type.
    pub fn algorithm(&self) -> SshKeyAlgorithm {
        self.algorithm
    }

    /// The comment after the key (often `user@host`), or `None` when there is none.
    pub fn comment(&self) -> Option<&str> {
        Some(self.key.comment()).filter(|comment| !comment.is_empty())
    }

    /// The canonical single-line form, to store and to show: `<type> <base64>[ <comment>]`.
    pub fn to_openssh(&self) -> &str {
        &self.openssh
    }
}

/// The number of significant bits of an RSA modulus.
fn modulus_bits(n: &ssh_key::Mpint) -> usize {
    let Some(bytes) = n.as_positive_bytes() else {
        return 0;
    };
    let Some(position) = bytes.iter().position(|byte| *byte != 0) else {
        return 0;
    };
    let significant = &bytes[position..];
    let leading_zero_bits = significant
        .first()
        .map_or(0, |byte| byte.leading_zeros() as usize);
    significant.len() * 8 - leading_zero_bits
}

/// Checks an armored SSHSIG signature (`-----BEGIN SSH SIGNATURE-----`) over `message`, made by
/// `key` for `namespace` (use [`SSH_NAMESPACE`] for logins).
///
/// Distinguishes a malformed signature, one made by another key, one for another namespace, and
/// one that does not match the message.
pub fn verify_ssh_signature(
    key: &SshPublicKey,
    namespace: &str,
    message: &[u8],
    armored: &str,
) -> Result<(), Error> {
    if armored.len() > MAX_SIGNATURE_BYTES {
        return Err(Error::SignatureTooLong {
            bytes: armored.len(),
            max: MAX_SIGNATURE_BYTES,
        });
    }
    let signature = SshSig::from_pem(armored.trim()).map_err(Error::MalformedSignature)?;
    match key.key.verify(namespace, message, &signature) {
        Ok(()) => Ok(()),
        Err(ssh_key::Error::PublicKey) => Err(Error::SignatureKeyMismatch),
        Err(ssh_key::Error::Namespace) => Err(Error::WrongNamespace {
            expected: namespace.to_owned(),
            found: signature.namespace().to_owned(),
        }),
        Err(err) => Err(Error::BadSshSignature(err)),
    }
}
