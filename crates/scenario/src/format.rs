//! The scenario file: what to build, what to do, which faults to draw, what to expect.
//!
//! A scenario is JSON (docs/scenario-format.md is the reference). Loading is strict:
//! unknown fields and bad values are rejected with the file, the JSON path of the field
//! and what was expected, and [`Scenario::validate`] checks what serde cannot (ranges,
//! names that must exist, a convergence bound that fits in the run). A scenario is also
//! embedded verbatim in every failure file, so it round-trips through serde.
//!
//! One grammar for every family: a scenario is loaded with a registry
//! ([`reconsim_family::Families`]); each key of `controllers` names a registered family,
//! which parses its section into its own type, and each workload action
//! `{"<name>": params}` is made by the family that declares `name`. The cluster's own
//! parts (topology, network, cloud, faults) are this file's.

use crate::controllers::Controllers;
use crate::extension::CustomSection;
use indexmap::IndexMap;
use reconsim_family::{Context, Families, FamilySection, ParamError, WorkloadAction};
use reconsim_world::WorldFault;
use reconsim_world::api::ApiOp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::path::Path;

pub use reconsim_family::{LeaseSpec, Range};

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

/// A loaded scenario: validated, its families' sections parsed, and the registry it was
/// loaded with kept for its runs ([`Scenario::families`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub expect: Expect,
    /// The seed budget: seeds `0..seeds` are the scenario's contract.
    pub seeds: u64,
    pub duration_ms: u64,
    pub net: NetSpec,
    /// The API server's timing (absent: the default watch latency, 1-20 ms).
    #[serde(skip_serializing_if = "ApiServerSpec::is_default")]
    pub apiserver: ApiServerSpec,
    pub topology: Topology,
    pub cloud: CloudSpec,
    pub controllers: Controllers,
    pub workload: Vec<TimedAction>,
    pub faults: Vec<FaultGen>,
    /// Names of invariants the registry knows (any family's).
    pub invariants: Vec<String>,
    pub convergence: Option<ConvergenceSpec>,
    /// The families the scenario was loaded with; not part of the file.
    #[serde(skip)]
    families: Families,
}

/// A scenario file as serde reads it, before its families parse their sections.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: String,
    #[serde(default)]
    description: String,
    expect: Expect,
    seeds: u64,
    duration_ms: u64,
    #[serde(default)]
    net: NetSpec,
    #[serde(default)]
    apiserver: ApiServerSpec,
    topology: Topology,
    #[serde(default)]
    cloud: CloudSpec,
    controllers: IndexMap<String, Value>,
    #[serde(default)]
    workload: Vec<TimedAction>,
    #[serde(default)]
    faults: Vec<FaultGen>,
    invariants: Vec<String>,
    #[serde(default)]
    convergence: Option<ConvergenceSpec>,
}

impl ScenarioFile {
    /// Each section parsed by its family, in the registry's order.
    fn into_scenario(
        self,
        families: &Families,
        base: Option<&Path>,
    ) -> Result<Scenario, ParamError> {
        let mut sections = Vec::with_capacity(self.controllers.len());
        for (name, value) in &self.controllers {
            // A family not run: files written before 0.4.0 wrote every builtin one,
            // `null` when absent.
            if value.is_null() {
                continue;
            }
            let at = format!(".controllers.{name}");
            let Some((position, family)) = families.get(name) else {
                return Err(ParamError::at(
                    at,
                    format!(
                        "a family this binary registers ({}), not `{name}`; a scenario with families of its own runs with the binary that registers them (docs/guide/writing-a-reconciler.md)",
                        known(&families.names())
                    ),
                ));
            };
            let section = family.parse_in(value, base).map_err(|e| e.under(&at))?;
            sections.push((position, name.clone(), section));
        }
        sections.sort_by_key(|(position, _, _)| *position);
        let custom = sections
            .iter()
            .find_map(|(_, _, s)| s.as_any().downcast_ref::<CustomSection>());
        let mut faults = self.faults;
        for (i, g) in faults.iter_mut().enumerate() {
            if let FaultKind::Operation {
                controller,
                objects,
                operations,
                action,
                space,
            } = &mut g.fault
            {
                let at = format!(".faults[{i}].fault.operation");
                *space = match action {
                    None => crate::operations::resolve(custom, controller, objects, operations),
                    Some(action) => {
                        let of_section = |family: &str| {
                            sections
                                .iter()
                                .find(|(_, name, _)| name == family)
                                .map(|(_, _, s)| &**s)
                        };
                        crate::operations::of_action(
                            action,
                            controller.is_empty() && objects.is_empty() && operations.is_empty(),
                            families,
                            of_section,
                        )
                    }
                }
                .map_err(|e| e.under(&at))?;
            }
        }
        Ok(Scenario {
            name: self.name,
            description: self.description,
            expect: self.expect,
            seeds: self.seeds,
            duration_ms: self.duration_ms,
            net: self.net,
            apiserver: self.apiserver,
            topology: self.topology,
            cloud: self.cloud,
            controllers: Controllers::new(
                sections
                    .into_iter()
                    .map(|(_, name, section)| (name, section))
                    .collect(),
            ),
            workload: self.workload,
            faults,
            invariants: self.invariants,
            convergence: self.convergence,
            families: families.clone(),
        })
    }
}

