//! The scenario file: what to build, what to do, which faults to draw, what to expect.
//!
//! A scenario is JSON (docs/scenario-format.md is the reference). Loading is strict:
//! unknown fields and bad values are rejected with the file, the JSON path of the field
//! and what was expected, and [`Scenario::validate`] checks what serde cannot (ranges,
//! names that must exist, a convergence bound that fits in the run). A scenario is also
//! embedded verbatim in every failure file, so it round-trips through serde.

use crate::family::FamilySection;
use reconsim_world::WorldFault;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// What a scenario expects of its seed budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// A buggy variant: some seed within the budget must violate an invariant.
    Violation,
    /// A fixed variant: every seed within the budget must hold.
    Clean,
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expect::Violation => "violation",
            Expect::Clean => "clean",
        })
    }
}

/// An inclusive range `[lo, hi]` drawn uniformly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "[u64; 2]", into = "[u64; 2]")]
pub struct Range {
    pub lo: u64,
    pub hi: u64,
}

impl From<[u64; 2]> for Range {
    fn from([lo, hi]: [u64; 2]) -> Self {
        Range { lo, hi }
    }
}

impl From<Range> for [u64; 2] {
    fn from(r: Range) -> Self {
        [r.lo, r.hi]
    }
}

impl Range {
    pub const fn fixed(v: u64) -> Self {
        Range { lo: v, hi: v }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub expect: Expect,
    /// The seed budget: seeds `0..seeds` are the scenario's contract.
    pub seeds: u64,
    pub duration_ms: u64,
    #[serde(default)]
    pub net: NetSpec,
    pub topology: Topology,
    #[serde(default)]
    pub cloud: CloudSpec,
    pub controllers: Controllers,
    #[serde(default)]
    pub workload: Vec<TimedAction>,
    #[serde(default)]
    pub faults: Vec<FaultGen>,
    /// Builtin invariant names, or names the binary registers (`extension`).
    pub invariants: Vec<InvariantName>,
    #[serde(default)]
    pub convergence: Option<ConvergenceSpec>,
    /// The users' controllers and invariants the scenario was loaded with
    /// ([`Scenario::load_with`]); not part of the file, empty for builtin loads.
    #[serde(skip)]
    pub extensions: crate::extension::Extensions,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetSpec {
    pub latency_ms: Range,
}

impl Default for NetSpec {
    fn default() -> Self {
        NetSpec {
            latency_ms: Range { lo: 1, hi: 5 },
        }
    }
}

/// The cluster's machines. Every node runs a kubelet; the API server, the controller
/// manager (node lifecycle, workloads), the cloud and the user each have their own host:
/// `api`, `controller-manager`, `cloud`, `user`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub control_plane_nodes: Vec<String>,
    #[serde(default)]
    pub worker_nodes: Vec<String>,
}

/// The cloud's timing (docs/semantics.md section 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloudSpec {
    pub boot_ms: Range,
    /// How long a new instance stays invisible to DescribeInstances.
    pub describe_lag_ms: Range,
    /// From running to its Node registering.
    pub join_ms: Range,
    pub terminate_ms: u64,
    /// Upper bound of the shutting-down time when it varies per instance (drawn in
    /// `[terminate_ms, terminate_ms_max]`); absent: always `terminate_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminate_ms_max: Option<u64>,
    /// Whether booted instances register Nodes at all.
    pub join: bool,
}

impl Default for CloudSpec {
    fn default() -> Self {
        CloudSpec {
            boot_ms: Range {
                lo: 10_000,
                hi: 30_000,
            },
            describe_lag_ms: Range {
                lo: 1_000,
                hi: 5_000,
            },
            join_ms: Range {
                lo: 60_000,
                hi: 120_000,
            },
            terminate_ms: 30_000,
            terminate_ms_max: None,
            join: true,
        }
    }
}

