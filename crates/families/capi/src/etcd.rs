//! The workload cluster's stacked etcd and its kubeadm ClusterStatus (seed incident 2).
//!
//! One process ([`Etcd`]) models the whole etcd cluster of the workload control plane:
//! its members, its leader, whether it has quorum, and the kubeadm ClusterStatus
//! (`apiEndpoints` of the kubeadm-config ConfigMap) that lists the control-plane nodes.
//! Clients (the KubeadmControlPlane controller, through [`EtcdClient`]) talk to it over
//! the network (an [`EtcdOp`] in a `Msg::Request`, the [`EtcdResult`] back in a
//! `Msg::Response`), so every etcd call is an await
//! point, as in the real controller, which reaches each member through a port-forward to
//! the `etcd-<node>` pod (SEED-FACTS.md section 2, kubernetes-sigs/cluster-api
//! controlplane/kubeadm/internal/workload_cluster_etcd.go and etcd_client_generator.go).
//!
//! Real-world rules modelled:
//! - Join order: a control-plane machine runs `kubeadm join`, whose static etcd pod adds
//!   the member before the kubelet registers the Node (static pods start first). Here the
//!   member is added once the cloud reports the machine's instance running (the etcd
//!   model polls the cloud every `poll_ms` for instances tagged [`ROLE_TAG`]); the cloud
//!   registers the Node `join_ms` later. So for a while a new member has no Node, which is
//!   the window in which `ReconcileEtcdMembers` could remove it (the question of the
//!   incident's reviewer). The member is named after the node (`ip-10-...`), as kubeadm
//!   names members after the host.
//! - The rest of `kubeadm join --control-plane` (phase control-plane-join: etcd, then
//!   update-status, then mark-control-plane; kubernetes/kubernetes
//!   cmd/kubeadm/app/cmd/phases/join/controlplanejoin.go): kubeadm waits for the new
//!   member to sync, adds the node to the ClusterStatus apiEndpoints, then labels the
//!   Node `node-role.kubernetes.io/master` (waiting for the kubelet to have registered
//!   it). Here that is `mark_ms` (drawn per member) after the add: the endpoint, then a
//!   label patch through the API server once a Node List shows the Node. Until then the
//!   Node exists (the Machine controller can set its NodeRef by providerID) but is not a
//!   control-plane Node for the KCP, which selects Nodes by that label. A member removed
//!   before its mark never gets one (kubeadm join fails).
//! - A member is up while its instance runs; shutting-down, terminated or vanished
//!   instances are down. Quorum: more than half of the members up. Without quorum,
//!   member lists, removals and leader moves fail ([`EtcdError::NoQuorum`]); losing quorum
//!   is recorded (see [`Etcd::quorum_lost`]). A member cannot be added without quorum.
//! - A removed member's etcd exits and never rejoins (kubeadm does not re-run join).
//! - The leader is the first member; when it goes away or down, the oldest up member
//!   takes over; `MoveLeader` hands it to another up member.
//! - Every call takes a seeded service time in `call_ms_*` before it is applied and
//!   answered: creating the client, the port-forward through the workload API server and
//!   the TLS handshake (upstream builds a new client per node per call).
//!
//! The log ([`Etcd::log`]) is ground truth for checkers: every add, removal (with the
//! member count), leader change, quorum loss and the model's probe of the upstream panic
//! (a leadership forward to a candidate without a NodeRef, see [`EtcdOp::ForwardLeadership`]).

use crate::kinds::NODE_ROLE_MASTER_LABEL;
use reconsim_cloud::{CloudOp, CloudResult, Instance, InstanceState};
use reconsim_sim::{Hashed, ProcId, SimTime};
use reconsim_world::api::{ApiOk, ApiOp, ApiRequest, PatchOp};
use reconsim_world::component::{Component, ServiceCaller};
use reconsim_world::msg::{Msg, ReqIds, Timer as AnyTimer};
use reconsim_world::object::ObjectKey;
use reconsim_world::object::{Node, Resource};
use reconsim_world::proc::{Endpoints, WorldCtx};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The instance tag a control-plane machine's instance carries (key, value).
pub const ROLE_TAG: (&str, &str) = ("reconsim/role", "control-plane");

/// The request-id tag of the etcd model's own calls (its cloud polls, its Node lists).
pub const ETCD_TAG: u16 = 0x0900;