/// Names for an error message: `a, b, c`, or `none`.
pub(crate) fn known(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
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

/// The API server's timing (docs/semantics.md 3.19).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiServerSpec {
    /// How long each watch event waits in its type's watch cache after the write, drawn
    /// per event: a write's response can then reach its writer before its own event,
    /// and two types' events cross. Absent: the default, 1-20 ms
    /// (`reconsim_world::apiserver::DEFAULT_WATCH_DELAY_MS`); `[0, 0]`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_delay_ms: Option<Range>,
}

impl ApiServerSpec {
    fn is_default(&self) -> bool {
        *self == ApiServerSpec::default()
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
    /// Whether the cluster runs the cloud provider's node lifecycle controller, which
    /// deletes the Nodes of gone instances (docs/semantics.md 6.7). A cluster without a
    /// cloud provider (a kind or CAPD test cluster) keeps such a Node NotReady forever.
    #[serde(default = "yes")]
    pub node_lifecycle: bool,
    /// How many private addresses the instances' subnet has, from `10.0.0.1` (1 to
    /// 16,777,214). An instance holds one until it is terminated; then a later launch can
    /// get it, and with it the terminated instance's Node name (docs/semantics.md 6.8).
    /// Absent: all of `10.0.0.0/8`, so no name is reused, as before 0.7.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_size: Option<u32>,
}

fn yes() -> bool {
    true
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
            node_lifecycle: true,
            subnet_size: None,
        }
    }
}

/// A user action at a time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedAction {
    pub at_ms: u64,
    pub action: Action,
}

/// A workload action as files write it, `{"<name>": params}`: the family that declares
/// `name` ([`reconsim_family::Family::actions`]) parses `params` and makes the API call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    pub name: String,
    pub params: Value,
}

impl Action {
    pub fn new(name: &str, params: Value) -> Self {
        Action {
            name: name.to_string(),
            params,
        }
    }
}

impl Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry(&self.name, &self.params)?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = IndexMap::<String, Value>::deserialize(d)?;
        let mut entries = map.into_iter();
        match (entries.next(), entries.next()) {
            (Some((name, params)), None) => Ok(Action { name, params }),
            _ => Err(serde::de::Error::custom(
                "an object with one key, the action's name, whose value is its params",
            )),
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
    /// Someone outside the cluster terminates one instance: the `launch`-th launched (a
    /// number drawn from the range, from 1), or without `launch` the oldest not yet
    /// terminated; with `tag` (`key=value`, or `key`) only one carrying it. Its address
    /// goes back to the subnet (docs/semantics.md 6.8); the fault's end undoes nothing.
    TerminateInstance {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        launch: Option<Range>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tag: Option<String>,
    },
    /// The API server's watch events leave this much after the write's response: every
    /// type's, or those of one of `kinds` (each type has its own watch cache).
    WatchLag {
        lag_ms: Range,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        kinds: Vec<String>,
    },
    /// One of `processes` (controller hosts) gets its watch events this much later,
    /// while its requests and their answers go at the usual pace.
    WatchStall {
        processes: Vec<String>,
        lag_ms: Range,
    },
    /// Arm failpoint `name` in one of `processes` from the fault's start to its end: its
    /// hit number `hit` (drawn) crashes the process there (restarting `for_ms` later),
    /// returns an error, or stalls the reconcile `for_ms`.
    Failpoint {
        processes: Vec<String>,
        name: String,
        hit: Range,
        action: FailpointChoice,
        #[serde(default = "default_failpoint_ms")]
        for_ms: Range,
    },
    /// A user's operation on an object `controller`'s entry seeds (those `objects`
    /// names, or every one whose kind has a schema): one of `operations` (absent: all),
    /// its field and values drawn from the kind's schema ([`crate::operations`]). It
    /// starts at the fault's start; a rollback, a re-create or a label's removal comes
    /// at its end. Or, with `action` instead of `controller`, a workload action of the
    /// scenario's families, made at the fault's start (a time drawn, or an event search
    /// places it at).
    Operation {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        controller: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        objects: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        operations: Vec<crate::operations::OperationChoice>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<Action>,
        /// Read from the controller's kinds (or made from the action) at load.
        #[serde(skip)]
        space: crate::operations::Space,
    },
}

