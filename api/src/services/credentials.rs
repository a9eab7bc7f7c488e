//! Credentials: written sealed, read redacted, opened only for the run whose nodes
//! name them.
//!
//! A credential's fields are one JSON object sealed with the server's key (see
//! [`crate::sealing`]), bound to its workspace and id. Nothing here logs a field's
//! value or puts one in an error. At start, [`reseal_all`] moves credentials sealed
//! by a previous key (`WEIR_SECRET_KEY_PREVIOUS`) to the current one.

use std::collections::HashMap;

use serde_json::{Map, Value};
use uuid::Uuid;

use super::{ServiceError, ServiceResult, Services};
use crate::domain::credential::{
    self, Credential, Fields, SealedCredential, validate_credential_name, validate_name,
};
use crate::domain::{Page, time};
use crate::flow::graph::FlowGraph;
use crate::flow::{CredentialFields, FlowError, OpenedCredential, destination};
use crate::sealing::Keyring;
use crate::store::{Listing, Store};

/// A create or update request (absent fields unchanged on update).
#[derive(Debug, Default)]
pub struct CredentialWrite {
    pub name: Option<String>,
    pub credential_name: Option<String>,
    pub plain_data_obj: Option<Map<String, Value>>,
    pub allowed_hosts: Option<Vec<String>>,
}

pub async fn create(
    state: &Services,
    workspace: Uuid,
    write: CredentialWrite,
) -> ServiceResult<Credential> {
    let name = write.name.ok_or(ServiceError::Missing("name"))?;
    let credential_name = write
        .credential_name
        .ok_or(ServiceError::Missing("credentialName"))?;
    validate_name(&name).map_err(ServiceError::Invalid)?;
    validate_credential_name(&credential_name).map_err(ServiceError::Invalid)?;
    let mut fields = Fields::new();
    credential::apply_fields(&mut fields, write.plain_data_obj.unwrap_or_default())
        .map_err(ServiceError::Invalid)?;
    let allowed_hosts = credential::validate_allowed_hosts(write.allowed_hosts.unwrap_or_default())
        .map_err(ServiceError::Invalid)?;
    let now = time::now();
    let mut record = SealedCredential {
        id: Uuid::new_v4(),
        workspace_id: workspace,
        name: name.trim().to_owned(),
        credential_name,
        key_id: String::new(),
        data: String::new(),
        created_date: now,
        updated_date: now,
        allowed_hosts,
    };
    seal_into(&state.keyring, &mut record, &fields)?;
    state.store.create_credential(&record).await?;
    Ok(Credential::view(&record, Some(&fields)))
}

/// One credential, its fields named and redacted.
pub async fn get(state: &Services, workspace: Uuid, id: Uuid) -> ServiceResult<Credential> {
    let record = state
        .store
        .get_credential(workspace, id)
        .await?
        .ok_or(ServiceError::NotFound("credential"))?;
    let fields = open(&state.keyring, &record)?;
    Ok(Credential::view(&record, Some(&fields)))
}

/// A page of the workspace's credentials (without their fields, as Flowise lists them).
pub async fn list(
    state: &Services,
    workspace: Uuid,
    credential_name: Option<&str>,
    page: Page,
) -> ServiceResult<Listing<Credential>> {
    let listing = state
        .store
        .list_credentials(workspace, credential_name, page)
        .await?;
    Ok(Listing {
        items: listing
            .items
            .iter()
            .map(|c| Credential::view(c, None))
            .collect(),
        total: listing.total,
    })
}

/// Applies `write` (see [`credential::apply_fields`] for how fields change).
pub async fn update(
    state: &Services,
    workspace: Uuid,
    id: Uuid,
    write: CredentialWrite,
) -> ServiceResult<Credential> {
    let mut record = state
        .store
        .get_credential(workspace, id)
        .await?
        .ok_or(ServiceError::NotFound("credential"))?;
    let read_data = record.data.clone();
    let mut fields = open(&state.keyring, &record)?;
    if let Some(name) = write.name {
        validate_name(&name).map_err(ServiceError::Invalid)?;
        record.name = name.trim().to_owned();
    }
    if let Some(kind) = write.credential_name {
        validate_credential_name(&kind).map_err(ServiceError::Invalid)?;
        record.credential_name = kind;
    }
    if let Some(update) = write.plain_data_obj {
        credential::apply_fields(&mut fields, update).map_err(ServiceError::Invalid)?;
    }
    if let Some(hosts) = write.allowed_hosts {
        record.allowed_hosts =
            credential::validate_allowed_hosts(hosts).map_err(ServiceError::Invalid)?;
    }
    record.updated_date = time::now();
    seal_into(&state.keyring, &mut record, &fields)?;
    if state.store.update_credential(&record, &read_data).await? {
        return Ok(Credential::view(&record, Some(&fields)));
    }
    match state.store.get_credential(workspace, id).await? {
        None => Err(ServiceError::NotFound("credential")),
        Some(_) => Err(ServiceError::Conflict(
            "the credential changed while this update was made; read it again and retry".into(),
        )),
    }
}

