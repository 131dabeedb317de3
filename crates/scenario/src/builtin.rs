//! The builtin families' invariants by name: what scenario files name in `invariants`
//! besides the ones a binary registers ([`crate::extension`]).
//!
//! Each family registers its own (`invariants()` in crates/families/*/src/invariants.rs);
//! this is their union, in a fixed order (machine-api, Cluster API, MCO) for error
//! messages that list the known names.

use reconsim_check::NamedCheck;
use std::sync::LazyLock;

static BUILTIN: LazyLock<Vec<NamedCheck>> = LazyLock::new(|| {
    let mut all = reconsim_machineapi::invariants::invariants();
    all.extend(reconsim_capi::invariants::invariants());
    all.extend(reconsim_mco::invariants::invariants());
    all
});

/// Every builtin invariant.
pub fn invariants() -> &'static [NamedCheck] {
    &BUILTIN
}

/// The builtin invariant named `name`.
pub fn invariant(name: &str) -> Option<&'static NamedCheck> {
    invariants().iter().find(|i| i.name == name)
}
