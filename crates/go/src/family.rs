//! `controllers.go`: Go programs named by a scenario file, run by the `reconsim`
//! binary with no Rust of the user's. Each entry is a Go `main` package (built for
//! wasip1 with reconsim's overlay, [`crate::build`]) or a `.wasm` built so, its CRDs
//! (kubebuilder's `config/crd/bases`), its seed objects (YAML manifests or inline),
//! and the arguments and environment its pods run it with. An entry runs as a
//! `controllers.custom` entry does: a Deployment of its name whose pods' containers
//! run the program (crash, exit and node loss restart it through the kubelet), its
//! objects seeded, its kinds' manifests usable in `go` workload actions (`create`,
//! `patch`, `delete`, as `custom` ones). Relative paths are read from the scenario
//! file's folder, and the parsed section writes them whole, so a failure file replays
//! from anywhere; the program's SHA-256 is written beside its path, and a replay of a
//! program that changed since is refused.

use crate::bridge::GoBridge;
use crate::guest::Program;
use reconsim_check::NamedCheck;
use reconsim_check::View;
use reconsim_family::{
    Context, Family, FamilySection, ObjectName, ParamError, ServiceProcess, Services,
    WorkloadAction,
};
use reconsim_kube::Kinds;
use reconsim_kube::cel::{self, Expr};
use reconsim_scenario::extension::Manifests;
use reconsim_scenario::extension::{Custom, Extensions};
use reconsim_sim::Sim;
use reconsim_world::Proc;
use reconsim_world::api::ApiOp;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::Images;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `go` family: register it with `Families::with(GoFamily)` (the `reconsim`
/// binary's builtin registry does).
#[derive(Clone, Copy, Debug, Default)]
pub struct GoFamily;

/// One entry of `controllers.go`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoSpec {
    /// The Deployment's name (its pods `<name>-0`, ...).
    pub name: String,
    /// A folder holding the Go `main` package (kubebuilder's `cmd`), or a `.wasm`
    /// built for wasip1 with reconsim's overlay (`reconsim go build`).
    pub program: String,
    /// The SHA-256 of the program as loaded (written by reconsim; when given, the
    /// program must still be this one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// CRD files, or folders of them (`*.yaml`, `*.yml`, `*.json`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crds: Vec<String>,
    /// Objects in the API server at t = 0, as YAML files of manifests (kubebuilder's
    /// `config/samples`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<String>,
    /// Objects in the API server at t = 0, inline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<Value>,
    /// The program's arguments after its name (`--leader-elect`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// More environment variables (beside `KUBECONFIG`, `POD_NAME`, `POD_NAMESPACE`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Invariants of the program's objects, in CEL: the scenario's `invariants` name
    /// them beside the registered ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invariants: Vec<GoInvariant>,
    /// The program's desired state, judged once faults heal: for each object of a
    /// kind, a CEL rule over `self`; or a rule over lists of objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub converged: Vec<EachRule>,
    /// The node of its one pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The node of each pod, one per replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
}

/// A kind as a manifest names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindRef {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
}

/// For each object of a kind (`each`), a CEL expression over `self` that must be
/// true; or (`over`) one over lists of objects, each kind's under a name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EachRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub each: Option<KindRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over: Option<BTreeMap<String, KindRef>>,
    pub rule: String,
}

/// "At most `replicas` live children per owner": a child (one whose controller
/// reference names the owner) never appears while its owner already has `replicas`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AtMost {
    pub owner: KindRef,
    pub child: KindRef,
    /// CEL over the owner (`self.spec.replicas`).
    pub replicas: String,
}

/// An invariant of a Go entry: a rule for each object of a kind, or a bound on an
/// owner's children.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoInvariant {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub each: Option<KindRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most_replicas: Option<AtMost>,
    /// Lists of objects by name, for a `rule` across kinds
    /// (`{"sets": {ConfigSet}, "maps": {ConfigMap}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over: Option<BTreeMap<String, KindRef>>,
}

