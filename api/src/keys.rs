//! Operator actions on API keys, shared by the `weir keys …` commands and the
//! first start: create a key (the plaintext is returned once, never stored),
//! list keys without their secrets, revoke one.

use std::io::Write;
use std::path::Path;

use uuid::Uuid;

use crate::domain::apikey::generate_key;
use crate::domain::{ApiKey, DEFAULT_WORKSPACE, NewApiKey, Permission};
use crate::store::{Store, StoreResult};

/// Creates a key in `workspace` (created when absent): `(record, plaintext)`.
pub async fn create(
    store: &dyn Store,
    workspace: &str,
    name: &str,
    permissions: Vec<Permission>,
) -> StoreResult<(ApiKey, String)> {
    let ws = store.ensure_workspace(workspace).await?;
    let (plaintext, key_hash) = generate_key();
    let key = store
        .create_api_key(NewApiKey {
            workspace_id: ws.id,
            name: name.to_owned(),
            permissions,
            key_hash,
        })
        .await?;
    Ok((key, plaintext))
}

/// On a store without any key: creates the `default` workspace and one key with
/// every permission, and writes it to `<data_dir>/initial-api-key` (mode 0600).
/// Returns the plaintext when a key was made.
pub async fn bootstrap(store: &dyn Store, data_dir: &Path) -> Result<Option<String>, String> {
    if store.count_api_keys().await.map_err(|e| e.to_string())? > 0 {
        return Ok(None);
    }
    let (_, plaintext) = create(
        store,
        DEFAULT_WORKSPACE,
        "initial",
        Permission::ALL.to_vec(),
    )
    .await
    .map_err(|e| e.to_string())?;
    write_secret_file(&data_dir.join("initial-api-key"), &plaintext)
        .map_err(|e| format!("cannot write the initial API key file: {e}"))?;
    Ok(Some(plaintext))
}

fn write_secret_file(path: &Path, secret: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    writeln!(file, "{secret}")
}

/// Revokes a key by id in any workspace; `false` when there is none.
pub async fn revoke(store: &dyn Store, id: Uuid) -> StoreResult<bool> {
    store.delete_api_key(None, id).await
}
