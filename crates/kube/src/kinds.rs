//! The kinds a world serves on the wire: any kube-rs type (k8s-openapi's, or a
//! `#[derive(CustomResource)]` one), registered by type when the world is built.
//!
//! A world kind is a `&'static KindInfo`; kube's types know their group, version, kind
//! and plural only through functions, so each is made once at run time and kept for the
//! life of the program (an interned table: a kind registered by a thousand worlds is one
//! `KindInfo`). Kinds compare by the stable hash of group and name, so where the table
//! put one never reaches an outcome.

use reconsim_world::object::{Kind, KindInfo};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::any::TypeId;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

/// The interned kinds: (group, version, kind, plural, namespaced) -> the one `KindInfo`
/// for it. The whole description is the key, so an owner reference's kind (no plural)
/// never stands in for the served kind it names, whichever a process saw first; the
/// two compare equal anyway (a kind is its group and name).
type Table = BTreeMap<(String, String, String, String, bool), &'static KindInfo>;

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// The world kind for (group, version, kind, plural, scope), made once.
pub fn intern(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Kind {
    let mut table = table().lock().unwrap_or_else(|p| p.into_inner());
    let key = (
        group.to_string(),
        version.to_string(),
        kind.to_string(),
        plural.to_string(),
        namespaced,
    );
    if let Some(info) = table.get(&key) {
        return Kind::new(info);
    }
    let (g, v, k, p) = (leak(group), leak(version), leak(kind), leak(plural));
    let info: &'static KindInfo = Box::leak(Box::new(if namespaced {
        KindInfo::namespaced(g, v, k, p)
    } else {
        KindInfo::cluster_scoped(g, v, k, p)
    }));
    table.insert(key, info);
    Kind::new(info)
}

/// The world kind of the kube-rs type `K`.
pub fn kind_of<K>() -> Kind
where
    K: kube::Resource<DynamicType = ()>,
    K::Scope: 'static,
{
    let namespaced =
        TypeId::of::<K::Scope>() == TypeId::of::<k8s_openapi::NamespaceResourceScope>();
    intern(
        &K::group(&()),
        &K::version(&()),
        &K::kind(&()),
        &K::plural(&()),
        namespaced,
    )
}

/// A served kind: its world kind, and whether writes to its status go through the
/// status subresource (then a write of the object leaves status alone, and a write of
/// `/status` touches nothing else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    pub kind: Kind,
    pub status_subresource: bool,
    /// Whether the server takes strategic merge patches of it: a built-in kind's, not a
    /// custom resource's (kube-apiserver answers those 415).
    pub strategic_merge: bool,
}

impl Served {
    /// Whether it is a custom resource (served by [`Kinds::crd`]), whose strategy is
    /// apiextensions-apiserver's rather than a built-in type's.
    pub fn custom_resource(self) -> bool {
        !self.strategic_merge
    }

    /// What a create keeps of a client's `body`: a custom resource with a status
    /// subresource is born without the status it carries ("create cannot set status",
    /// apiextensions-apiserver's `customResourceStrategy.PrepareForCreate`;
    /// docs/semantics.md 4.11).
    pub fn prepare_for_create(self, body: &mut Value) {
        if self.custom_resource()
            && self.status_subresource
            && let Some(top) = body.as_object_mut()
        {
            top.remove("status");
        }
    }
}

/// The kinds a world serves, found by their REST path.
#[derive(Clone, Debug)]
pub struct Kinds {
    /// (group, version, plural) -> the kind.
    by_path: BTreeMap<(String, String, String), Served>,
    /// Each served kind's decoding of a client's JSON as its Rust type.
    decoders: BTreeMap<Kind, Decode>,
}

/// Whether JSON decodes as a kind's Rust type; `Err` says why not, as serde does.
type Decode = fn(&Value) -> Result<(), String>;

fn decode<K: DeserializeOwned>(v: &Value) -> Result<(), String> {
    K::deserialize(v).map(drop).map_err(|e| e.to_string())
}

impl Default for Kinds {
    fn default() -> Self {
        Self::new()
    }
}

