//! machine-config-operator objects and the components that serve configs to booting
//! machines (seed incident 3: openshift/machine-config-operator issue #301, GC tracked in
//! #354, bootstrap fix PR #355; facts in SEED-FACTS.md section 3).
//!
//! The parts live in submodules, and everything public is re-exported here:
//! - `objects`: MachineConfig and MachineConfigPool, the annotations and labels they carry,
//!   rendered names, merges, selectors and object constructors;
//! - `messages`: what machines and config servers send each other, their timers, and the
//!   periods and timeouts of their requests;
//! - `server`: the Machine Config Server ([`MachineConfigServer`]), bootstrap or in-cluster;
//! - `machine`: one machine's process ([`McoMachine`]): timing, phases, state, dispatch;
//! - `steps`: a machine's steps, from Ignition's fetch through the daemon's updates;
//! - `lease`: the machine's kubelet heartbeat on its node Lease.
//!
//! The GC policies and the render and node controllers live in
//! `crate::controllers`; the checker in `crate::invariants`.

mod lease;
mod machine;
mod messages;
mod objects;
mod server;
mod steps;

pub use machine::{After, MachineConfigSpec, MachineTiming, McoMachine, Phase};
pub use messages::{
    DAEMON_CONFIG_TIMEOUT_MS, DAEMON_POLL_MS, FETCH_RETRY_MS, MACHINE_REQUEST_TIMEOUT_MS, MCO_TAG,
    MachineTimer, McoMsg, Timer,
};
pub use objects::{
    ANNOTATION_CURRENT, ANNOTATION_DESIRED, ANNOTATION_GENERATED_BY, ANNOTATION_POINTED_AT_PREFIX,
    ANNOTATION_REASON, ANNOTATION_SERVED_TO_PREFIX, ANNOTATION_STATE, LABEL_OS_ID, LABEL_ROLE,
    MachineConfig, MachineConfigPool, MachineConfigPoolSpec, MachineConfigPoolStatus,
    STATE_DEGRADED, STATE_DONE, STATE_WORKING, merge, node_config, node_labels, pointed_records,
    pool_object, rendered_name, rendered_object, role_selector, served_records, source_object,
};
pub use server::{MachineConfigServer, ServerMode};
