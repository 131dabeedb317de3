//! The machine's kubelet and its node Lease.
//!
//! The machine's kubelet heartbeats from the moment its Node is registered: it creates
//! its node Lease in `kube-node-lease` (name = node name, leaseDurationSeconds 40,
//! ownerReference to the Node) and renews it every 10 s plus up to 400 ms of jitter,
//! retrying a failed write with backoff 200 ms doubling to 7 s, as the core kubelet
//! (`reconsim_world::kubelet`, docs/semantics.md 5.1, 8.2). Without it the node lifecycle
//! controller marks every MCO Node Unknown 40 s after it registers and taints it
//! NoExecute. That is one write per 10 s per machine and nothing else: the kubelet's
//! 10 s Node status sync, which only repairs a Ready condition the lifecycle
//! controller set while the kubelet was silent, is not modelled, and neither is the
//! kubelet's silence during an update's reboot (the heartbeat goes on through
//! `update_ms`, so a node rebooting for a config stays Ready).

use super::machine::McoMachine;
use super::messages::{MachineTimer, Timer};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, ApiRequest};
use reconsim_world::kubelet::{KubeletTiming, NODE_LEASE_NAMESPACE};
use reconsim_world::msg::Msg;
use reconsim_world::object::Resource;
use reconsim_world::object::{Body, Lease, Node, Object, ObjectKey, ObjectMeta};
use reconsim_world::proc::WorldCtx;

/// The kubelet's node Lease request under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LeaseReq {
    Get,
    Create,
    Update,
}

/// The kubelet's node Lease timing (docs/semantics.md 5.1), shared with the core kubelet.
pub(super) fn kubelet_timing() -> KubeletTiming {
    KubeletTiming::default()
}

impl McoMachine {
    /// From the Node's registration on, renew the node Lease every 10 s (+ jitter).
    pub(super) fn start_heartbeat(&mut self, ctx: &mut WorldCtx<'_>) {
        if self.heartbeating {
            return;
        }
        self.heartbeating = true;
        self.renew_lease(ctx);
        let t = kubelet_timing();
        let jitter = ctx.draw_ms(0, t.lease_renew_jitter_ms);
        ctx.set_timer(
            t.lease_renew_interval_ms + jitter,
            Msg::family_timer(Timer::Machine(MachineTimer::RenewLease)),
        );
    }

    fn lease_key(&self) -> ObjectKey {
        ObjectKey::new(Lease::KIND, NODE_LEASE_NAMESPACE, &self.spec.name)
    }

    fn lease_owner(&self, meta: &mut ObjectMeta) {
        if let Some(uid) = self.node_uid {
            meta.set_only_owner(Node::KIND, &self.spec.name, uid);
        }
    }

    /// One heartbeat: update the Lease last seen (conditional on its version), or read
    /// it if there is none. A request still unanswered is abandoned (its answer is then
    /// ignored; if it landed, the next update is a conflict and a re-read).
    pub(super) fn renew_lease(&mut self, ctx: &mut WorldCtx<'_>) {
        let (req, op) = match &self.lease {
            Some(current) => {
                let mut next = (**current).clone();
                if let Some(l) = next.typed_mut::<Lease>() {
                    l.holder_identity = Some(self.spec.name.clone());
                    l.lease_duration_seconds = kubelet_timing().lease_duration_s;
                    l.renew_time = Some(ctx.now());
                }
                self.lease_owner(&mut next.meta);
                let op = ApiOp::Update {
                    object: Box::new(next),
                    precondition: true,
                };
                (LeaseReq::Update, op)
            }
            None => (LeaseReq::Get, ApiOp::Get(self.lease_key())),
        };
        self.lease_call(req, op, ctx);
    }

    fn lease_call(&mut self, req: LeaseReq, op: ApiOp, ctx: &mut WorldCtx<'_>) {
        let id = self.ids.issue();
        self.lease_req = Some((id, req));
        ctx.send(self.endpoints.apiserver, Msg::Api(ApiRequest { id, op }));
    }

    pub(super) fn on_lease_resp(
        &mut self,
        req: LeaseReq,
        result: Result<ApiOk, ApiError>,
        ctx: &mut WorldCtx<'_>,
    ) {
        let t = kubelet_timing();
        match (req, result) {
            (LeaseReq::Get, Ok(ApiOk::Object(lease))) => {
                self.lease = Some(lease);
                self.renew_lease(ctx);
            }
            (LeaseReq::Get, Err(ApiError::NotFound)) => {
                let now = ctx.now();
                let mut meta = ObjectMeta::named(NODE_LEASE_NAMESPACE, &self.spec.name);
                self.lease_owner(&mut meta);
                let lease = Lease {
                    holder_identity: Some(self.spec.name.clone()),
                    lease_duration_seconds: t.lease_duration_s,
                    acquire_time: Some(now),
                    renew_time: Some(now),
                    lease_transitions: 0,
                    ..Default::default()
                };
                let op = ApiOp::Create(Box::new(Object::new(meta, Body::new(lease))));
                self.lease_call(LeaseReq::Create, op, ctx);
            }
            (LeaseReq::Create | LeaseReq::Update, Ok(ApiOk::Object(lease))) => {
                self.lease = Some(lease);
                self.heartbeats += 1;
                self.lease_backoff_ms = t.lease_retry_ms_min;
            }
            _ => {
                // Conflict, AlreadyExists, a timeout...: read it again after a backoff.
                self.lease = None;
                let delay = self.lease_backoff_ms;
                self.lease_backoff_ms = (delay * 2).min(t.lease_retry_ms_max);
                ctx.set_timer(
                    delay,
                    Msg::family_timer(Timer::Machine(MachineTimer::RetryLease)),
                );
            }
        }
    }
}
