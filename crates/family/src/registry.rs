//! The [`Family`] trait and the [`Families`] registry a binary builds once.
//!
//! A binary's registry lists every family its scenario files may name: the builtin ones
//! (`reconsim::families::builtin()`) and the user's, registered the same way
//! (`.with(family)`). The registry's order is the order a world spawns the families'
//! processes in, so it is part of what a seed means: appending a family moves no other
//! family's trace.

use crate::host::RunHost;
use crate::params::ParamError;
use crate::section::FamilySection;
use reconsim_check::NamedCheck;
use std::fmt;
use std::sync::Arc;

/// A family: its section of scenario files, its workload actions and its invariants.
pub trait Family: Send + Sync {
    /// Its section's key under `controllers` in scenario files (`machine_api`, `kcp`).
    fn name(&self) -> &str;
    /// Parse its section into its own typed parameters; errors' paths are relative to
    /// the section ([`crate::params::parse`] gives them).
    fn parse(&self, section: &serde_json::Value) -> Result<Box<dyn FamilySection>, ParamError>;
    /// [`Family::parse`] of a section read from a file in folder `base` (`None`: not
    /// from a file), for a family whose section names files by relative paths. The
    /// parsed section writes them resolved, so a failure file that embeds it replays
    /// from anywhere.
    fn parse_in(
        &self,
        section: &serde_json::Value,
        base: Option<&std::path::Path>,
    ) -> Result<Box<dyn FamilySection>, ParamError> {
        let _ = base;
        self.parse(section)
    }
    /// The names of its workload actions (`{"<name>": params}` in a scenario's
    /// `workload`), unique across a registry.
    fn actions(&self) -> &[&str] {
        &[]
    }
    /// Its invariants, by name (unique across a registry). A scenario may check any
    /// registered invariant, whatever families it runs.
    fn invariants(&self) -> Vec<NamedCheck> {
        Vec::new()
    }
    /// How its runs must be hosted, if not inline ([`crate::host`]): a family that runs
    /// real code gives reconsim-kube's host.
    fn host(&self) -> Option<RunHost> {
        None
    }
}

/// The families a binary knows, in spawn order. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct Families {
    families: Vec<Arc<dyn Family>>,
    invariants: Vec<NamedCheck>,
}

impl Families {
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `family` after the ones registered before.
    ///
    /// # Panics
    /// If its name, one of its actions or one of its invariants is registered already:
    /// a binary's registry is fixed code, so a clash is a bug of that binary.
    pub fn with(mut self, family: impl Family + 'static) -> Self {
        let name = family.name();
        assert!(
            self.get(name).is_none(),
            "family `{name}` is registered twice"
        );
        for action in family.actions() {
            if let Some(other) = self.by_action(action) {
                panic!(
                    "action `{action}` of family `{name}` is family `{}`'s already",
                    other.name()
                );
            }
        }
        for check in family.invariants() {
            assert!(
                self.invariant(&check.name).is_none(),
                "invariant `{}` of family `{name}` is registered twice",
                check.name
            );
            self.invariants.push(check);
        }
        self.families.push(Arc::new(family));
        self
    }

    /// The families, in registration (spawn) order.
    pub fn iter(&self) -> impl Iterator<Item = &dyn Family> {
        self.families.iter().map(|f| &**f)
    }

    /// The family whose section is `name`, and its place in the order.
    pub fn get(&self, name: &str) -> Option<(usize, &dyn Family)> {
        self.iter().enumerate().find(|(_, f)| f.name() == name)
    }

    /// The family that declares workload action `action`.
    pub fn by_action(&self, action: &str) -> Option<&dyn Family> {
        self.iter().find(|f| f.actions().contains(&action))
    }

    /// The registered invariant `name`.
    pub fn invariant(&self, name: &str) -> Option<&NamedCheck> {
        self.invariants.iter().find(|c| c.name == name)
    }

    /// The host every run of this binary's scenarios goes through: the first family's
    /// that names one ([`Family::host`]), else none (inline).
    pub fn host(&self) -> Option<RunHost> {
        self.iter().find_map(|f| f.host())
    }

    /// Every family's section name, in order.
    pub fn names(&self) -> Vec<&str> {
        self.iter().map(|f| f.name()).collect()
    }

    /// Every registered invariant's name, in registration order.
    pub fn invariant_names(&self) -> Vec<&str> {
        self.invariants.iter().map(|c| c.name.as_str()).collect()
    }

    /// Every registered action's name with its family's, in registration order.
    pub fn action_names(&self) -> Vec<(&str, &str)> {
        self.iter()
            .flat_map(|f| f.actions().iter().map(move |a| (*a, f.name())))
            .collect()
    }
}

impl fmt::Debug for Families {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Families")
            .field("families", &self.names())
            .field("invariants", &self.invariant_names())
            .finish()
    }
}

/// A registry is not part of a scenario's value: two scenarios with the same fields are
/// equal whatever they were loaded with.
impl PartialEq for Families {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Families {}
