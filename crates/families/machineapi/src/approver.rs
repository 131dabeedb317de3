//! OpenShift's cluster-machine-approver, for node client certificates (docs/semantics.md
//! 5.12): a joining node's kubelet may register its Node only once its CSR is approved,
//! and the approver approves it only for a node some Machine is waiting for.
//!
//! The rules of a node client CSR (openshift/cluster-machine-approver README, "Node
//! Client CSR Approval Workflow"; csr_check.go): the requester is the machine-config
//! operator's node-bootstrapper; no Node of that name exists yet; a Machine lists the
//! node's name as its NodeInternalDNS address and has no nodeRef; and the CSR was made
//! within 2 hours of the Machine's creation. A CSR that fails them stays pending (the
//! approver never denies), so an instance no Machine tracks (a duplicate launched by a
//! race) never joins: its kubelet keeps making CSRs, the report's "excess CSRs".
//!
//! A kube-runtime-shaped controller over CSRs: one that cannot be approved yet ends in
//! error and is retried with the work queue's backoff (a Machine may record its address
//! after the CSR came).

use crate::kinds::Machine;
use crate::section::MACHINE_API_NAMESPACE;
use reconsim_world::manager::Reconciler;
use reconsim_world::object::{
    CertificateSigningRequest, CsrStatus, NODE_BOOTSTRAPPER, Node, Object,
};
use reconsim_world::runtime::{Action, Api, Client, Controller, Error, PatchParams};
use std::sync::Arc;

/// The process name.
pub const NAME: &str = "machine-approver";

/// How far apart a CSR and its Machine's creation may be.
pub const MAX_MACHINE_AGE_MS: u64 = 2 * 3_600_000;

struct Ctx {
    client: Client,
}

/// The approver.
pub fn controller() -> Box<dyn Reconciler> {
    // Machines and Nodes are watched for the cache the rules read, not as triggers: a CSR
    // that fails them is retried by its error's backoff.
    Controller::new::<CertificateSigningRequest>(NAME)
        .watches::<Machine>(|_, _| {})
        .watches::<Node>(|_, _| {})
        .run(reconcile, error_policy, |client: Client| Ctx { client })
}

/// Why a CSR was not approved this time.
#[derive(Debug)]
enum NotYet {
    Client(Error),
    NoMachine(String),
}

impl From<Error> for NotYet {
    fn from(e: Error) -> Self {
        NotYet::Client(e)
    }
}

impl std::fmt::Display for NotYet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotYet::Client(e) => e.fmt(f),
            NotYet::NoMachine(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for NotYet {}

fn error_policy(_: Arc<Object>, _: &NotYet, _: Arc<Ctx>) -> Action {
    Action::rate_limited()
}

async fn reconcile(csr: Arc<Object>, ctx: Arc<Ctx>) -> Result<Action, NotYet> {
    let Some(c) = csr.typed::<CertificateSigningRequest>() else {
        return Ok(Action::await_change());
    };
    if c.status.approved || c.spec.username != NODE_BOOTSTRAPPER {
        return Ok(Action::await_change());
    }
    let node = &c.spec.node_name;
    if ctx.client.store::<Node>().get("", node).is_some() {
        // A client CSR is for a node that has not registered yet.
        return Ok(Action::await_change());
    }
    let created = csr.meta.creation_timestamp;
    let machine = ctx.client.store::<Machine>().state().into_iter().find(|m| {
        let status = &m.typed::<Machine>().expect("a Machine").status;
        m.meta.namespace == MACHINE_API_NAMESPACE
            && status.internal_dns.as_deref() == Some(node.as_str())
            && status.node_ref.is_none()
            && created.since(m.meta.creation_timestamp) <= MAX_MACHINE_AGE_MS
    });
    let Some(machine) = machine else {
        return Err(NotYet::NoMachine(format!(
            "CSR {}: no Machine waits for node {node}",
            csr.meta.name
        )));
    };
    ctx.client.note(|| {
        format!(
            "approving CSR {} of node {node} (Machine {})",
            csr.meta.name, machine.meta.name
        )
    });
    let csrs: Api<CertificateSigningRequest> = Api::all(ctx.client.clone());
    let status = CertificateSigningRequest {
        status: CsrStatus {
            approved: true,
            ..Default::default()
        },
        ..Default::default()
    };
    csrs.patch_status(&csr.meta.name, &PatchParams::default(), status)
        .await?;
    Ok(Action::await_change())
}