/// The controllers under test.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Controllers {
    #[serde(default)]
    pub machine_api: Option<MachineApiSpec>,
    #[serde(default)]
    pub kcp: Option<crate::kcp::KcpSpec>,
    #[serde(default)]
    pub mco: Option<crate::mco::McoSpec>,
    /// Controllers the binary registers (`extension`), one manager process each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom: Vec<crate::extension::CustomSpec>,
}

/// OpenShift machine-api (seed incident 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineApiSpec {
    pub variant: MachineApiVariant,
    /// Create instances with the Machine's uid as client token (the answer to the
    /// lease-expiry question).
    #[serde(default)]
    pub idempotent_create: bool,
    /// The node the controllers' pods start on.
    pub node: String,
    /// Per-pod exceptions to `node`, by Deployment name (`machineset-controller`,
    /// `machine-controller`).
    #[serde(default)]
    pub pod_nodes: std::collections::BTreeMap<String, String>,
    /// How long the pods tolerate an unreachable node (machine-api: 120 s).
    #[serde(default = "default_toleration_seconds")]
    pub toleration_seconds: u64,
    /// Lease timings for `leader-election` (default: 120 s / 110 s / 20 s).
    #[serde(default)]
    pub lease: Option<LeaseSpec>,
    pub machine_sets: Vec<MachineSetSpec>,
}

fn default_toleration_seconds() -> u64 {
    120
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MachineApiVariant {
    /// OpenShift 4.5 and earlier.
    NoLeaderElection,
    /// OpenShift 4.6: one Lease per controller.
    LeaderElection,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseSpec {
    pub lease_duration_ms: u64,
    pub renew_deadline_ms: u64,
    pub retry_period_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineSetSpec {
    pub name: String,
    #[serde(default)]
    pub replicas: u32,
}

/// A user action at a time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedAction {
    pub at_ms: u64,
    pub action: Action,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Set a MachineSet's spec.replicas.
    ScaleMachineSet { machine_set: String, replicas: u32 },
    /// Set the KubeadmControlPlane's spec.replicas (incident 2).
    ScaleKcp { replicas: u32 },
    /// Set the KubeadmControlPlane's spec.version: an upgrade (incident 2).
    UpgradeKcp { version: String },
    /// Create a source MachineConfig of a pool: a config change (incident 3).
    CreateMachineConfig {
        name: String,
        pool: String,
        content: std::collections::BTreeMap<String, String>,
    },
    /// An action of a custom controller (`controllers.custom`): the API call its
    /// registered action hook makes of `params`.
    Custom {
        controller: String,
        #[serde(default)]
        params: serde_json::Value,
    },
}

impl Action {
    /// The error for action `index` when the scenario runs no family that takes it.
    fn no_family(&self, index: usize) -> (String, String) {
        let at = |f: &str| format!(".workload[{index}].{f}");
        match self {
            Action::ScaleMachineSet { machine_set, .. } => (
                at("machine_set"),
                format!("a MachineSet of controllers.machine_api, not `{machine_set}`"),
            ),
            Action::ScaleKcp { .. } | Action::UpgradeKcp { .. } => (
                at("action"),
                "controllers.kcp for a KubeadmControlPlane action".into(),
            ),
            Action::CreateMachineConfig { .. } => (
                at("action"),
                "controllers.mco for a MachineConfig action".into(),
            ),
            Action::Custom { controller, .. } => (
                at("action.custom.controller"),
                format!("the name of a controllers.custom entry, not `{controller}`"),
            ),
        }
    }
}

/// A fault generator: `count` faults of one kind, each at a time drawn from `at_ms`,
/// lasting a time drawn from `duration_ms`, on targets drawn from its list. Each
/// generator draws from its own stream, so editing one never moves another's faults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultGen {
    pub count: Range,
    pub at_ms: Range,
    pub duration_ms: Range,
    pub fault: FaultKind,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultKind {
    /// Stop the kubelet of one of `nodes`; its containers keep running.
    KubeletStop { nodes: Vec<String> },
    /// Cut one host of `hosts_a` from every host of `hosts_b`.
    Partition {
        hosts_a: Vec<String>,
        hosts_b: Vec<String>,
        mode: PartitionChoice,
        #[serde(default)]
        one_way: bool,
    },
    /// Slow every message between one host of `hosts_a` and `hosts_b` (watch lag).
    SlowLink {
        hosts_a: Vec<String>,
        hosts_b: Vec<String>,
        extra_latency_ms: Range,
    },
    /// Stop the world for one of `processes` (a GC pause, a frozen VM).
    Pause { processes: Vec<String> },
    /// Freeze one of `hosts` (a frozen VM): every process on it pauses.
    PauseHost { hosts: Vec<String> },
    /// Crash one of `processes`; it restarts cold when the fault ends.
    Crash { processes: Vec<String> },
    /// New instances stay invisible to DescribeInstances this much longer.
    CloudDescribeLag { lag_ms: Range },
    /// Booted instances take this much longer to register their Node.
    NodeJoinDelay { extra_ms: Range },
    /// The API server's watch events leave this much after the write's response.
    WatchLag { lag_ms: Range },
}

impl FaultKind {
    /// The kind's name in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::KubeletStop { .. } => "kubelet_stop",
            FaultKind::Partition { .. } => "partition",
            FaultKind::SlowLink { .. } => "slow_link",
            FaultKind::Pause { .. } => "pause",
            FaultKind::PauseHost { .. } => "pause_host",
            FaultKind::Crash { .. } => "crash",
            FaultKind::CloudDescribeLag { .. } => "cloud_describe_lag",
            FaultKind::NodeJoinDelay { .. } => "node_join_delay",
            FaultKind::WatchLag { .. } => "watch_lag",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionChoice {
    Drop,
    Hold,
    /// Drawn per fault.
    Either,
}

pub use crate::extension::InvariantName;

/// After the last fault heals and the last user action, the desired state must be
/// reached within `within_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvergenceSpec {
    pub within_ms: u64,
}

/// A scenario that could not be loaded: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    pub file: String,
    /// The JSON path of the offending field (`.` for the document).
    pub path: String,
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: at {}: {}", self.file, self.path, self.message)
    }
}

