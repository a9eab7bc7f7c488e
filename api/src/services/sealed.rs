//! Values kept sealed with the server's key (`crate::sealing`) in a text column:
//! the stored form `sealed:<keyId>:<data>`, bound to a context naming their owner
//! and field (a trigger's secret, a published flow's MCP token, a workspace MCP
//! server's headers). Text an earlier version stored plain reads as it is.

use super::{ServiceError, ServiceResult};
use crate::sealing::Keyring;

/// What a sealed value starts with.
pub const PREFIX: &str = "sealed:";

/// `plain` sealed for `context` (what binds it to its owner and field), in the
/// stored form `sealed:<keyId>:<data>`.
pub fn seal_text(keyring: &Keyring, context: &str, plain: &str) -> ServiceResult<String> {
    let sealed = keyring
        .seal(plain.as_bytes(), context)
        .map_err(ServiceError::Internal)?;
    Ok(format!("{PREFIX}{}:{}", sealed.key_id, sealed.data))
}

/// The plain text of a value [`seal_text`] stored for `context`.
pub fn open_text(keyring: &Keyring, context: &str, stored: &str) -> ServiceResult<String> {
    let Some((key_id, data)) = sealed_parts(stored) else {
        return Ok(stored.to_owned());
    };
    let plain = keyring.open(key_id, data, context).map_err(|e| {
        ServiceError::Internal(format!("a secret ({context}) cannot be opened: {e}"))
    })?;
    String::from_utf8(plain).map_err(|_| {
        ServiceError::Internal(format!(
            "a secret ({context}) opened to something that is not text"
        ))
    })
}

/// The key id and data of a stored value in the sealed form: `sealed:`, the key
/// id (16 hex digits), `:`, base64. Anything else is plain text an earlier version
/// stored, even when it happens to start with `sealed:`.
fn sealed_parts(stored: &str) -> Option<(&str, &str)> {
    let (key_id, data) = stored.strip_prefix(PREFIX)?.split_once(':')?;
    let key_id_ok = key_id.len() == 16 && key_id.bytes().all(|b| b.is_ascii_hexdigit());
    let data_ok = !data.is_empty()
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    (key_id_ok && data_ok).then_some((key_id, data))
}
