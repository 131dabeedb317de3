//! The world's resources for the kinds the REST layer speaks: plain data the API
//! server stores, compares and hashes, converted to and from k8s-openapi's types at
//! the wire (metadata is the world's own [`ObjectMeta`]).

use k8s_openapi::ByteString;
use reconsim_world::api::Patch;
use reconsim_world::object::{Kind, KindInfo, Resource};
use serde::Serialize;
use std::collections::BTreeMap;

/// A core/v1 ConfigMap's body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct ConfigMap {
    pub data: BTreeMap<String, String>,
    pub binary_data: BTreeMap<String, Vec<u8>>,
    pub immutable: Option<bool>,
}

impl Resource for ConfigMap {
    const KIND: Kind = Kind::new(&KindInfo::namespaced("", "v1", "ConfigMap", "configmaps"));
}

impl ConfigMap {
    pub fn from_wire(cm: &k8s_openapi::api::core::v1::ConfigMap) -> Self {
        ConfigMap {
            data: cm.data.clone().unwrap_or_default(),
            binary_data: cm
                .binary_data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect(),
            immutable: cm.immutable,
        }
    }

    pub fn to_wire(&self) -> k8s_openapi::api::core::v1::ConfigMap {
        k8s_openapi::api::core::v1::ConfigMap {
            data: (!self.data.is_empty()).then(|| self.data.clone()),
            binary_data: (!self.binary_data.is_empty()).then(|| {
                self.binary_data
                    .iter()
                    .map(|(k, v)| (k.clone(), ByteString(v.clone())))
                    .collect()
            }),
            immutable: self.immutable,
            metadata: Default::default(),
        }
    }
}

/// A JSON merge patch of a ConfigMap's `data`: each key set, or removed (`null`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct ConfigMapData(pub BTreeMap<String, Option<String>>);

impl Patch for ConfigMapData {
    type Target = ConfigMap;

    fn apply(&self, target: &mut ConfigMap) {
        for (k, v) in &self.0 {
            match v {
                Some(v) => {
                    target.data.insert(k.clone(), v.clone());
                }
                None => {
                    target.data.remove(k);
                }
            }
        }
    }
}