/// What an armed failpoint does at its hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailpointChoice {
    Crash,
    Error,
    Stall,
}

impl FailpointChoice {
    /// The plan's action, with `ms` drawn from `for_ms`.
    pub fn action(self, ms: u64) -> reconsim_world::fault::FailpointAction {
        use reconsim_world::fault::FailpointAction;
        match self {
            FailpointChoice::Crash => FailpointAction::Crash {
                restart_after_ms: ms,
            },
            FailpointChoice::Error => FailpointAction::Error,
            FailpointChoice::Stall => FailpointAction::Stall { ms },
        }
    }
}

fn default_failpoint_ms() -> Range {
    Range::fixed(1_000)
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
            FaultKind::TerminateInstance { .. } => "terminate_instance",
            FaultKind::WatchLag { .. } => "watch_lag",
            FaultKind::WatchStall { .. } => "watch_stall",
            FaultKind::Failpoint { .. } => "failpoint",
            FaultKind::Operation { .. } => "operation",
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
    /// The JSON path of the offending field (`.` for the document; empty for the file as
    /// a whole: unreadable, too large, not UTF-8).
    pub path: String,
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            // The file as a whole (it cannot be read, it is too large): no field to name.
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: at {}: {}", self.file, self.path, self.message)
        }
    }
}

impl std::error::Error for LoadError {}

impl LoadError {
    /// A field of `file` that is not what was expected.
    pub fn new(file: &str, e: ParamError) -> Self {
        LoadError {
            file: file.to_string(),
            path: if e.path.is_empty() {
                ".".into()
            } else {
                e.path
            },
            message: e.message,
        }
    }
}

/// The world faults a plan can hold (re-exported for plan files).
pub type Plan = reconsim_sim::FaultPlan<WorldFault>;

/// Hosts every world has besides its nodes.
pub const FIXED_HOSTS: [&str; 4] = ["api", "controller-manager", "cloud", "user"];

/// Read a JSON file into `T` (at most [`crate::limits::FILE_BYTES_MAX`] bytes, one
/// document); errors name the file and the JSON path.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LoadError> {
    let text = crate::json::read_text(path)?;
    parse_json(&path.display().to_string(), &text)
}

/// Parse one JSON document into `T`; errors name `file` and the JSON path.
pub fn parse_json<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, LoadError> {
    crate::json::parse(file, text)
}

impl Scenario {
    /// Read and validate a scenario file whose sections `families` parse; a base it
    /// `extends` is a path relative to it or a name in [`crate::library::dir`].
    pub fn load(path: &Path, families: &Families) -> Result<Scenario, LoadError> {
        let text = crate::json::read_text(path)?;
        let resolve = |name: &str, from: Option<&Path>| crate::library::base_in_dir(name, from);
        Self::parse_with(
            &path.display().to_string(),
            &text,
            Some(path),
            families,
            &resolve,
            &[],
        )
    }