/// A declared invariant, compiled.
#[derive(Clone, Debug)]
enum Compiled {
    Rule(cel::Rule),
    AtMost(reconsim_check::replicas::AtMostReplicas),
    Over(cel::Over),
}

/// A desired state, compiled.
enum Desired {
    Each(reconsim_world::object::Kind, Expr),
    Over(cel::Over),
}

/// The parsed section: the entries with their paths resolved, and the same entries as
/// `custom` ones, which run them.
#[derive(Debug)]
pub struct GoSection {
    entries: Vec<GoSpec>,
    inner: Box<dyn FamilySection>,
    checks: Vec<NamedCheck>,
}

impl Clone for GoSection {
    fn clone(&self) -> Self {
        GoSection {
            entries: self.entries.clone(),
            inner: self.inner.clone_section(),
            checks: self.checks.clone(),
        }
    }
}

impl Serialize for GoSection {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.entries.serialize(s)
    }
}

/// `path` read from `base` (the scenario file's folder), made absolute.
fn resolve(base: Option<&Path>, path: &str) -> PathBuf {
    let p = Path::new(path);
    let joined = match base {
        Some(b) if p.is_relative() => b.join(p),
        _ => p.to_path_buf(),
    };
    joined
        .canonicalize()
        .or_else(|_| std::path::absolute(&joined))
        .unwrap_or(joined)
}

/// The YAML (or JSON) documents of a file, or of every `*.yaml`, `*.yml` and `*.json`
/// file of a folder, in name order; empty documents skipped.
fn documents(path: &Path) -> Result<Vec<Value>, String> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut fs: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
            })
            .collect();
        fs.sort();
        fs
    } else {
        vec![path.to_path_buf()]
    };
    let mut docs = Vec::new();
    for f in files {
        // A FIFO or a device would block the read: only regular files.
        if !std::fs::metadata(&f).is_ok_and(|m| m.is_file()) {
            return Err(format!(
                "{}: not a regular file or a folder of them",
                f.display()
            ));
        }
        let text = reconsim_scenario::json::read_text(&f).map_err(|e| e.to_string())?;
        let parsed: Vec<Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| format!("{}: not YAML: {e}", f.display()))?;
        docs.extend(parsed.into_iter().filter(|d| !d.is_null()));
    }
    Ok(docs)
}

/// The program at `path`: a folder is built (its `.wasm` kept in the cache folder,
/// named by the folder's path), a file loaded.
fn program(path: &Path) -> Result<Program, String> {
    let wasm = if path.is_dir() {
        let dir = crate::guest::cache_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("go-build");
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&path, &mut h);
        let out = dir.join(format!("{:016x}.wasm", std::hash::Hasher::finish(&h)));
        crate::build::build(path, &out).map_err(|e| e.to_string())?;
        out
    } else {
        path.to_path_buf()
    };
    Program::load(&wasm).map_err(|e| e.to_string())
}

impl Family for GoFamily {
    fn name(&self) -> &str {
        "go"
    }

    fn parse(&self, section: &Value) -> Result<Box<dyn FamilySection>, ParamError> {
        self.parse_in(section, None)
    }