impl Kinds {
    /// Every kind the world itself serves: its own, which its components read and write
    /// (Node, Pod, Lease, CertificateSigningRequest, Deployment; [`crate::world_kinds`]),
    /// and the core documents any program may use (Namespace, ConfigMap, Secret, and
    /// Events in `v1` and `events.k8s.io/v1`). A program's custom resources are added
    /// with [`Kinds::crd`].
    pub fn new() -> Self {
        use k8s_openapi::api::{apps, certificates, coordination, core, events};
        Kinds {
            by_path: BTreeMap::new(),
            decoders: BTreeMap::new(),
        }
        .with::<core::v1::Node>(true)
        .with::<core::v1::Pod>(true)
        .with::<coordination::v1::Lease>(false)
        .with::<certificates::v1::CertificateSigningRequest>(true)
        .with::<apps::v1::Deployment>(true)
        .with::<core::v1::Namespace>(true)
        .core::<core::v1::ConfigMap>()
        .core::<core::v1::Secret>()
        .core::<core::v1::Event>()
        .core::<events::v1::Event>()
    }

    /// Serve the built-in kube-rs type `K` (k8s-openapi's), with or without a status
    /// subresource. One of the world's own kinds is served as the world models it,
    /// whatever `status_subresource` says.
    pub fn with<K>(self, status_subresource: bool) -> Self
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
        K::Scope: 'static,
    {
        self.serve::<K>(status_subresource, true)
    }

    fn serve<K>(mut self, status_subresource: bool, strategic_merge: bool) -> Self
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
        K::Scope: 'static,
    {
        let kind = kind_of::<K>();
        let info = kind.info();
        let status_subresource =
            crate::world_kinds::codec(kind).map_or(status_subresource, |c| c.status_subresource);
        self.by_path.insert(
            (
                info.group.to_string(),
                info.version.to_string(),
                info.plural.to_string(),
            ),
            Served {
                kind,
                status_subresource,
                strategic_merge,
            },
        );
        self.decoders.insert(kind, decode::<K>);
        self
    }

    /// Serve k8s-openapi's `K` (ConfigMap, Secret, ...): no status subresource. A kind
    /// with one (Pod, Deployment) goes through [`Kinds::with`].
    pub fn core<K>(self) -> Self
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
        K::Scope: 'static,
    {
        self.with::<K>(false)
    }