/// A request being served: the caller's id and the operation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct EtcdRequest {
    pub id: u64,
    pub op: EtcdOp,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum EtcdOp {
    /// MemberList through the member on node `via` (a client of `etcd-<via>`). Fails with
    /// [`EtcdError::Unavailable`] when `via` is not an up member (its pod is not ready).
    MemberList { via: String },
    /// ForwardEtcdLeadership: if `leaving`'s member leads, move leadership to
    /// `candidate`'s member. `candidate: None` is the model's probe of the upstream nil
    /// dereference (the candidate Machine has no NodeRef): recorded in the log as
    /// [`EtcdEvent::NilLeaderCandidate`] and answered [`EtcdError::NilCandidate`].
    ForwardLeadership {
        leaving: String,
        candidate: Option<String>,
    },
    /// MemberRemove of the member named `name` (absent: nothing to do).
    RemoveMember { name: String },
    /// Drop `name` from the kubeadm ClusterStatus apiEndpoints.
    RemoveEndpoint { name: String },
}

/// The etcd model's answer to an [`EtcdOp`].
pub type EtcdResult = Result<EtcdOk, EtcdError>;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum EtcdOk {
    /// The member names, in id order, and the leader's name.
    Members {
        names: Vec<String>,
        leader: Option<String>,
    },
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum EtcdError {
    /// Fewer than half the members are up: consensus requests fail.
    NoQuorum,
    /// The member the client connects through is not an up member.
    Unavailable,
    /// The leadership candidate is not an up member.
    NoSuchMember,
    /// The candidate had no NodeRef (the upstream panic, recorded).
    NilCandidate,
}

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EtcdError::NoQuorum => "no quorum",
            EtcdError::Unavailable => "the member is not up (its etcd pod is not ready)",
            EtcdError::NoSuchMember => "no such up member",
            EtcdError::NilCandidate => "the leader candidate has no NodeRef",
        })
    }
}

impl std::error::Error for EtcdError {}

/// A typed client of the etcd model (as the cloud's `Ec2` is of the cloud), for
/// reconcilers in kube-runtime's shape (over `reconsim_world::runtime::Client`) or any
/// other [`ServiceCaller`]. Each call is one request to the etcd process, an await
/// point; the model's own errors come back as [`EtcdError`]s inside `Ok`, `Err` is the
/// caller's (a timeout, an answer of another type).
#[derive(Clone, Debug)]
pub struct EtcdClient<C = reconsim_world::runtime::Client> {
    client: C,
    etcd: ProcId,
}

/// An etcd call's result: the request failed (`Err`, a timeout), or etcd answered.
pub type EtcdCallResult<E = reconsim_world::runtime::Error> = Result<EtcdResult, E>;

impl<C: ServiceCaller> EtcdClient<C> {
    /// A client of the etcd process `etcd`, through `client`.
    pub fn new(client: C, etcd: ProcId) -> Self {
        EtcdClient { client, etcd }
    }

    async fn call(&self, op: EtcdOp) -> EtcdCallResult<C::Error> {
        self.client.call::<EtcdResult>(self.etcd, op).await
    }

    /// MemberList through the member on node `via` ([`EtcdOp::MemberList`]).
    pub async fn member_list(&self, via: String) -> EtcdCallResult<C::Error> {
        self.call(EtcdOp::MemberList { via }).await
    }

    /// ForwardEtcdLeadership ([`EtcdOp::ForwardLeadership`]).
    pub async fn forward_leadership(
        &self,
        leaving: String,
        candidate: Option<String>,
    ) -> EtcdCallResult<C::Error> {
        self.call(EtcdOp::ForwardLeadership { leaving, candidate })
            .await
    }

    /// MemberRemove of `name` ([`EtcdOp::RemoveMember`]).
    pub async fn remove_member(&self, name: String) -> EtcdCallResult<C::Error> {
        self.call(EtcdOp::RemoveMember { name }).await
    }