impl std::error::Error for LoadError {}

/// The world faults a plan can hold (re-exported for plan files).
pub type Plan = reconsim_sim::FaultPlan<WorldFault>;

/// Hosts every world has besides its nodes.
pub const FIXED_HOSTS: [&str; 4] = ["api", "controller-manager", "cloud", "user"];

/// Read a JSON file into `T`; errors name the file and the JSON path.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LoadError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| LoadError {
        file: file.clone(),
        path: ".".into(),
        message: format!("cannot read: {e}"),
    })?;
    parse_json(&file, &text)
}

/// Parse JSON into `T`; errors name `file` and the JSON path.
pub fn parse_json<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, LoadError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| LoadError {
        file: file.to_string(),
        path: json_path(&e.path().to_string()),
        message: e.inner().to_string(),
    })
}

impl Scenario {
    /// Read and validate a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, LoadError> {
        Self::load_with(path, &crate::extension::Extensions::default())
    }

    /// Read and validate a scenario file that may name the controllers and invariants
    /// `extensions` registers; the scenario keeps them for its runs.
    pub fn load_with(
        path: &Path,
        extensions: &crate::extension::Extensions,
    ) -> Result<Scenario, LoadError> {
        let mut scenario: Scenario = read_json(path)?;
        scenario.extensions = extensions.clone();
        scenario.validate().map_err(|(p, message)| LoadError {
            file: path.display().to_string(),
            path: p,
            message,
        })?;
        Ok(scenario)
    }

    /// Parse and validate scenario JSON; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, LoadError> {
        Self::parse_with(file, text, &crate::extension::Extensions::default())
    }

    /// [`Scenario::parse`] with the controllers and invariants `extensions` registers.
    pub fn parse_with(
        file: &str,
        text: &str,
        extensions: &crate::extension::Extensions,
    ) -> Result<Scenario, LoadError> {
        let mut scenario: Scenario = parse_json(file, text)?;
        scenario.extensions = extensions.clone();
        scenario.validate().map_err(|(path, message)| LoadError {
            file: file.to_string(),
            path,
            message,
        })?;
        Ok(scenario)
    }

    /// Every host name of the world this scenario builds.
    pub fn hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = FIXED_HOSTS.iter().map(|h| h.to_string()).collect();
        hosts.extend(self.topology.control_plane_nodes.iter().cloned());
        hosts.extend(self.topology.worker_nodes.iter().cloned());
        hosts
    }

    /// The names of the processes the scenario starts with (targets of faults).
    pub fn processes(&self) -> Vec<String> {
        let mut procs = vec![
            "apiserver".to_string(),
            "cloud".to_string(),
            "node-lifecycle".to_string(),
            "workloads".to_string(),
        ];
        for n in self.nodes() {
            procs.push(format!("kubelet/{n}"));
        }
        for family in self.families() {
            procs.extend(family.processes());
        }
        procs
    }

    /// The sections of the families the scenario runs, each through the one family
    /// interface, in a fixed order: machine-api, MCO, KCP, the custom entries.
    pub fn families(&self) -> Vec<Box<dyn FamilySection + '_>> {
        let c = &self.controllers;
        let mut out: Vec<Box<dyn FamilySection + '_>> = Vec::new();
        if let Some(m) = &c.machine_api {
            out.push(Box::new(m));
        }
        if let Some(m) = &c.mco {
            out.push(Box::new(m));
        }
        if let Some(k) = &c.kcp {
            out.push(Box::new(k));
        }
        if !c.custom.is_empty() {
            out.push(Box::new(crate::extension::Custom(self)));
        }
        out
    }

    pub fn nodes(&self) -> impl Iterator<Item = &String> {
        self.topology
            .control_plane_nodes
            .iter()
            .chain(self.topology.worker_nodes.iter())
    }

    /// When the last scripted thing happens: the last user action or the latest end of
    /// any fault a generator can draw.
    pub fn last_scripted_ms(&self) -> u64 {
        let actions = self.workload.iter().map(|a| a.at_ms);
        let faults = self
            .faults
            .iter()
            .map(|f| f.at_ms.hi.saturating_add(f.duration_ms.hi));
        actions.chain(faults).max().unwrap_or(0)
    }

    /// Checks serde cannot make: `Err((json path, what was expected))`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let err = |path: &str, msg: String| Err((path.to_string(), msg));
        if self.name.is_empty() {
            return err(".name", "a non-empty name".into());
        }
        if self.seeds == 0 {
            return err(".seeds", "a seed budget of at least 1".into());
        }
        if self.duration_ms == 0 {
            return err(".duration_ms", "a positive duration".into());
        }
        check_range(".net.latency_ms", self.net.latency_ms)?;
        check_range(".cloud.boot_ms", self.cloud.boot_ms)?;
        check_range(".cloud.describe_lag_ms", self.cloud.describe_lag_ms)?;
        check_range(".cloud.join_ms", self.cloud.join_ms)?;
        if self
            .cloud
            .terminate_ms_max
            .is_some_and(|m| m < self.cloud.terminate_ms)
        {
            return err(".cloud.terminate_ms_max", "a value >= terminate_ms".into());
        }
        if self.topology.control_plane_nodes.is_empty() {
            return err(
                ".topology.control_plane_nodes",
                "at least one control-plane node".into(),
            );
        }
        let hosts = self.hosts();
        let mut seen = std::collections::BTreeSet::new();
        for (i, h) in hosts.iter().enumerate() {
            if !seen.insert(h) {
                let path = if i < FIXED_HOSTS.len() + self.topology.control_plane_nodes.len() {
                    ".topology.control_plane_nodes"
                } else {
                    ".topology.worker_nodes"
                };
                return err(
                    path,
                    format!("unique node names not clashing with {FIXED_HOSTS:?}; `{h}` is taken"),
                );
            }
        }
        if self.controllers.machine_api.is_none()
            && self.controllers.mco.is_none()
            && self.controllers.kcp.is_none()
            && self.controllers.custom.is_empty()
        {
            return err(
                ".controllers",
                "at least one controller (machine_api, kcp, mco or custom)".into(),
            );
        }
        for family in self.families() {
            family.validate(self)?;
        }
        crate::extension::validate_invariants(self)?;
        let families = self.families();
        for (i, a) in self.workload.iter().enumerate() {
            match families.iter().find_map(|f| f.action(self, i)) {
                Some(r) => {
                    r?;
                }
                None => return Err(a.action.no_family(i)),
            }
            if a.at_ms > self.duration_ms {
                return err(
                    &format!(".workload[{i}].at_ms"),
                    "a time within duration_ms".into(),
                );
            }
        }
        let processes = self.processes();
        for (i, f) in self.faults.iter().enumerate() {
            let at = |field: &str| format!(".faults[{i}].{field}");
            let kind = f.fault.name();
            let kat = |field: &str| format!(".faults[{i}].fault.{kind}.{field}");
            check_range(&at("count"), f.count)?;
            check_range(&at("at_ms"), f.at_ms)?;
            check_range(&at("duration_ms"), f.duration_ms)?;
            if f.count.hi > 64 {
                return err(&at("count"), "at most 64 faults per generator".into());
            }
            let names_in = |field: &str, names: &[String], known: &[String]| {
                if names.is_empty() {
                    return err(&kat(field), "a non-empty list".into());
                }
                for (j, n) in names.iter().enumerate() {
                    if !known.contains(n) {
                        return err(
                            &format!("{}[{j}]", kat(field)),
                            format!("one of {known:?}, not `{n}`"),
                        );
                    }
                }
                Ok(())
            };
            let nodes: Vec<String> = self.nodes().cloned().collect();
            match &f.fault {
                FaultKind::KubeletStop { nodes: ns } => names_in("nodes", ns, &nodes)?,
                FaultKind::Partition {
                    hosts_a, hosts_b, ..
                } => {
                    names_in("hosts_a", hosts_a, &hosts)?;
                    names_in("hosts_b", hosts_b, &hosts)?;
                }
                FaultKind::SlowLink {
                    hosts_a,
                    hosts_b,
                    extra_latency_ms,
                } => {
                    names_in("hosts_a", hosts_a, &hosts)?;
                    names_in("hosts_b", hosts_b, &hosts)?;
                    check_range(&kat("extra_latency_ms"), *extra_latency_ms)?;
                }
                FaultKind::Pause { processes: ps } | FaultKind::Crash { processes: ps } => {
                    names_in("processes", ps, &processes)?
                }
                FaultKind::PauseHost { hosts: hs } => names_in("hosts", hs, &hosts)?,
                FaultKind::CloudDescribeLag { lag_ms } => check_range(&kat("lag_ms"), *lag_ms)?,
                FaultKind::NodeJoinDelay { extra_ms } => check_range(&kat("extra_ms"), *extra_ms)?,
                FaultKind::WatchLag { lag_ms } => check_range(&kat("lag_ms"), *lag_ms)?,
            }
        }
        if self.invariants.is_empty() {
            return err(".invariants", "at least one invariant".into());
        }
        if let Some(c) = self.convergence
            && self.last_scripted_ms().saturating_add(c.within_ms) > self.duration_ms
        {
            return err(
                ".convergence.within_ms",
                format!(
                    "a bound that ends within duration_ms ({} ms): the last action or fault can end at {} ms",
                    self.duration_ms,
                    self.last_scripted_ms()
                ),
            );
        }
        Ok(())
    }
}

fn check_range(path: &str, r: Range) -> Result<(), (String, String)> {
    if r.lo > r.hi {
        return Err((
            path.to_string(),
            format!("[lo, hi] with lo <= hi, not [{}, {}]", r.lo, r.hi),
        ));
    }
    Ok(())
}

/// serde_path_to_error writes `a.b[0].c`; we print `.a.b[0].c`.
fn json_path(p: &str) -> String {
    if p == "." || p.is_empty() {
        ".".to_string()
    } else {
        format!(".{p}")
    }
}
