//! The files a chat's questions bring (multipart `files`), kept on this server's
//! disk under `$WEIR_DATA_DIR/uploads/<workspace>/<chatflow>/<chat>/`.
//!
//! Only a flow that takes chat files (its vector store reads them) keeps them; for
//! any other flow they are read for the question and never written, so nobody
//! can fill the disk through a public chatflow. A workspace keeps at most
//! `WORKSPACE_UPLOAD_QUOTA` bytes (a question that would go over is a 413 naming
//! the quota, and nothing of it is written). Files go with their chat (deleting its
//! messages), with their chatflow, and after `UPLOAD_TTL_DAYS` ([`run_sweeper`],
//! hourly). Each workspace's writes take turns, so concurrent questions cannot
//! pass the quota together.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{ServiceError, ServiceResult};
use crate::retrieval::load::FileData as Upload;

/// How often the sweeper looks for expired files.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

pub struct Uploads {
    root: PathBuf,
    quota: u64,
    ttl: Duration,
    /// One writer at a time per workspace (the quota is read, then written).
    turns: Mutex<HashMap<Uuid, Arc<tokio::sync::Mutex<()>>>>,
}

impl Uploads {
    pub fn new(root: PathBuf, quota: u64, ttl: Duration) -> Self {
        Uploads {
            root,
            quota,
            ttl,
            turns: Mutex::default(),
        }
    }

    fn workspace_dir(&self, workspace: Uuid) -> PathBuf {
        self.root.join(workspace.to_string())
    }

    fn flow_dir(&self, workspace: Uuid, flow: Uuid) -> PathBuf {
        self.workspace_dir(workspace).join(flow.to_string())
    }

    /// Keeps a chat's files, within the workspace's quota; returns where they went
    /// (for [`Uploads::discard`] when the question then fails).
    pub async fn keep(
        &self,
        workspace: Uuid,
        flow: Uuid,
        chat: &str,
        files: &[Upload],
    ) -> ServiceResult<Vec<PathBuf>> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let turn = {
            let mut turns = self
                .turns
                .lock()
                .map_err(|_| ServiceError::Internal("upload turns poisoned".into()))?;
            Arc::clone(turns.entry(workspace).or_default())
        };
        let _turn = turn.lock().await;
        let incoming: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
        let workspace_dir = self.workspace_dir(workspace);
        let used = tokio::task::spawn_blocking(move || bytes_under(&workspace_dir))
            .await
            .map_err(|e| ServiceError::Internal(format!("upload usage: {e}")))?;
        if used.saturating_add(incoming) > self.quota {
            return Err(ServiceError::TooLarge(format!(
                "these files would take the workspace's uploads past its quota of {} \
                 (WORKSPACE_UPLOAD_QUOTA; {} in use): delete chats or wait for old files to expire",
                human_bytes(self.quota),
                human_bytes(used)
            )));
        }
        let dir = self.flow_dir(workspace, flow).join(safe_segment(chat));
        write_all(&dir, files)
            .await
            .map_err(|e| ServiceError::Internal(format!("cannot keep uploaded files: {e}")))
    }

    /// The newest file of this name a chat kept (as `get-upload-file` names it).
    pub async fn find(
        &self,
        workspace: Uuid,
        flow: Uuid,
        chat: &str,
        name: &str,
    ) -> ServiceResult<Option<bytes::Bytes>> {
        let dir = self.flow_dir(workspace, flow).join(safe_segment(chat));
        let suffix = format!("-{}", safe_segment(name));
        let newest = tokio::task::spawn_blocking(move || {
            let entries = std::fs::read_dir(&dir).ok()?;
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(&suffix))
                .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
                .max_by_key(|(at, _)| *at)
                .map(|(_, path)| path)
        })
        .await
        .map_err(|e| ServiceError::Internal(format!("upload lookup: {e}")))?;
        match newest {
            None => Ok(None),
            Some(path) => tokio::fs::read(&path)
                .await
                .map(|b| Some(bytes::Bytes::from(b)))
                .map_err(|e| ServiceError::Internal(format!("cannot read an uploaded file: {e}"))),
        }
    }

    /// Removes files [`Uploads::keep`] wrote for a question that then failed, so a
    /// failing question takes none of the quota.
    pub async fn discard(&self, kept: &[PathBuf]) {
        for path in kept {
            if let Err(e) = tokio::fs::remove_file(path).await
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::error!(file = %path.display(), error = %e, "cannot remove an uploaded file");
            }
        }
    }

    /// Removes a chatflow's files: one chat's, or every chat's.
    pub async fn forget(&self, workspace: Uuid, flow: Uuid, chat: Option<&str>) {
        let dir = match chat {
            Some(chat) => self.flow_dir(workspace, flow).join(safe_segment(chat)),
            None => self.flow_dir(workspace, flow),
        };
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::error!(dir = %dir.display(), error = %e, "cannot remove uploaded files");
            }
        }
    }

    /// Removes every file older than the TTL at `now`, and the folders it empties.
    /// Returns how many files went.
    pub async fn sweep(&self, now: SystemTime) -> usize {
        let root = self.root.clone();
        let cutoff = now.checked_sub(self.ttl).unwrap_or(SystemTime::UNIX_EPOCH);
        tokio::task::spawn_blocking(move || sweep_dir(&root, cutoff, false))
            .await
            .unwrap_or(0)
    }
}