    /// [`Scenario::parse`] of a file that may extend another (found by `resolve`), with
    /// `sets` applied ([`crate::variants`]); `path` is where the file is, if it is one.
    pub fn parse_with(
        file: &str,
        text: &str,
        path: Option<&Path>,
        families: &Families,
        resolve: &crate::variants::Resolve<'_>,
        sets: &[crate::variants::Set],
    ) -> Result<Scenario, LoadError> {
        let input: Value = crate::json::parse_object(file, text, "a scenario")?;
        // Paths in a family's section are relative to the file's folder.
        let base = path.and_then(Path::parent);
        if !crate::variants::extends(&input) && sets.is_empty() {
            // The plain route keeps serde's line and column in its errors.
            let raw: ScenarioFile = crate::json::parse_object(file, text, "a scenario")?;
            return Self::from_file(raw, &input, families, base)
                .map_err(|e| LoadError::new(file, e));
        }
        let mut doc = crate::variants::expand(file, input, path, resolve)?;
        for set in sets {
            crate::variants::apply_set(&mut doc, set).map_err(|message| LoadError {
                file: file.to_string(),
                path: set.path.clone(),
                message,
            })?;
        }
        Self::from_value_in(file, "", &doc, families, base)
    }

    /// Parse and validate scenario JSON; `file` names it in errors.
    pub fn parse(file: &str, text: &str, families: &Families) -> Result<Scenario, LoadError> {
        let raw: ScenarioFile = crate::json::parse_object(file, text, "a scenario")?;
        let input: Value = parse_json(file, text)?;
        Self::from_file(raw, &input, families, None).map_err(|e| LoadError::new(file, e))
    }

    /// A scenario embedded at `at` of a document `file` (a failure file's `.scenario`).
    pub fn from_value(
        file: &str,
        at: &str,
        value: &Value,
        families: &Families,
    ) -> Result<Scenario, LoadError> {
        Self::from_value_in(file, at, value, families, None)
    }

    /// [`Scenario::from_value`], its sections' relative paths read from `base`.
    fn from_value_in(
        file: &str,
        at: &str,
        value: &Value,
        families: &Families,
        base: Option<&Path>,
    ) -> Result<Scenario, LoadError> {
        if !value.is_object() {
            return Err(LoadError {
                file: file.to_string(),
                path: if at.is_empty() { "." } else { at }.to_string(),
                message: "a JSON object (a scenario)".into(),
            });
        }
        let raw: ScenarioFile = serde_path_to_error::deserialize(value).map_err(|e| {
            let inner = e.path().to_string();
            LoadError {
                file: file.to_string(),
                path: match inner.as_str() {
                    "" | "." if at.is_empty() => ".".to_string(),
                    "" | "." => at.to_string(),
                    p => format!("{at}.{p}"),
                },
                message: e.inner().to_string(),
            }
        })?;
        Self::from_file(raw, value, families, base).map_err(|e| LoadError::new(file, e.under(at)))
    }

    /// `input` is the document `raw` was read from: a struct given as an array there is
    /// refused (serde's sequence form, [`crate::json::check_objects`]).
    fn from_file(
        raw: ScenarioFile,
        input: &Value,
        families: &Families,
        base: Option<&Path>,
    ) -> Result<Scenario, ParamError> {
        let scenario = raw.into_scenario(families, base)?;
        let at = |(path, message): (String, String)| ParamError::at(path, message);
        scenario.validate().map_err(at)?;
        let canonical = serde_json::to_value(&scenario).expect("scenarios serialize");
        crate::json::check_objects(input, &canonical, "").map_err(at)?;
        Ok(scenario)
    }

    /// The invariant `name`: a registered family's, or one a section declares.
    pub fn invariant(&self, name: &str) -> Option<reconsim_check::NamedCheck> {
        if let Some(c) = self.families.invariant(name) {
            return Some(c.clone());
        }
        self.sections()
            .flat_map(|s| s.invariants())
            .find(|c| c.name == name)
    }

    /// The families the scenario was loaded with.
    pub fn families(&self) -> &Families {
        &self.families
    }

    /// The sections of the families the scenario runs, in the registry's order.
    pub fn sections(&self) -> impl Iterator<Item = &dyn FamilySection> {
        self.controllers.iter().map(|(_, s)| s)
    }

