//! The machine-api Machine controller with its AWS actuator, as in OpenShift release-4.5
//! (SEED-FACTS.md section 1: openshift/machine-api-operator
//! pkg/controller/machine/controller.go; openshift/cluster-api-provider-aws
//! pkg/actuators/machine/{reconciler,instances,utils}.go).
//!
//! One reconcile of a Machine:
//! - no finalizer yet: add it (Update) and end; the write brings the next reconcile;
//! - being deleted: look the instances up, terminate what was found, look again; while
//!   one exists requeue after 20 s; then remove the finalizer;
//! - phase Failed: nothing;
//! - an instance exists: record providerID/instanceId and phase Provisioned if any of
//!   them is not so yet (a merge patch, no resourceVersion precondition); requeue after
//!   20 s while it is pending;
//! - none exists but providerID is set: within 20 s of the last status update it may be
//!   AWS's eventual consistency, so requeue after 20 s; after that the machine is Failed
//!   ("Can't find created instance");
//! - none exists: phase Provisioning, RunInstances tagged `Name=<machine>` (no client
//!   token: none in any release), record providerID and instanceId, requeue after 30 s.
//!
//! The lookup: by providerStatus.instanceId when set (falling back to the tag lookup when
//! the id is not found yet), else DescribeInstances by tag `Name=<machine>` and the
//! cluster's owned tag in states pending, running, stopping, stopped, shutting-down. So
//! once instanceId is set, deletion terminates that instance only, and a second instance
//! with the same Name tag leaks.
//!
//! [`MachineOptions::idempotent_create`] is the variant this project adds to answer the
//! incident's open question (docs/seeds/machine-api.md): RunInstances with the Machine's
//! uid as client token, and no create while instanceId is already recorded.

use crate::kinds::{Machine, MachineFields};
use reconsim_cloud::{CloudResult, Ec2, Instance, InstanceState};
use reconsim_sim::{Hashed, ProcId};
use reconsim_world::api::PatchOp;
use reconsim_world::manager::Reconciler;
use reconsim_world::object::Object;
use reconsim_world::runtime::{Action, Api, Client, Controller, Error, PatchParams, PostParams};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub const FINALIZER: &str = "machine.machine.openshift.io";
/// The tag every instance of the cluster carries (`kubernetes.io/cluster/<infra-id>`).
pub const CLUSTER_TAG: &str = "kubernetes.io/cluster/reconsim";
pub const NAME_TAG: &str = "Name";
/// requeueAfterSeconds of the AWS actuator.
pub const REQUEUE_AFTER_MS: u64 = 20_000;
/// The machine controller's requeue after a create.
pub const REQUEUE_AFTER_CREATE_MS: u64 = 30_000;
pub const ZONE: &str = "us-east-1a";

/// Behaviour switches of the machine controller (variants are parameters, not copies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineOptions {
    /// Use the Machine's uid as RunInstances client token and never create while an
    /// instanceId is recorded.
    #[serde(default)]
    pub idempotent_create: bool,
}

/// The controller's context: its client, its variant, the cloud API it calls. It keeps
/// nothing else between reconciles.
pub struct MachineCtx {
    client: Client,
    options: MachineOptions,
    ec2: Ec2,
}

/// The Machine controller (For(Machine)), hosted by a manager.
pub fn controller(options: MachineOptions, cloud: ProcId) -> Box<dyn Reconciler> {
    Controller::new::<Machine>("machine-controller").run(
        reconcile,
        error_policy,
        move |client: Client| MachineCtx {
            ec2: Ec2::new(client.clone(), cloud),
            client,
            options,
        },
    )
}

/// An error requeues with the work queue's backoff, as controller-runtime's does.
fn error_policy(_: Arc<Object>, _: &Error, _: Arc<MachineCtx>) -> Action {
    Action::rate_limited()
}