/// Sweeps expired uploads every hour until `cancel` (and once at start).
pub async fn run_sweeper(uploads: Arc<Uploads>, cancel: CancellationToken) {
    loop {
        let removed = uploads.sweep(SystemTime::now()).await;
        if removed > 0 {
            tracing::info!(removed, "expired uploaded files removed");
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(SWEEP_EVERY) => {}
        }
    }
}

async fn write_all(dir: &Path, files: &[Upload]) -> std::io::Result<Vec<PathBuf>> {
    tokio::fs::create_dir_all(dir).await?;
    let mut written = Vec::with_capacity(files.len());
    for file in files {
        let path = dir.join(format!(
            "{}-{}",
            Uuid::new_v4().simple(),
            safe_segment(&file.name)
        ));
        if let Err(e) = tokio::fs::write(&path, &file.bytes).await {
            // All or nothing: what this question wrote goes too.
            for done in written.iter().chain([&path]) {
                let _ = tokio::fs::remove_file(done).await;
            }
            return Err(e);
        }
        written.push(path);
    }
    Ok(written)
}

/// Bytes of the files under `dir` (0 when it does not exist).
fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&entry.path()),
            Ok(t) if t.is_file() => entry.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Removes files modified before `cutoff` under `dir`, then `dir` itself when
/// it is left empty (never the root). Returns how many files went.
fn sweep_dir(dir: &Path, cutoff: SystemTime, remove_empty: bool) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => removed += sweep_dir(&path, cutoff, true),
            Ok(t) if t.is_file() => {
                let expired = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|at| at < cutoff);
                if expired {
                    match std::fs::remove_file(&path) {
                        Ok(()) => removed += 1,
                        Err(e) => tracing::warn!(file = %path.display(), error = %e,
                            "cannot remove an expired upload"),
                    }
                }
            }
            _ => {}
        }
    }
    if remove_empty {
        // Fails, as it should, while the folder still holds something.
        let _ = std::fs::remove_dir(dir);
    }
    removed
}

/// A name safe as one path segment: no separators, no dot-only names.
pub fn safe_segment(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    match cleaned.trim_matches('.') {
        "" => "_".to_owned(),
        s => s.to_owned(),
    }
}

fn human_bytes(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if n >= 1024 * MIB && n.is_multiple_of(1024 * MIB) {
        format!("{} GiB", n / (1024 * MIB))
    } else if n >= MIB {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn file(name: &str, size: usize) -> Upload {
        Upload {
            name: name.into(),
            bytes: Bytes::from(vec![b'x'; size]),
        }
    }

    #[tokio::test]
    async fn files_are_kept_within_the_quota_and_forgotten() {
        let root = tempfile::tempdir().unwrap();
        let uploads = Uploads::new(root.path().into(), 100, Duration::from_secs(60));
        let (ws, flow) = (Uuid::new_v4(), Uuid::new_v4());
        uploads
            .keep(ws, flow, "c1", &[file("a.txt", 60)])
            .await
            .unwrap();
        let err = uploads
            .keep(ws, flow, "c2", &[file("b.txt", 30), file("c.txt", 30)])
            .await
            .unwrap_err();
        assert!(matches!(err, ServiceError::TooLarge(m) if m.contains("WORKSPACE_UPLOAD_QUOTA")));
        assert!(
            !root
                .path()
                .join(ws.to_string())
                .join(flow.to_string())
                .join("c2")
                .exists()
        );
        // Another workspace has its own quota.
        uploads
            .keep(Uuid::new_v4(), flow, "c1", &[file("a.txt", 90)])
            .await
            .unwrap();
        uploads.forget(ws, flow, Some("c1")).await;
        assert_eq!(bytes_under(&root.path().join(ws.to_string())), 0);
        let kept = uploads
            .keep(ws, flow, "c3", &[file("d.txt", 40)])
            .await
            .unwrap();
        uploads.discard(&kept).await;
        assert_eq!(bytes_under(&root.path().join(ws.to_string())), 0);
        uploads
            .keep(ws, flow, "c2", &[file("b.txt", 100)])
            .await
            .unwrap();
        uploads.forget(ws, flow, None).await;
        assert!(
            !root
                .path()
                .join(ws.to_string())
                .join(flow.to_string())
                .exists()
        );
    }

    #[tokio::test]
    async fn the_sweeper_removes_only_expired_files() {
        let root = tempfile::tempdir().unwrap();
        let uploads = Uploads::new(root.path().into(), 1000, Duration::from_secs(3600));
        let (ws, flow) = (Uuid::new_v4(), Uuid::new_v4());
        uploads
            .keep(ws, flow, "old", &[file("a.txt", 10)])
            .await
            .unwrap();
        assert_eq!(uploads.sweep(SystemTime::now()).await, 0);
        let later = SystemTime::now() + Duration::from_secs(7200);
        assert_eq!(uploads.sweep(later).await, 1);
        assert!(!root.path().join(ws.to_string()).exists());
        assert!(root.path().exists());
    }

    #[test]
    fn segments_are_safe() {
        assert_eq!(safe_segment("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(safe_segment(".."), "_");
        assert_eq!(safe_segment("report 2024.pdf"), "report_2024.pdf");
    }
}