    /// Serve the custom resource `K` as its CustomResourceDefinition says: with a
    /// status subresource when the CRD's storage version declares one.
    pub fn crd<K>(self) -> Self
    where
        K: kube::Resource<DynamicType = ()> + kube::CustomResourceExt + DeserializeOwned + 'static,
        K::Scope: 'static,
    {
        // `crd()` builds the whole schema: read once per type, not once per world.
        static STATUS: OnceLock<Mutex<BTreeMap<TypeId, bool>>> = OnceLock::new();
        let cache = STATUS.get_or_init(Default::default);
        let known = cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&TypeId::of::<K>())
            .copied();
        let status = known.unwrap_or_else(|| {
            let crd = K::crd();
            let version = crd
                .spec
                .versions
                .iter()
                .find(|v| v.storage)
                .or(crd.spec.versions.first());
            let status = version
                .and_then(|v| v.subresources.as_ref())
                .is_some_and(|s| s.status.is_some());
            // Its structural schema, which the server applies to every write.
            if let Some(schema) = version
                .and_then(|v| v.schema.as_ref())
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| serde_json::to_value(s).ok())
            {
                crate::schema::register(kind_of::<K>(), schema);
            }
            cache
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(TypeId::of::<K>(), status);
            status
        });
        self.serve::<K>(status, false)
    }

    /// Serve the custom resource a CustomResourceDefinition manifest describes (as
    /// kubebuilder writes them in `config/crd/bases`, read as JSON): its group, kind,
    /// plural and scope from `spec`, its storage version (else the first served one),
    /// that version's status subresource and structural schema, which the server
    /// applies to every write (pruning, defaults, validation). An error names the
    /// field that is missing or wrong.
    pub fn crd_manifest(mut self, crd: &Value) -> Result<Self, String> {
        if crd["kind"] != "CustomResourceDefinition" {
            return Err(format!(
                "`kind`: CustomResourceDefinition, not {}",
                crd["kind"]
            ));
        }
        let spec = &crd["spec"];
        let text = |path: &str, v: &Value| {
            v.as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| format!("`{path}`: a non-empty string"))
        };
        let group = text("spec.group", &spec["group"])?;
        let kind = text("spec.names.kind", &spec["names"]["kind"])?;
        let plural = text("spec.names.plural", &spec["names"]["plural"])?;
        let namespaced = match spec["scope"].as_str() {
            Some("Namespaced") => true,
            Some("Cluster") => false,
            _ => return Err("`spec.scope`: Namespaced or Cluster".into()),
        };
        let versions = spec["versions"]
            .as_array()
            .filter(|v| !v.is_empty())
            .ok_or("`spec.versions`: a non-empty list")?;
        let version = versions
            .iter()
            .find(|v| v["storage"] == true)
            .or_else(|| versions.iter().find(|v| v["served"] == true))
            .unwrap_or(&versions[0]);
        let name = text("spec.versions[].name", &version["name"])?;
        let status = version["subresources"]["status"].is_object();
        let world_kind = intern(&group, &name, &kind, &plural, namespaced);
        if let Some(schema) = version["schema"]["openAPIV3Schema"].as_object() {
            let schema = Value::Object(schema.clone());
            // The API server refuses a CRD whose validation rule does not compile.
            crate::validations::compile_all(&schema)
                .map_err(|e| format!("`spec.versions[{name}].schema.openAPIV3Schema`: {e}"))?;
            crate::schema::register(world_kind, schema);
        }
        self.by_path.insert(
            (group, name, plural),
            Served {
                kind: world_kind,
                status_subresource: status,
                strategic_merge: false,
            },
        );
        // Its schema is what a body must meet (no Rust type to decode into).
        self.decoders.insert(world_kind, |v| {
            v.is_object()
                .then_some(())
                .ok_or_else(|| "an object".to_string())
        });
        Ok(self)
    }

    /// The kind at `/api(s)/{group}/{version}/{plural}`.
    pub fn at(&self, group: &str, version: &str, plural: &str) -> Option<Served> {
        // A handful of kinds: a scan without building the key's strings.
        self.by_path
            .iter()
            .find(|((g, v, p), _)| g == group && v == version && p == plural)
            .map(|(_, s)| *s)
    }

    /// The served kind `kind`, if it is served.
    pub fn served(&self, kind: Kind) -> Option<Served> {
        self.by_path.values().find(|s| s.kind == kind).copied()
    }

    /// `object` as the world stores it (a test's or a scenario's seed object); an error
    /// for a kind not served or JSON the server would refuse.
    pub fn object<K>(&self, object: &K) -> Result<reconsim_world::object::Object, ObjectError>
    where
        K: kube::Resource<DynamicType = ()> + serde::Serialize,
        K::Scope: 'static,
    {
        let kind = kind_of::<K>();
        let served = self.served(kind).ok_or(ObjectError::NotServed(kind))?;
        let v = serde_json::to_value(object).map_err(|e| ObjectError::Refused {
            kind,
            message: e.to_string(),
        })?;
        let namespace = v["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        crate::wire::from_json(&v, served, &namespace)
            .map(|p| p.object)
            .map_err(|r| ObjectError::Refused {
                kind,
                message: r.message,
            })
    }

    /// Every served kind with its REST path's group, version and plural, in path order.
    pub fn paths(&self) -> impl Iterator<Item = (&str, &str, &str, Served)> + '_ {
        self.by_path
            .iter()
            .map(|((g, v, p), s)| (g.as_str(), v.as_str(), p.as_str(), *s))
    }

    /// Every served kind.
    pub fn all(&self) -> impl Iterator<Item = Served> + '_ {
        self.by_path.values().copied()
    }

    /// Whether `json` decodes as the served `kind`'s Rust type (a number where a string
    /// belongs, a CRD's missing `spec`): the API server answers such a body 400 before
    /// it stores anything. `Err` says why, as serde does.
    pub fn decodes(&self, kind: Kind, json: &Value) -> Result<(), String> {
        match self.decoders.get(&kind) {
            Some(decode) => decode(json),
            None => Err(format!("{kind} is not served")),
        }
    }
}

/// Why [`Kinds::object`] could not make a world object of a kube-rs one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectError {
    /// The kind is not among the served ones (register it: `Kinds::new().crd::<K>()`).
    NotServed(Kind),
    /// Its JSON does not serialize, or the API server would refuse it (a bad name, a
    /// missing field).
    Refused { kind: Kind, message: String },
}

impl std::fmt::Display for ObjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObjectError::NotServed(kind) => {
                write!(f, "{kind} is not served (register it in Kinds)")
            }
            ObjectError::Refused { kind, message } => write!(f, "{kind}: {message}"),
        }
    }
}

impl std::error::Error for ObjectError {}