/// One reconcile of a Machine (the module's doc lists the branches).
async fn reconcile(m: Arc<Object>, ctx: Arc<MachineCtx>) -> Result<Action, Error> {
    let machines: Api<Machine> = Api::namespaced(ctx.client.clone(), &m.meta.namespace);
    if !m.meta.is_deleting() && !m.meta.has_finalizer(FINALIZER) {
        let mut next = (*m).clone();
        next.meta.finalizers.push(FINALIZER.into());
        machines.replace(&PostParams::default(), next).await?;
        return Ok(Action::await_change());
    }
    if m.meta.is_deleting() {
        if !m.meta.has_finalizer(FINALIZER) {
            return Ok(Action::await_change());
        }
        let found = lookup(&ctx, &m).await?;
        if !found.is_empty() {
            let ids = found.iter().map(|i| i.id.clone()).collect();
            refused(ctx.ec2.terminate_instances(ids).await?)?;
        }
        if !lookup(&ctx, &m).await?.is_empty() {
            // "can't proceed deleting machine while cloud instance is being terminated"
            return Ok(Action::requeue(Duration::from_millis(REQUEUE_AFTER_MS)));
        }
        let mut next = (*m).clone();
        next.meta.finalizers.retain(|f| f != FINALIZER);
        machines.replace(&PostParams::default(), next).await?;
        return Ok(Action::await_change());
    }
    if status(&m).phase.as_deref() == Some("Failed") {
        return Ok(Action::await_change());
    }
    let found = lookup(&ctx, &m).await?;
    if found.is_empty() {
        missing(&ctx, &machines, m).await
    } else {
        exists(&ctx, &machines, &m, &found).await
    }
}

/// An instance exists: record it, requeue while it is pending.
async fn exists(
    ctx: &MachineCtx,
    machines: &Api<Machine>,
    m: &Object,
    instances: &[Hashed<Instance>],
) -> Result<Action, Error> {
    let newest = newest_running(instances);
    let next = if newest.state == InstanceState::Pending {
        Action::requeue(Duration::from_millis(REQUEUE_AFTER_MS))
    } else {
        Action::await_change()
    };
    let spec = &m.typed::<Machine>().expect("a Machine").spec;
    // The real controller's setPhase(Provisioned) on every reconcile that finds the
    // instance with no Node yet (release-4.5 controller.go; there is no nodeRef in the
    // model, so never Running): a Machine whose id was recorded by the create is
    // Provisioned too, whatever history led there.
    if status(m).instance_id.as_deref() == Some(&newest.id)
        && spec.provider_id.as_deref() == Some(&provider_id(newest))
        && status(m).phase.as_deref() == Some("Provisioned")
    {
        return Ok(next);
    }
    let op = fields(ctx, Some(newest), Some("Provisioned"), None);
    machines
        .patch(&m.meta.name, &PatchParams::default(), vec![op])
        .await?;
    Ok(next)
}

