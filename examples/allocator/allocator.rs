//! A leader-elected ID allocator: real kube-rs code, as its authors would ship it, with
//! no reconsim in it (`harness.rs` registers it). Replicas of one Deployment run
//! [`run`]; the one holding the Lease `allocator-leader` (kube-lease-manager, from
//! crates.io) hands out blocks of IDs in rounds. The next free ID lives in the
//! ConfigMap `allocator-sequence` (`data.next`); each block handed out is recorded as a
//! ConfigMap `grant-*` (`data.start`, `data.holder`), for the consumers and the audit.
//!
//! [`Write::Blind`] is the bug: a round reads `next`, hands the block out, records the
//! grant and only then advances `next` with a blind merge patch. A leader that is
//! deposed mid-round (paused, or cut off with its requests in flight) does not know it
//! until its lease manager next looks: its round runs on, and its grant lands beside
//! the new leader's grant of the same block. [`Write::Reserved`] is the fix: reserve the
//! block first, with the resourceVersion it read as a precondition (a deposed leader's
//! reservation fails with 409), and hand out only a reserved block.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use kube_lease_manager::LeaseManagerBuilder;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// The Lease the replicas elect a leader with.
pub const LEASE: &str = "allocator-leader";
/// The ConfigMap that holds the next free ID.
pub const SEQUENCE: &str = "allocator-sequence";
/// The label of a grant's ConfigMap.
pub const GRANT_LABEL: &str = "allocator/grant";
/// IDs per block.
pub const BLOCK: u64 = 10;
/// The pause between a leader's rounds.
pub const ROUND: Duration = Duration::from_secs(2);
/// Handing a block out to its consumer (a call outside the cluster).
pub const HAND_OUT: Duration = Duration::from_secs(1);
/// The lease: held for 10 s after each renewal, renewed 3 s before it runs out.
pub const LEASE_DURATION_SECONDS: u64 = 10;
pub const LEASE_GRACE_SECONDS: u64 = 3;

/// How a round claims its block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// Hand out, record, then advance `next` with a merge patch (last writer wins).
    Blind,
    /// Advance `next` first with the resourceVersion read (409 if anyone wrote since),
    /// then hand out and record.
    Reserved,
}

/// The replica's program: elect, and while leading, allocate. `identity` is the pod's
/// name (its `HOSTNAME` in a Deployment).
pub async fn run(client: Client, identity: String, write: Write) -> Result<(), Error> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    ensure_sequence(&configmaps).await?;
    let manager = LeaseManagerBuilder::new(client, LEASE)
        .with_namespace("default")
        .with_identity(identity.clone())
        .with_duration(LEASE_DURATION_SECONDS)
        .with_grace(LEASE_GRACE_SECONDS)
        .build()
        .await
        .map_err(|e| Error::Service(Box::new(e)))?;
    let (mut leading, _task) = manager.watch().await;
    loop {
        while !*leading.borrow_and_update() {
            if leading.changed().await.is_err() {
                return Ok(());
            }
        }
        if let Err(e) = round(&configmaps, &identity, write).await {
            tracing::warn!(error = %e, "allocation round failed");
        }
        tokio::time::sleep(ROUND).await;
    }
}

/// Create the sequence at 0 unless a replica did.
async fn ensure_sequence(api: &Api<ConfigMap>) -> Result<(), Error> {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(SEQUENCE.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("next".to_string(), "0".to_string())])),
        ..ConfigMap::default()
    };
    match api.create(&PostParams::default(), &cm).await {
        Ok(_) => Ok(()),
        Err(Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

fn next_of(cm: &ConfigMap) -> u64 {
    cm.data
        .as_ref()
        .and_then(|d| d.get("next"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// One round as leader: one block handed out and recorded.
async fn round(api: &Api<ConfigMap>, identity: &str, write: Write) -> Result<(), Error> {
    let mut sequence = api.get(SEQUENCE).await?;
    let start = next_of(&sequence);
    let advanced = (start + BLOCK).to_string();
    match write {
        Write::Blind => {
            tokio::time::sleep(HAND_OUT).await;
            grant(api, identity, start).await?;
            let patch = json!({ "data": { "next": advanced } });
            api.patch(SEQUENCE, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Write::Reserved => {
            sequence
                .data
                .get_or_insert_with(BTreeMap::new)
                .insert("next".into(), advanced);
            // Carries the resourceVersion of the read: 409 if another leader wrote.
            api.replace(SEQUENCE, &PostParams::default(), &sequence)
                .await?;
            tokio::time::sleep(HAND_OUT).await;
            grant(api, identity, start).await?;
        }
    }
    Ok(())
}

/// Record that `holder` handed out the block at `start`.
async fn grant(api: &Api<ConfigMap>, holder: &str, start: u64) -> Result<(), Error> {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some("grant-".into()),
            labels: Some(BTreeMap::from([(
                GRANT_LABEL.to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("start".to_string(), start.to_string()),
            ("holder".to_string(), holder.to_string()),
        ])),
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &cm).await.map(|_| ())
}