    /// Drop `name` from the ClusterStatus apiEndpoints ([`EtcdOp::RemoveEndpoint`]).
    pub async fn remove_endpoint(&self, name: String) -> EtcdCallResult<C::Error> {
        self.call(EtcdOp::RemoveEndpoint { name }).await
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Timer {
    /// Poll the cloud for control-plane instances.
    Poll,
    /// Apply and answer a request once its service time is over.
    Serve { from: ProcId, req: EtcdRequest },
    /// kubeadm's etcd wait is over for member `name`: update-status, then
    /// mark-control-plane.
    Mark { name: String },
}

/// What happened to the etcd cluster, for checkers and timelines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum EtcdEvent {
    Added {
        name: String,
        members: usize,
    },
    /// A member was removed; `members` is the count before the removal.
    Removed {
        name: String,
        members: usize,
    },
    LeaderMoved {
        to: String,
    },
    QuorumLost {
        up: usize,
        members: usize,
    },
    /// A leadership forward whose candidate had no NodeRef (the upstream panic).
    NilLeaderCandidate {
        leaving: String,
    },
}

/// One member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    pub name: String,
    pub instance: String,
    pub added_at: SimTime,
    pub up: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdConfig {
    pub poll_ms: u64,
    /// Service time of one call (client, port-forward, TLS, consensus).
    pub call_ms_min: u64,
    pub call_ms_max: u64,
    /// From a member's add to kubeadm's update-status and mark-control-plane (the wait
    /// for the new member to sync, "can take up to 40s").
    pub mark_ms_min: u64,
    pub mark_ms_max: u64,
}

impl Default for EtcdConfig {
    fn default() -> Self {
        EtcdConfig {
            poll_ms: 1_000,
            call_ms_min: 20,
            call_ms_max: 200,
            mark_ms_min: 2_000,
            mark_ms_max: 10_000,
        }
    }
}

/// The etcd cluster of the workload control plane.
#[derive(Debug)]
pub struct Etcd {
    config: EtcdConfig,
    endpoints: Endpoints,
    /// The cloud it polls for control-plane instances.
    cloud: ProcId,
    ids: ReqIds,
    /// By name (the node name).
    members: BTreeMap<String, Member>,
    /// Instances that ever joined: a removed member never rejoins.
    joined: BTreeSet<String>,
    leader: Option<String>,
    /// kubeadm ClusterStatus apiEndpoints (node names).
    cluster_status: BTreeSet<String>,
    next_id: u64,
    poll_in_flight: Option<u64>,
    /// Members past their etcd wait whose Node still needs the control-plane label.
    to_label: BTreeSet<String>,
    nodes_in_flight: Option<u64>,
    log: Vec<(SimTime, EtcdEvent)>,
    quorum_lost: Option<SimTime>,
    /// Grows with every change of what checkers read (members and whether they are up,
    /// the leader, the ClusterStatus, the log); polls and reads leave it
    /// ([`Component::changes`]).
    version: u64,
    /// The last poll's instances and `version` after it: a poll that answers the same
    /// instances (the very same, held here) to an unchanged etcd changes nothing, as
    /// the last one left nothing to do (it is skipped).
    last_poll: Option<(Vec<Hashed<Instance>>, u64)>,
}

impl Etcd {
    pub fn new(config: EtcdConfig, endpoints: Endpoints, cloud: ProcId) -> Self {
        Etcd {
            config,
            endpoints,
            cloud,
            ids: ReqIds::new(ETCD_TAG),
            members: BTreeMap::new(),
            joined: BTreeSet::new(),
            leader: None,
            cluster_status: BTreeSet::new(),
            next_id: 0,
            poll_in_flight: None,
            to_label: BTreeSet::new(),
            nodes_in_flight: None,
            log: Vec::new(),
            quorum_lost: None,
            version: 0,
            last_poll: None,
        }
    }

    // ----- ground truth for checkers ------------------------------------------------------

    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    pub fn cluster_status(&self) -> impl Iterator<Item = &str> {
        self.cluster_status.iter().map(String::as_str)
    }

    /// Every event so far, in order.
    pub fn log(&self) -> &[(SimTime, EtcdEvent)] {
        &self.log
    }

    /// When quorum was first lost, if ever.
    pub fn quorum_lost(&self) -> Option<SimTime> {
        self.quorum_lost
    }

    /// More than half of the members are up (an empty cluster has no quorum).
    pub fn has_quorum(&self) -> bool {
        let up = self.members.values().filter(|m| m.up).count();
        up * 2 > self.members.len()
    }

    // ----- the process ----------------------------------------------------------------------