/// No instance: grace period, Failed, or create.
async fn missing(
    ctx: &MachineCtx,
    machines: &Api<Machine>,
    mut m: Arc<Object>,
) -> Result<Action, Error> {
    let st = status(&m);
    let provider_set = m
        .typed::<Machine>()
        .expect("a Machine")
        .spec
        .provider_id
        .is_some();
    let pp = PatchParams::default();
    if provider_set {
        let fresh = st
            .last_updated
            .is_none_or(|t| t.plus_ms(REQUEUE_AFTER_MS) > ctx.client.now());
        if fresh {
            // "Possible eventual-consistency discrepancy; returning an error to requeue"
            return Ok(Action::requeue(Duration::from_millis(REQUEUE_AFTER_MS)));
        }
        let op = fields(
            ctx,
            None,
            Some("Failed"),
            Some("Can't find created instance."),
        );
        machines.patch(&m.meta.name, &pp, vec![op]).await?;
        return Ok(Action::await_change());
    }
    if ctx.options.idempotent_create && st.instance_id.is_some() {
        return Err(Error::Service(
            "instanceId is set: not creating again".into(),
        ));
    }
    if st.phase.as_deref() != Some("Provisioning") {
        let op = fields(ctx, None, Some("Provisioning"), None);
        m = machines.patch(&m.meta.name, &pp, vec![op]).await?;
    }
    let client_token = ctx
        .options
        .idempotent_create
        .then(|| format!("{}", m.meta.uid.0));
    let tags = instance_tags(&m.meta.name);
    let created = refused(ctx.ec2.run_instances(tags, client_token).await?)?;
    let Some(instance) = created.first() else {
        return Err(Error::Service("RunInstances launched nothing".into()));
    };
    // Between the launch and the record of its id: a crash here leaves an instance no
    // Machine names.
    ctx.client.failpoint("after-run-instances").await?;
    let op = fields(ctx, Some(instance), None, None);
    machines.patch(&m.meta.name, &pp, vec![op]).await?;
    Ok(Action::requeue(Duration::from_millis(
        REQUEUE_AFTER_CREATE_MS,
    )))
}

/// The cloud's own refusal is an error of the reconcile.
fn refused(answer: CloudResult) -> Result<Vec<Hashed<Instance>>, Error> {
    answer.map_err(|e| Error::Service(format!("{e:?}")))
}

/// The instances of a Machine: by its recorded instanceId, falling back to its tags when
/// the id is unknown (yet).
async fn lookup(ctx: &MachineCtx, m: &Object) -> Result<Vec<Hashed<Instance>>, Error> {
    let ec2 = &ctx.ec2;
    if let Some(id) = status(m).instance_id.clone() {
        let by_id = ec2.describe_instances(vec![id], BTreeMap::new(), live_states());
        if let Ok(found) = by_id.await? {
            return Ok(found);
        }
    }
    let by_tag = ec2.describe_instances(vec![], instance_tags(&m.meta.name), live_states());
    refused(by_tag.await?)
}

/// The machine-api merge patch of the provider fields and status.
fn fields(
    ctx: &MachineCtx,
    instance: Option<&Instance>,
    phase: Option<&str>,
    error: Option<&str>,
) -> PatchOp {
    PatchOp::from(MachineFields {
        provider_id: instance.map(provider_id),
        instance_id: instance.map(|i| i.id.clone()),
        internal_dns: instance.map(|i| i.private_dns_name.clone()),
        phase: phase.map(str::to_string),
        error_message: error.map(str::to_string),
        last_updated: Some(ctx.client.now()),
    })
}

fn status(m: &Object) -> &crate::kinds::MachineStatus {
    &m.typed::<Machine>().expect("a Machine").status
}

/// The states the actuator's lookup asks for: everything but terminated.
fn live_states() -> Vec<InstanceState> {
    vec![
        InstanceState::Pending,
        InstanceState::Running,
        InstanceState::Stopping,
        InstanceState::Stopped,
        InstanceState::ShuttingDown,
    ]
}

/// The tags a machine's instance carries, which are also its lookup filter.
pub fn instance_tags(machine: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_TAG.to_string(), machine.to_string()),
        (CLUSTER_TAG.to_string(), "owned".to_string()),
    ])
}

pub fn provider_id(i: &Instance) -> String {
    format!("aws:///{ZONE}/{}", i.id)
}

/// The newest running instance, else the newest (sortInstances: by launch time, newest
/// first; ties by id).
fn newest_running(instances: &[Hashed<Instance>]) -> &Instance {
    let newest = |a: &&Hashed<Instance>, b: &&Hashed<Instance>| {
        (a.launch_time, &a.id).cmp(&(b.launch_time, &b.id))
    };
    instances
        .iter()
        .filter(|i| i.state == InstanceState::Running)
        .max_by(newest)
        .or_else(|| instances.iter().max_by(newest))
        .expect("called with at least one instance")
}