    /// Every host name of the world this scenario builds.
    pub fn hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = FIXED_HOSTS.iter().map(|h| h.to_string()).collect();
        hosts.extend(self.topology.control_plane_nodes.iter().cloned());
        hosts.extend(self.topology.worker_nodes.iter().cloned());
        hosts.extend(self.service_names());
        hosts
    }

    /// A fingerprint of the scenario as resolved (after `extends` and `--set`): the
    /// stable hash of its JSON as failure files embed it, in 16 hex digits. `merge`
    /// refuses shards whose fingerprints differ: they ran different scenarios.
    pub fn fingerprint(&self) -> String {
        let text = serde_json::to_string(self).expect("a scenario serializes");
        format!(
            "{:016x}",
            reconsim_sim::StableHasher::hash_one(text.as_str())
        )
    }

    /// The sections' service processes ([`FamilySection::services`]), each on a host of
    /// its name, in the order they start.
    pub fn service_names(&self) -> Vec<String> {
        self.sections()
            .flat_map(|s| s.services())
            .map(|s| s.name)
            .collect()
    }

    /// The cluster's own processes, before any family's.
    fn cluster_processes(&self) -> Vec<String> {
        let mut procs = vec!["apiserver".to_string(), "cloud".to_string()];
        procs.extend(self.service_names());
        procs.extend([
            reconsim_world::lifecycle::NAME.to_string(),
            "workloads".to_string(),
        ]);
        for n in self.nodes() {
            procs.push(format!("kubelet/{n}"));
        }
        procs
    }

    /// The names of the processes the scenario starts with (targets of faults).
    pub fn processes(&self) -> Vec<String> {
        let mut procs = self.cluster_processes();
        for section in self.sections() {
            procs.extend(section.processes());
        }
        procs
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

    /// The requests of every user operation `plan` holds ([`crate::operations`]), as
    /// its generators' spaces make them; an operation none of them knows has none
    /// ([`crate::plan::check`] refuses it in a failure file).
    pub fn operations_played(&self, plan: &Plan) -> Vec<reconsim_world::script::Played> {
        let mut played: Vec<reconsim_world::script::Played> = Vec::new();
        for f in &plan.faults {
            let reconsim_sim::Fault::Inject {
                fault: WorldFault::Operation(op),
                ..
            } = &f.fault
            else {
                continue;
            };
            if played.iter().any(|p| p.operation == *op) {
                continue;
            }
            if let Some(p) = self.faults.iter().find_map(|g| match &g.fault {
                FaultKind::Operation { space, .. } => space.played(op),
                _ => None,
            }) {
                played.push(p);
            }
        }
        played
    }

    /// The workload as API calls from the user's host, in file order: each family
    /// makes the calls of its own actions.
    pub fn workload_ops(&self) -> Result<Vec<ApiOp>, ParamError> {
        let mut ops: Vec<Option<ApiOp>> = self.workload.iter().map(|_| None).collect();
        for (i, a) in self.workload.iter().enumerate() {
            let name = &a.action.name;
            let Some(family) = self.families.by_action(name) else {
                let known: Vec<String> = self
                    .families
                    .action_names()
                    .iter()
                    .map(|(a, f)| format!("{a} ({f})"))
                    .collect();
                return Err(ParamError::at(
                    format!(".workload[{i}].action"),
                    format!(
                        "an action of a registered family ({}), not `{name}`",
                        known.join(", ")
                    ),
                ));
            };
            if self.controllers.section(family.name()).is_none() {
                return Err(ParamError::at(
                    format!(".workload[{i}].action.{name}"),
                    format!(
                        "a scenario with controllers.{}: `{name}` is that family's action",
                        family.name()
                    ),
                ));
            }
        }
        for (family, section) in self.controllers.iter() {
            let declared = self
                .families
                .get(family)
                .expect("sections are of registered families")
                .1
                .actions();
            let (indices, actions): (Vec<usize>, Vec<WorkloadAction<'_>>) = self
                .workload
                .iter()
                .enumerate()
                .filter(|(_, a)| declared.contains(&a.action.name.as_str()))
                .map(|(index, a)| {
                    let action = WorkloadAction {
                        index,
                        at_ms: a.at_ms,
                        name: &a.action.name,
                        params: &a.action.params,
                    };
                    (index, action)
                })
                .unzip();
            if actions.is_empty() {
                continue;
            }
            let made = section.workload(&actions)?;
            assert_eq!(
                made.len(),
                actions.len(),
                "family `{family}` makes one API call per action"
            );
            for (index, op) in indices.into_iter().zip(made) {
                ops[index] = Some(op);
            }
        }
        Ok(ops
            .into_iter()
            .map(|op| op.expect("every action's family made its call"))
            .collect())
    }

    /// Checks serde cannot make: `Err((json path, what was expected))`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let err = |path: &str, msg: String| Err((path.to_string(), msg));
        let param = |e: ParamError| (e.path, e.message);
        use crate::limits;
        limits::check_name(&self.name).or_else(|m| err(".name", m))?;
        if self.seeds == 0 || self.seeds > limits::SEED_BUDGET_MAX {
            return err(
                ".seeds",
                format!(
                    "a seed budget from 1 to {} (SEED_BUDGET_MAX), not {}",
                    limits::SEED_BUDGET_MAX,
                    self.seeds
                ),
            );
        }
        if self.duration_ms == 0 || self.duration_ms > limits::DURATION_MS_MAX {
            return err(
                ".duration_ms",
                format!(
                    "a duration from 1 to {} ms (DURATION_MS_MAX, 7 days), not {}",
                    limits::DURATION_MS_MAX,
                    self.duration_ms
                ),
            );
        }
        // Every other number, by the unit its field's name ends in, before any
        // arithmetic below or in a run sees it.
        limits::check_numbers(&serde_json::to_value(self).expect("scenarios serialize"))?;
        let node_count = self.topology.control_plane_nodes.len() + self.topology.worker_nodes.len();
        if node_count > limits::NODES_MAX {
            return err(
                ".topology",
                format!(
                    "at most {} nodes (NODES_MAX), not {node_count}",
                    limits::NODES_MAX
                ),
            );
        }
        for (field, names) in [
            ("control_plane_nodes", &self.topology.control_plane_nodes),
            ("worker_nodes", &self.topology.worker_nodes),
        ] {
            for (i, n) in names.iter().enumerate() {
                limits::check_node_name(n)
                    .or_else(|m| err(&format!(".topology.{field}[{i}]"), m))?;
            }
        }
        if self.workload.len() > limits::WORKLOAD_ACTIONS_MAX {
            return err(
                ".workload",
                format!(
                    "at most {} actions (WORKLOAD_ACTIONS_MAX), not {}",
                    limits::WORKLOAD_ACTIONS_MAX,
                    self.workload.len()
                ),
            );
        }
        if self.faults.len() > limits::FAULT_GENERATORS_MAX {
            return err(
                ".faults",
                format!(
                    "at most {} fault generators (FAULT_GENERATORS_MAX), not {}",
                    limits::FAULT_GENERATORS_MAX,
                    self.faults.len()
                ),
            );
        }
        check_range(".net.latency_ms", self.net.latency_ms)?;
        if let Some(delay) = self.apiserver.watch_delay_ms {
            check_range(".apiserver.watch_delay_ms", delay)?;
        }
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
        if let Some(n) = self.cloud.subnet_size
            && !(1..=reconsim_cloud::SUBNET_SIZE_MAX).contains(&n)
        {
            return err(
                ".cloud.subnet_size",
                format!(
                    "a number of addresses from 1 to {}, not {n}",
                    reconsim_cloud::SUBNET_SIZE_MAX
                ),
            );
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
                let control_plane = FIXED_HOSTS.len() + self.topology.control_plane_nodes.len();
                let nodes_end = control_plane + self.topology.worker_nodes.len();
                if i >= nodes_end {
                    // A service's host: named as the cluster's, a node, or another service.
                    let first = hosts.iter().position(|o| o == h).unwrap_or(i);
                    return if first < FIXED_HOSTS.len() {
                        err(
                            ".controllers",
                            format!(
                                "services this binary registers named apart from the \
                                 cluster's hosts {FIXED_HOSTS:?}; `{h}` is one"
                            ),
                        )
                    } else if first < nodes_end {
                        err(
                            ".topology",
                            format!(
                                "no node named as a service this binary registers; `{h}` is \
                                 both (rename the node, or the service)"
                            ),
                        )
                    } else {
                        err(
                            ".controllers",
                            format!("services with unique names; two families register `{h}`"),
                        )
                    };
                }
                let path = if i < control_plane {
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
        if self.controllers.is_empty() {
            return err(
                ".controllers",
                format!(
                    "at least one family's section ({})",
                    known(&self.families.names())
                ),
            );
        }
        let nodes: Vec<String> = self.nodes().cloned().collect();
        let mut processes = self.cluster_processes();
        for (name, section) in self.controllers.iter() {
            let context = Context {
                nodes: &nodes,
                hosts: &hosts,
                processes: &processes,
                duration_ms: self.duration_ms,
            };
            let at = format!(".controllers.{name}");
            // Object names before the section's own checks, which may show them whole.
            crate::names::check_declared(&at, &section.object_names())?;
            section
                .validate(&context)
                .map_err(|e| param(e.under(&at)))?;
            crate::names::check_seeded(&at, section)?;
            processes.extend(section.processes());
        }
        // A service's process is named as its host: apart from every other process.
        for service in self.service_names() {
            if processes.iter().filter(|p| **p == service).count() > 1 {
                return err(
                    ".controllers",
                    format!(
                        "services this binary registers named apart from the world's \
                         processes; `{service}` is one"
                    ),
                );
            }
        }
        for (i, name) in self.invariants.iter().enumerate() {
            if self.invariant(name).is_none() {
                let mut names: Vec<String> = self
                    .families
                    .invariant_names()
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                names.extend(self.sections().flat_map(|s| s.invariants()).map(|c| c.name));
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                return err(
                    &format!(".invariants[{i}]"),
                    format!(
                        "an invariant a registered family checks ({}), not `{name}`",
                        known(&names)
                    ),
                );
            }
        }
        let ops = self.workload_ops().map_err(param)?;
        let actions: Vec<(String, &Value)> = self
            .workload
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let at = format!(".workload[{i}].action.{}", a.action.name);
                (at, &a.action.params)
            })
            .collect();
        crate::names::check_ops(&actions, &ops)?;
        for (i, a) in self.workload.iter().enumerate() {
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
            if f.count.hi > limits::FAULTS_PER_GENERATOR_MAX {
                return err(
                    &at("count"),
                    format!(
                        "at most {} faults per generator (FAULTS_PER_GENERATOR_MAX)",
                        limits::FAULTS_PER_GENERATOR_MAX
                    ),
                );
            }
            if f.at_ms.hi > self.duration_ms {
                return err(
                    &at("at_ms"),
                    format!(
                        "start times within duration_ms ({} ms), not up to {}",
                        self.duration_ms, f.at_ms.hi
                    ),
                );
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
                FaultKind::TerminateInstance { launch, tag } => {
                    if let Some(launch) = launch {
                        check_range(&kat("launch"), *launch)?;
                        if launch.lo == 0 {
                            return err(&kat("launch"), "launches counted from 1".into());
                        }
                    }
                    if let Some(tag) = tag
                        && tag.split('=').next().is_none_or(str::is_empty)
                    {
                        return err(
                            &kat("tag"),
                            format!("`key=value` or `key`, with a key, not {tag:?}"),
                        );
                    }
                }
                FaultKind::WatchLag { lag_ms, kinds } => {
                    check_range(&kat("lag_ms"), *lag_ms)?;
                    for (i, k) in kinds.iter().enumerate() {
                        if !is_kind_name(k) {
                            return err(
                                &format!("{}[{i}]", kat("kinds")),
                                format!(
                                    "a kind's name (letters and digits, from a capital: `Machine`), not {k:?}"
                                ),
                            );
                        }
                    }
                }
                FaultKind::WatchStall {
                    processes: ps,
                    lag_ms,
                } => {
                    names_in("processes", ps, &processes)?;
                    check_range(&kat("lag_ms"), *lag_ms)?;
                }
                FaultKind::Failpoint {
                    processes: ps,
                    name,
                    hit,
                    for_ms,
                    ..
                } => {
                    names_in("processes", ps, &processes)?;
                    if name.is_empty() {
                        return err(&kat("name"), "a failpoint's name".into());
                    }
                    check_range(&kat("hit"), *hit)?;
                    if hit.lo == 0 {
                        return err(&kat("hit"), "hits counted from 1".into());
                    }
                    check_range(&kat("for_ms"), *for_ms)?;
                }
                // Its controller and objects were resolved at load.
                FaultKind::Operation { .. } => {}
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

/// [`Range::check`] in validation's `(path, message)` form.
/// A Kubernetes kind's name as an object's `kind` spells it: an ASCII letter in capitals
/// first, then letters and digits.
fn is_kind_name(k: &str) -> bool {
    k.len() <= 63
        && k.starts_with(|c: char| c.is_ascii_uppercase())
        && k.chars().all(|c| c.is_ascii_alphanumeric())
}

fn check_range(path: &str, r: Range) -> Result<(), (String, String)> {
    r.check(path).map_err(|e| (e.path, e.message))
}
