//! The orphan collector: deletes objects no committed span points at.
//!
//! Two kinds of orphans exist: objects whose topic (or every span) was
//! deleted — their `objects` row is marked, the object deleted, then the row
//! dropped — and uploads whose commit never happened, which have no row at
//! all: objects in the store older than the grace period and unknown to
//! PostgreSQL are first claimed with a row of their own (so a commit of the
//! same object that is still in flight fails on the primary key), then
//! deleted. Commits older than half the grace period are refused as well
//! (`MetaError::Expired`). Every agent may run it; each step is idempotent.

use std::time::Duration;

use rutomq_meta::Meta;
use rutomq_storage::Storage;

/// Objects handled per round at most (each kind).
pub const GC_OBJECTS_PER_ROUND_MAX: usize = 10_000;

pub async fn run(meta: Meta, storage: Storage, interval: Duration, grace: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.tick().await;
    // Listing resumes where the last round stopped, so a large store is
    // covered over several rounds instead of re-reading its first keys.
    let mut cursor = None;
    loop {
        tick.tick().await;
        match round(&meta, &storage, grace, &mut cursor).await {
            Ok((0, 0)) => {}
            Ok((deleted, uncommitted)) => {
                tracing::info!(deleted, uncommitted, "orphan objects collected")
            }
            Err(e) => tracing::warn!(error = %e, "orphan collection round failed"),
        }
    }
}

/// One round; returns (unreferenced objects deleted, never-committed
/// objects deleted).
pub async fn round(
    meta: &Meta,
    storage: &Storage,
    grace: Duration,
    cursor: &mut Option<String>,
) -> anyhow::Result<(usize, usize)> {
    meta.mark_unreferenced_objects(grace).await?;
    let marked = meta
        .objects_to_delete(GC_OBJECTS_PER_ROUND_MAX as i64)
        .await?;
    for key in &marked {
        storage.delete(key.clone()).await?;
    }
    if !marked.is_empty() {
        meta.forget_objects(marked.clone()).await?;
    }
    let old = storage
        .list_older_than(grace, GC_OBJECTS_PER_ROUND_MAX, cursor.take())
        .await?;
    if old.len() == GC_OBJECTS_PER_ROUND_MAX {
        *cursor = old.last().cloned();
    }
    let mut uncommitted = 0;
    for chunk in old.chunks(1000) {
        // Claimed in PostgreSQL first: a commit of the same object racing
        // with this round fails on the claim instead of pointing at a
        // deleted object. Later rounds drop the claimed rows.
        for key in meta.claim_unknown_objects(chunk.to_vec()).await? {
            storage.delete(key).await?;
            uncommitted += 1;
        }
    }
    Ok((marked.len(), uncommitted))
}
