//! Test-local custom kinds: the world's tests need custom resources, and the world names no family.
#![allow(dead_code)]

pub mod apiserver;

use reconsim_world::api::Patch;
use reconsim_world::object::{Kind, KindInfo, Resource};
use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct WidgetSpec {
    pub provider_id: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct WidgetStatus {
    pub phase: Option<String>,
    pub instance_id: Option<String>,
}

/// A namespaced custom resource with a status subresource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Widget {
    pub spec: WidgetSpec,
    pub status: WidgetStatus,
}

impl Resource for Widget {
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "test.reconsim.dev",
        "v1",
        "Widget",
        "widgets",
    ));
    reconsim_world::status_subresource!();
}

/// A typed merge patch of a Widget: each field that is `Some` is set (spec.providerId,
/// status.instanceId, status.phase), every other field is left alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct WidgetFields {
    pub provider_id: Option<String>,
    pub instance_id: Option<String>,
    pub phase: Option<String>,
}

impl Patch for WidgetFields {
    type Target = Widget;

    fn apply(&self, w: &mut Widget) {
        if self.provider_id.is_some() {
            w.spec.provider_id = self.provider_id.clone();
        }
        if self.instance_id.is_some() {
            w.status.instance_id = self.instance_id.clone();
        }
        if self.phase.is_some() {
            w.status.phase = self.phase.clone();
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct WidgetSetSpec {
    pub replicas: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct WidgetSetStatus {
    pub replicas: u32,
}

/// A namespaced owner of Widgets, with a status subresource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct WidgetSet {
    pub spec: WidgetSetSpec,
    pub status: WidgetSetStatus,
}

impl Resource for WidgetSet {
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "test.reconsim.dev",
        "v1",
        "WidgetSet",
        "widgetsets",
    ));
    reconsim_world::status_subresource!();
}