    fn parse_in(
        &self,
        section: &Value,
        base: Option<&Path>,
    ) -> Result<Box<dyn FamilySection>, ParamError> {
        let entries: Vec<GoSpec> = reconsim_family::params::parse(section)?;
        let mut extensions = Extensions::new();
        let mut custom = Vec::with_capacity(entries.len());
        let mut resolved = Vec::with_capacity(entries.len());
        let mut checks: Vec<NamedCheck> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let at = |field: &str| format!("[{i}].{field}");
            if entries[..i].iter().any(|o| o.name == e.name) {
                return Err(ParamError::at(
                    at("name"),
                    format!("`{}` names an entry before it", e.name),
                ));
            }
            let path = resolve(base, &e.program);
            let loaded = program(&path).map_err(|m| ParamError::at(at("program"), m))?;
            if let Some(want) = &e.sha256
                && *want != loaded.sha256_hex()
            {
                return Err(ParamError::at(
                    at("sha256"),
                    format!(
                        "the program at {} is not the one this file names: its SHA-256 is {}, not {want}",
                        path.display(),
                        loaded.sha256_hex()
                    ),
                ));
            }
            let mut kinds = Kinds::new();
            let mut crds = Vec::new();
            for (j, c) in e.crds.iter().enumerate() {
                let p = resolve(base, c);
                for doc in
                    documents(&p).map_err(|m| ParamError::at(at(&format!("crds[{j}]")), m))?
                {
                    kinds = kinds.crd_manifest(&doc).map_err(|m| {
                        ParamError::at(at(&format!("crds[{j}]")), format!("{}: {m}", p.display()))
                    })?;
                }
                crds.push(p.to_string_lossy().into_owned());
            }
            let mut objects = Vec::new();
            let mut manifests = Vec::new();
            for (j, m) in e.manifests.iter().enumerate() {
                let p = resolve(base, m);
                objects.extend(
                    documents(&p).map_err(|m| ParamError::at(at(&format!("manifests[{j}]")), m))?,
                );
                manifests.push(p.to_string_lossy().into_owned());
            }
            objects.extend(e.objects.iter().cloned());
            let kind = |path: String, k: &KindRef| {
                Manifests::kind(&kinds, &k.api_version, &k.kind).ok_or_else(|| {
                    ParamError::at(
                        path,
                        format!(
                            "a kind the program's API server serves (its CRDs or a built-in one), not {} {}",
                            k.api_version, k.kind
                        ),
                    )
                })
            };
            let expr =
                |path: String, src: &str| Expr::compile(src).map_err(|m| ParamError::at(path, m));
            // `over`'s names, each a CEL identifier, and their kinds.
            let lists = |path: &dyn Fn(&str) -> String, over: &BTreeMap<String, KindRef>| {
                if over.is_empty() {
                    return Err(ParamError::at(
                        path(""),
                        "at least one name of a list of objects (`{\"sets\": {\"apiVersion\": ..., \"kind\": ...}}`)",
                    ));
                }
                let mut out = Vec::new();
                for (name, k) in over {
                    if !cel::list_name_ok(name) {
                        return Err(ParamError::at(
                            path(&format!(".{name}")),
                            "a name the rule can use: a CEL identifier (letters, digits, `_`), not `self` nor a reserved word",
                        ));
                    }
                    out.push((name.clone(), kind(path(&format!(".{name}")), k)?));
                }
                Ok(out)
            };
            let mut compiled = Vec::new();
            for (j, inv) in e.invariants.iter().enumerate() {
                let at = |f: &str| at(&format!("invariants[{j}]{f}"));
                let c = match (&inv.each, &inv.rule, &inv.at_most_replicas, &inv.over) {
                    (Some(each), Some(rule), None, None) => Compiled::Rule(cel::Rule {
                        invariant: inv.name.clone(),
                        kind: kind(at(".each"), each)?,
                        expr: expr(at(".rule"), rule)?,
                    }),
                    (None, None, Some(m), None) => Compiled::AtMost(cel::replicas(
                        &inv.name,
                        kind(at(".at_most_replicas.owner"), &m.owner)?,
                        kind(at(".at_most_replicas.child"), &m.child)?,
                        expr(at(".at_most_replicas.replicas"), &m.replicas)?,
                    )),
                    (None, Some(rule), None, Some(over)) => Compiled::Over(cel::Over {
                        invariant: inv.name.clone(),
                        lists: lists(&|f: &str| at(&format!(".over{f}")), over)?,
                        expr: expr(at(".rule"), rule)?,
                    }),
                    _ => {
                        return Err(ParamError::at(
                            at(""),
                            "one of `each` with `rule`, `over` with `rule`, or `at_most_replicas`",
                        ));
                    }
                };
                if checks.iter().any(|c: &NamedCheck| c.name == inv.name) {
                    return Err(ParamError::at(
                        at(".name"),
                        format!("`{}` is declared twice", inv.name),
                    ));
                }
                let made = c.clone();
                checks.push(NamedCheck::new(&inv.name, move || match &made {
                    Compiled::Rule(r) => Box::new(r.clone()) as Box<dyn reconsim_check::Check>,
                    Compiled::AtMost(m) => Box::new(m.clone()),
                    Compiled::Over(o) => Box::new(o.clone()),
                }));
                compiled.push(c);
            }
            let mut desired = Vec::new();
            for (j, r) in e.converged.iter().enumerate() {
                let at = |f: &str| at(&format!("converged[{j}]{f}"));
                let rule = expr(at(".rule"), &r.rule)?;
                desired.push(match (&r.each, &r.over) {
                    (Some(each), None) => Desired::Each(kind(at(".each"), each)?, rule),
                    (None, Some(over)) => Desired::Over(cel::Over {
                        invariant: String::new(),
                        lists: lists(&|f: &str| at(&format!(".over{f}")), over)?,
                        expr: rule,
                    }),
                    _ => {
                        return Err(ParamError::at(
                            at(""),
                            "one of `each` or `over`, with `rule`",
                        ));
                    }
                });
            }
            let (args, env) = (e.args.clone(), e.env.clone());
            let run = loaded.clone();
            let served = kinds.clone();
            extensions = extensions.controller(
                Custom::program(&e.name, move |_: &(), container, _services: &Services| {
                    let mut b = GoBridge::new(
                        container.endpoints.apiserver,
                        served.clone(),
                        run.clone(),
                        &container.pod_name,
                    )
                    .args(&args);
                    for (k, v) in &env {
                        b = b.env(&format!("{k}={v}"));
                    }
                    b.in_container(container.kubelet).boxed()
                })
                .manifests(kinds)
                .convergence(move |view| {
                    for c in &compiled {
                        if let Compiled::AtMost(m) = c {
                            m.converged(view)?;
                        }
                    }
                    for d in &desired {
                        match d {
                            Desired::Each(kind, rule) => rule.holds_for_all(*kind, view)?,
                            Desired::Over(over) => over.holds(view)?,
                        }
                    }
                    Ok(())
                }),
            );
            let mut entry = json!({"name": e.name, "objects": objects});
            if let Some(n) = &e.node {
                entry["node"] = json!(n);
            }
            if let Some(ns) = &e.nodes {
                entry["nodes"] = json!(ns);
            }
            custom.push(entry);
            resolved.push(GoSpec {
                program: path.to_string_lossy().into_owned(),
                sha256: Some(loaded.sha256_hex()),
                crds,
                manifests,
                ..e.clone()
            });
        }
        let inner = extensions.parse(&Value::Array(custom))?;
        Ok(Box::new(GoSection {
            entries: resolved,
            inner,
            checks,
        }))
    }

    fn actions(&self) -> &[&str] {
        &["go"]
    }
}

impl FamilySection for GoSection {
    fn validate(&self, context: &Context<'_>) -> Result<(), ParamError> {
        self.inner.validate(context)
    }
    fn object_names(&self) -> Vec<ObjectName> {
        self.inner.object_names()
    }
    fn processes(&self) -> Vec<String> {
        self.inner.processes()
    }
    fn seed(&self, server: &mut ApiServer) {
        self.inner.seed(server)
    }
    fn images(&self, images: Images, services: &Services) -> Images {
        self.inner.images(images, services)
    }
    fn services(&self) -> Vec<ServiceProcess> {
        self.inner.services()
    }
    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services) {
        self.inner.spawn(sim, services)
    }
    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        self.inner.converged(view)
    }
    fn invariants(&self) -> Vec<NamedCheck> {
        self.checks.clone()
    }
    /// `{"go": {"controller": name, "create" | "patch" | "delete": manifest}}`, as a
    /// `custom` action of the entry.
    fn workload(&self, actions: &[WorkloadAction<'_>]) -> Result<Vec<ApiOp>, ParamError> {
        self.inner.workload(actions)
    }
}
