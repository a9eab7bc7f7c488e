//! Secrets at rest: the server's AES-256-GCM keys and what they seal.
//!
//! The current key comes from `WEIR_SECRET_KEY` (64 hex digits or the base64 of 32
//! bytes), else from `secret.key` beside the data (created on first start with 32
//! random bytes, mode 0600, never overwritten). Keys named by
//! `WEIR_SECRET_KEY_PREVIOUS` still open what they sealed, so a key can be rotated:
//! start with the new key and the old one as previous, and the server reseals every
//! stored secret under the new key (`services::credentials::reseal_all`).
//!
//! A sealed value is `base64(nonce ‖ ciphertext ‖ tag)` with a fresh random 96-bit
//! nonce, kept beside the id of the key that sealed it (the first 8 bytes of the
//! key's SHA-256, in hex). The caller's `context` (the workspace and the record's
//! id) is the associated data: a sealed value copied to another record or workspace
//! does not open.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};

/// The name of the generated key file inside the data directory.
pub const KEY_FILE: &str = "secret.key";

/// A value sealed under one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub key_id: String,
    pub data: String,
}

/// Why a value does not open.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    #[error(
        "it was sealed with a key this server does not have (key {0}; was WEIR_SECRET_KEY changed \
         without naming the old key in WEIR_SECRET_KEY_PREVIOUS?)"
    )]
    UnknownKey(String),
    #[error("it does not open with its key (the stored value is damaged or was moved)")]
    Damaged,
}

struct Key {
    id: String,
    key: LessSafeKey,
}

impl Key {
    fn new(bytes: &[u8; 32]) -> Self {
        let digest = Sha256::digest(bytes);
        let id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        // Infallible for a 32-byte key: AES-256 takes exactly that.
        let unbound = UnboundKey::new(&AES_256_GCM, bytes).unwrap_or_else(|_| unreachable!());
        Key {
            id,
            key: LessSafeKey::new(unbound),
        }
    }
}

/// The current key and the previous ones.
pub struct Keyring {
    current: Key,
    previous: Vec<Key>,
    random: SystemRandom,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("current", &self.current.id)
            .field("previous", &self.previous.len())
            .finish()
    }
}

impl Keyring {
    /// The keyring from the settings: `secret` (WEIR_SECRET_KEY) or the key file in
    /// `data_dir`, and the `previous` keys (a comma list).
    pub fn load(secret: Option<&str>, previous: &str, data_dir: &Path) -> Result<Self, String> {
        let current = match secret.map(str::trim).filter(|s| !s.is_empty()) {
            Some(text) => parse_key(text).map_err(|e| format!("WEIR_SECRET_KEY {e}"))?,
            None => key_file(&data_dir.join(KEY_FILE))?,
        };
        let previous = previous
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|text| {
                parse_key(text)
                    .map(|k| Key::new(&k))
                    .map_err(|e| format!("WEIR_SECRET_KEY_PREVIOUS {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Keyring {
            current: Key::new(&current),
            previous,
            random: SystemRandom::new(),
        })
    }

    /// A keyring of one key (tests).
    pub fn with_key(bytes: [u8; 32]) -> Self {
        Keyring {
            current: Key::new(&bytes),
            previous: Vec::new(),
            random: SystemRandom::new(),
        }
    }

    /// The id of the key that seals now.
    pub fn current_id(&self) -> &str {
        &self.current.id
    }

    /// Seals `plain` for the record `context` names.
    pub fn seal(&self, plain: &[u8], context: &str) -> Result<Sealed, String> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| "the system's random source failed".to_owned())?;
        let mut buf = Vec::with_capacity(NONCE_LEN + plain.len() + AES_256_GCM.tag_len());
        buf.extend_from_slice(&nonce);
        buf.extend_from_slice(plain);
        let tag = self
            .current
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut buf[NONCE_LEN..],
            )
            .map_err(|_| "sealing failed".to_owned())?;
        buf.extend_from_slice(tag.as_ref());
        Ok(Sealed {
            key_id: self.current.id.clone(),
            data: B64.encode(buf),
        })
    }

    /// Opens what [`Keyring::seal`] sealed for the same `context`.
    pub fn open(&self, key_id: &str, data: &str, context: &str) -> Result<Vec<u8>, OpenError> {
        let key = std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id == key_id)
            .ok_or_else(|| OpenError::UnknownKey(key_id.to_owned()))?;
        let mut buf = B64.decode(data).map_err(|_| OpenError::Damaged)?;
        if buf.len() < NONCE_LEN + AES_256_GCM.tag_len() {
            return Err(OpenError::Damaged);
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&buf[..NONCE_LEN]);
        let plain = key
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut buf[NONCE_LEN..],
            )
            .map_err(|_| OpenError::Damaged)?;
        Ok(plain.to_vec())
    }
}