    /// Starts and restarts (the data is durable: a crash is an outage of the model).
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        self.poll_in_flight = None;
        self.nodes_in_flight = None;
        ctx.set_timer(self.config.poll_ms, Msg::family_timer(Timer::Poll));
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        match msg {
            Msg::Request { id, body } => {
                let Ok(op) = body.take::<EtcdOp>() else {
                    return;
                };
                let req = EtcdRequest { id, op };
                let (lo, hi) = (self.config.call_ms_min, self.config.call_ms_max);
                let delay_ms = ctx.draw_ms(lo, hi);
                ctx.set_timer(delay_ms, Msg::family_timer(Timer::Serve { from, req }));
            }
            Msg::Response { id, body } if self.poll_in_flight == Some(id) => {
                self.poll_in_flight = None;
                if let Some(result) = body.typed::<CloudResult>() {
                    self.on_instances(result, ctx);
                }
            }
            Msg::ApiResp(resp) if self.nodes_in_flight == Some(resp.id) => {
                self.nodes_in_flight = None;
                if let Ok(ApiOk::List { items, .. }) = resp.result {
                    let ready: Vec<ObjectKey> = items
                        .iter()
                        .filter(|n| self.to_label.contains(&n.meta.name))
                        .map(|n| n.key())
                        .collect();
                    for key in ready {
                        self.to_label.remove(&key.name);
                        // mark-control-plane: a patch, with no precondition.
                        let id = self.ids.issue();
                        let op = ApiOp::Patch {
                            key,
                            ops: vec![PatchOp::SetLabel(
                                NODE_ROLE_MASTER_LABEL.to_string(),
                                Some(String::new()),
                            )],
                            resource_version: None,
                        };
                        ctx.send(self.endpoints.apiserver, Msg::Api(ApiRequest { id, op }));
                    }
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, t: Timer, ctx: &mut WorldCtx<'_>) {
        match t {
            Timer::Poll => {
                ctx.set_timer(self.config.poll_ms, Msg::family_timer(Timer::Poll));
                if self.poll_in_flight.is_some() {
                    return;
                }
                let id = self.ids.issue();
                self.poll_in_flight = Some(id);
                // Inserted, not `BTreeMap::from([..])`, which collects and sorts through
                // a Vec of its own: once a second (issue 33).
                let mut tag_filters = BTreeMap::new();
                tag_filters.insert(ROLE_TAG.0.to_string(), ROLE_TAG.1.to_string());
                let op = CloudOp::DescribeInstances {
                    ids: Vec::new(),
                    tag_filters,
                    states: Vec::new(),
                };
                ctx.send(self.cloud, Msg::request(id, op));
                // mark-control-plane waits for the kubelet to have registered the Node.
                if !self.to_label.is_empty() && self.nodes_in_flight.is_none() {
                    let id = self.ids.issue();
                    self.nodes_in_flight = Some(id);
                    let op = ApiOp::List {
                        kind: Node::KIND,
                        namespace: None,
                        from_watch_cache: false,
                    };
                    ctx.send(self.endpoints.apiserver, Msg::Api(ApiRequest { id, op }));
                }
            }
            Timer::Serve { from, req } => {
                let result = self.serve(req.op, ctx);
                ctx.send(from, Msg::response(req.id, result));
            }
            Timer::Mark { name } => {
                // A member removed during its wait: kubeadm join fails.
                if self.members.contains_key(&name) {
                    self.version += u64::from(self.cluster_status.insert(name.clone()));
                    ctx.note(|| format!("kubeadm: {name} joined the ClusterStatus"));
                    self.to_label.insert(name);
                }
            }
        }
    }

    /// The cloud's answer: which control-plane instances run.
    fn on_instances(&mut self, result: &CloudResult, ctx: &mut WorldCtx<'_>) {
        let Ok(instances) = result else {
            return;
        };
        // A pass leaves nothing for another over the same instances: members are up as
        // they run, the leader is kept, and every running instance has joined unless
        // quorum is lost (which a pass that joins nothing cannot restore).
        if let Some((last, version)) = &self.last_poll
            && *version == self.version
            && last.len() == instances.len()
            && last
                .iter()
                .zip(instances)
                .all(|(a, b)| Hashed::ptr_eq(a, b))
        {
            return;
        }
        self.poll(instances, ctx);
        self.last_poll = Some((instances.clone(), self.version));
    }

    fn poll(&mut self, instances: &[Hashed<Instance>], ctx: &mut WorldCtx<'_>) {
        let now = ctx.now();
        let running: BTreeMap<&str, &str> = instances
            .iter()
            .filter(|i| i.state == InstanceState::Running)
            .map(|i| (i.id.as_str(), i.node_name()))
            .collect();
        // Members whose instance stopped running are down.
        for m in self.members.values_mut() {
            let up = running.contains_key(m.instance.as_str());
            self.version += u64::from(m.up != up);
            m.up = up;
        }
        self.after_change(now);
        // Booted instances join (static etcd pod first), in launch order.
        for (id, node) in running {
            if self.joined.contains(id) || (!self.members.is_empty() && !self.has_quorum()) {
                continue;
            }
            self.joined.insert(id.to_string());
            self.version += 1;
            self.next_id += 1;
            self.members.insert(
                node.to_string(),
                Member {
                    id: self.next_id,
                    name: node.to_string(),
                    instance: id.to_string(),
                    added_at: now,
                    up: true,
                },
            );
            let mark_ms = ctx.draw_ms(self.config.mark_ms_min, self.config.mark_ms_max);
            ctx.set_timer(
                mark_ms,
                Msg::family_timer(Timer::Mark {
                    name: node.to_string(),
                }),
            );
            let members = self.members.len();
            ctx.note(|| format!("etcd: member {node} added ({members} members)"));
            self.log.push((
                now,
                EtcdEvent::Added {
                    name: node.to_string(),
                    members,
                },
            ));
            self.after_change(now);
        }
    }

    /// Keep the leader on an up member and record a loss of quorum.
    fn after_change(&mut self, now: SimTime) {
        let leader_ok = self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.get(l).is_some_and(|m| m.up));
        if !leader_ok && self.has_quorum() {
            let next = self
                .members
                .values()
                .filter(|m| m.up)
                .min_by_key(|m| m.id)
                .map(|m| m.name.clone());
            if next != self.leader
                && let Some(to) = next.clone()
            {
                self.log.push((now, EtcdEvent::LeaderMoved { to }));
            }
            self.version += u64::from(next != self.leader);
            self.leader = next;
        }
        if !self.members.is_empty() && !self.has_quorum() && self.quorum_lost.is_none() {
            let up = self.members.values().filter(|m| m.up).count();
            self.quorum_lost = Some(now);
            self.version += 1;
            self.log.push((
                now,
                EtcdEvent::QuorumLost {
                    up,
                    members: self.members.len(),
                },
            ));
        }
    }

    fn serve(&mut self, op: EtcdOp, ctx: &mut WorldCtx<'_>) -> Result<EtcdOk, EtcdError> {
        let now = ctx.now();
        match op {
            EtcdOp::MemberList { via } => {
                if !self.members.get(&via).is_some_and(|m| m.up) {
                    return Err(EtcdError::Unavailable);
                }
                if !self.has_quorum() {
                    return Err(EtcdError::NoQuorum);
                }
                let mut list: Vec<&Member> = self.members.values().collect();
                list.sort_by_key(|m| m.id);
                Ok(EtcdOk::Members {
                    names: list.iter().map(|m| m.name.clone()).collect(),
                    leader: self.leader.clone(),
                })
            }
            EtcdOp::ForwardLeadership { leaving, candidate } => {
                if !self.has_quorum() {
                    return Err(EtcdError::NoQuorum);
                }
                if self.leader.as_deref() != Some(leaving.as_str()) {
                    return Ok(EtcdOk::Done);
                }
                let Some(to) = candidate else {
                    ctx.note(|| format!("etcd: leadership forward from {leaving} to a candidate without a NodeRef (upstream panics)"));
                    self.log
                        .push((now, EtcdEvent::NilLeaderCandidate { leaving }));
                    self.version += 1;
                    return Err(EtcdError::NilCandidate);
                };
                if !self.members.get(&to).is_some_and(|m| m.up) {
                    return Err(EtcdError::NoSuchMember);
                }
                if to != leaving {
                    self.leader = Some(to.clone());
                    self.log.push((now, EtcdEvent::LeaderMoved { to }));
                    self.version += 1;
                }
                Ok(EtcdOk::Done)
            }
            EtcdOp::RemoveMember { name } => {
                if !self.has_quorum() {
                    return Err(EtcdError::NoQuorum);
                }
                if self.members.contains_key(&name) {
                    let members = self.members.len();
                    self.members.remove(&name);
                    self.version += 1;
                    ctx.note(|| format!("etcd: member {name} removed ({} left)", members - 1));
                    self.log.push((now, EtcdEvent::Removed { name, members }));
                    self.after_change(now);
                }
                Ok(EtcdOk::Done)
            }
            EtcdOp::RemoveEndpoint { name } => {
                self.version += u64::from(self.cluster_status.remove(&name));
                Ok(EtcdOk::Done)
            }
        }
    }
}

impl Component for Etcd {
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        Etcd::on_start(self, ctx)
    }
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        Etcd::on_msg(self, from, msg, ctx)
    }
    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        if let AnyTimer::Family(p) = t
            && let Ok(t) = p.take::<Timer>()
        {
            Etcd::on_timer(self, t, ctx)
        }
    }
    fn changes(&self) -> Option<u64> {
        Some(self.version)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