pub async fn delete(state: &Services, workspace: Uuid, id: Uuid) -> ServiceResult<()> {
    if state.store.delete_credential(workspace, id).await? {
        Ok(())
    } else {
        Err(ServiceError::NotFound("credential"))
    }
}

/// The fields of the credentials a run's nodes name (`ids`, from the plan), for
/// building its components. A name that is not a credential of the workspace is
/// a 400 naming it.
pub async fn open_for_run(
    store: &dyn Store,
    keyring: &Keyring,
    workspace: Uuid,
    ids: &[String],
) -> ServiceResult<Option<CredentialFields>> {
    if ids.is_empty() {
        return Ok(None);
    }
    let not_here = |id: &str| {
        ServiceError::Invalid(format!(
            "the flow uses credential '{id}', which this workspace does not have (create it \
             with POST /api/v1/credentials and put its id in the node's 'credential')"
        ))
    };
    let mut wanted = Vec::with_capacity(ids.len());
    for id in ids {
        wanted.push(Uuid::parse_str(id).map_err(|_| not_here(id))?);
    }
    let found = store.get_credentials(workspace, &wanted).await?;
    // Keyed by the flow's spelling of the id: what a node looks its credential up by.
    let mut by_flow_id = HashMap::with_capacity(ids.len());
    for (id, uuid) in ids.iter().zip(&wanted) {
        let record = found
            .iter()
            .find(|r| r.id == *uuid)
            .ok_or_else(|| not_here(id))?;
        by_flow_id.insert(
            id.clone(),
            OpenedCredential {
                kind: record.credential_name.clone(),
                allowed_hosts: record.allowed_hosts.clone(),
                fields: open(keyring, record)?,
            },
        );
    }
    Ok(Some(by_flow_id))
}

/// Checks a flow being saved in `workspace`: naming a credential the workspace has needs
/// `may_name_credentials` (the caller's `credentials:read`: a key that cannot see
/// the workspace's credentials cannot put them to use), and every node that names
/// one must keep it on the hosts it may go to (`flow::destination`). A `flow_data`
/// that is not a readable graph names nothing here; the run reports it.
pub async fn check_saved_flow(
    store: &dyn Store,
    workspace: Uuid,
    flow_data: &str,
    may_name_credentials: bool,
    trusted: &[String],
) -> ServiceResult<()> {
    let Ok(graph) = FlowGraph::parse(flow_data) else {
        return Ok(());
    };
    let uses = destination::credential_uses(&graph);
    if uses.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = uses
        .iter()
        .filter_map(|used| Uuid::parse_str(&used.credential).ok())
        .collect();
    let stored = store.get_credentials(workspace, &ids).await?;
    if stored.is_empty() {
        // Ids of credentials the workspace does not have (an export from elsewhere)
        // reach nothing; the run refuses them.
        return Ok(());
    }
    if !may_name_credentials {
        return Err(ServiceError::Flow(FlowError::forbidden(
            "this flow names stored credentials: saving it needs the 'credentials:read' permission",
        )));
    }
    destination::check_saved(&graph, crate::flow::registry::spec, trusted, |id| {
        let id = Uuid::parse_str(id).ok()?;
        let found = stored.iter().find(|c| c.id == id)?;
        Some((
            found.credential_name.as_str(),
            found.allowed_hosts.as_slice(),
        ))
    })
    .map_err(ServiceError::Flow)
}

/// Reseals every credential sealed by a previous key under the current one.
/// Returns how many moved; one that opens with no key held is left as it is
/// (and said in the log), so a wrong setting loses nothing.
pub async fn reseal_all(state: &Services) -> ServiceResult<usize> {
    let keyring = &state.keyring;
    let stale = state
        .store
        .credentials_sealed_by_other_keys(keyring.current_id())
        .await?;
    let mut moved = 0;
    for mut record in stale {
        let read_data = record.data.clone();
        let fields = match open(keyring, &record) {
            Ok(fields) => fields,
            Err(e) => {
                tracing::error!(credential = %record.id, workspace = %record.workspace_id,
                    "cannot reseal a credential: {e}");
                continue;
            }
        };
        seal_into(keyring, &mut record, &fields)?;
        if state.store.update_credential(&record, &read_data).await? {
            moved += 1;
        }
    }
    Ok(moved)
}

fn seal_into(
    keyring: &Keyring,
    record: &mut SealedCredential,
    fields: &Fields,
) -> ServiceResult<()> {
    let plain = serde_json::to_vec(fields)
        .map_err(|e| ServiceError::Internal(format!("credential fields: {e}")))?;
    let sealed = keyring
        .seal(&plain, &record.context())
        .map_err(ServiceError::Internal)?;
    record.key_id = sealed.key_id;
    record.data = sealed.data;
    Ok(())
}

fn open(keyring: &Keyring, record: &SealedCredential) -> ServiceResult<Fields> {
    let plain = keyring
        .open(&record.key_id, &record.data, &record.context())
        .map_err(|e| {
            ServiceError::Internal(format!("credential {} cannot be opened: {e}", record.id))
        })?;
    serde_json::from_slice(&plain).map_err(|_| {
        ServiceError::Internal(format!(
            "credential {} opened to something that is not its fields",
            record.id
        ))
    })
}