/// 32 bytes from 64 hex digits or base64.
fn parse_key(text: &str) -> Result<[u8; 32], String> {
    let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        (0..32)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| "is not hexadecimal".to_owned())?
    } else {
        B64.decode(text)
            .map_err(|_| "must be 64 hex digits or the base64 of 32 bytes".to_owned())?
    };
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| format!("must hold 32 bytes, not {}", bytes.len()))
}

/// The key in `path`, created (0600, 32 random bytes in hex) when absent.
fn key_file(path: &Path) -> Result<[u8; 32], String> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            return parse_key(text.trim()).map_err(|e| format!("{} {e}", path.display()));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut key = [0u8; 32];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| "the system's random source failed".to_owned())?;
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    // create_new: two servers starting on one data directory never overwrite
    // each other's key; the loser reads the winner's.
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut file) => {
            file.write_all(format!("{hex}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            tracing::info!(path = %path.display(), "generated the secret key (back it up with the data)");
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            parse_key(text.trim()).map_err(|e| format!("{} {e}", path.display()))
        }
        Err(e) => Err(format!("cannot create {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_and_opens_only_in_its_context() {
        let ring = Keyring::with_key([7; 32]);
        let sealed = ring.seal(b"sk-secret", "ws/1").unwrap();
        assert!(!sealed.data.contains("sk-secret"));
        assert_eq!(
            ring.open(&sealed.key_id, &sealed.data, "ws/1").unwrap(),
            b"sk-secret"
        );
        assert_eq!(
            ring.open(&sealed.key_id, &sealed.data, "ws/2"),
            Err(OpenError::Damaged)
        );
        // A fresh nonce each time.
        assert_ne!(ring.seal(b"sk-secret", "ws/1").unwrap().data, sealed.data);
    }

    #[test]
    fn previous_keys_open_and_unknown_keys_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let old = "aa".repeat(32);
        let new = B64.encode([9u8; 32]);
        let before = Keyring::load(Some(&old), "", dir.path()).unwrap();
        let sealed = before.seal(b"v", "c").unwrap();
        let after = Keyring::load(Some(&new), &old, dir.path()).unwrap();
        assert_ne!(after.current_id(), sealed.key_id);
        assert_eq!(after.open(&sealed.key_id, &sealed.data, "c").unwrap(), b"v");
        let without = Keyring::load(Some(&new), "", dir.path()).unwrap();
        assert!(matches!(
            without.open(&sealed.key_id, &sealed.data, "c"),
            Err(OpenError::UnknownKey(_))
        ));
    }

    #[test]
    fn generates_a_private_key_file_once() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let first = Keyring::load(None, "", dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = Keyring::load(None, "", dir.path()).unwrap();
        assert_eq!(first.current_id(), again.current_id());
    }

    #[test]
    fn bad_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Keyring::load(Some("short"), "", dir.path()).is_err());
        assert!(Keyring::load(Some(&"zz".repeat(32)), "", dir.path()).is_err());
        assert!(Keyring::load(Some(&"ab".repeat(32)), "nope", dir.path()).is_err());
    }
}
