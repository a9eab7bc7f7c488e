//! What weir keeps of a vector store node: its chunks (text, metadata, the
//! embedding, and the content hash an upsert de-duplicates by) and the record of
//! every upsert. A vector store belongs to one chatflow and one node of it, and
//! goes with the chatflow when it is deleted.

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::time::Timestamp;

/// One stored chunk of a vector store node.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorChunk {
    pub id: Uuid,
    /// SHA-256 (hex) of the embedder, the text and the metadata: equal hashes are
    /// the same chunk, which an upsert skips.
    pub content_hash: String,
    /// `metadata.source`, which cleanup groups chunks by.
    pub source: Option<String>,
    /// Set for a file attached to one chat: only that chat retrieves it.
    pub chat_id: Option<String>,
    pub page_content: String,
    pub metadata: Map<String, Value>,
    pub embedding: Vec<f32>,
}

/// The key of a stored chunk, without its text and vector (what an upsert plans with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkKey {
    pub id: Uuid,
    pub content_hash: String,
    pub source: Option<String>,
    /// The length of its embedding.
    pub dims: usize,
}

/// What one upsert did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpsertCounts {
    pub num_added: u64,
    pub num_updated: u64,
    pub num_skipped: u64,
    pub num_deleted: u64,
}

/// A past upsert (`GET /api/v1/upsert-history/:id`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpsertRecord {
    pub id: Uuid,
    pub chatflow_id: Uuid,
    /// The vector store node that was filled.
    pub node_id: String,
    #[serde(flatten)]
    pub counts: UpsertCounts,
    #[serde(serialize_with = "super::time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub date: Timestamp,
}

/// An upsert's changes to one node's chunks, applied all or none.
#[derive(Debug, Clone, Default)]
pub struct VectorWrite {
    pub chatflow_id: Uuid,
    pub node_id: String,
    pub added: Vec<VectorChunk>,
    pub deleted: Vec<Uuid>,
    pub counts: UpsertCounts,
}

/// Embeddings as stored: little-endian f32s.
pub fn embedding_bytes(vector: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(vector.len() * 4);
    for x in vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// The inverse of [`embedding_bytes`]; `None` for a length that is not whole f32s.
pub fn embedding_from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_round_trip() {
        let v = vec![0.25f32, -1.5, 3.0e-7];
        assert_eq!(embedding_from_bytes(&embedding_bytes(&v)), Some(v));
        assert_eq!(embedding_from_bytes(&[1, 2, 3]), None);
    }
}
