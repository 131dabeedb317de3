//! A scenario's `controllers`: one section per family it runs, each parsed by its family
//! ([`reconsim_family::Family::parse`]) into the family's own typed parameters.
//!
//! The sections are kept in the registry's order (the order their processes spawn in),
//! whatever order the file wrote them in, and serialize back to the file's shape, so a
//! failure file embeds them verbatim. Tests edit them typed:
//! `scenario.controllers.get_mut::<McoSpec>()`.

use reconsim_family::FamilySection;
use serde::ser::SerializeMap;
use std::fmt;

/// The families' sections of one scenario, in registry order.
#[derive(Default)]
pub struct Controllers {
    sections: Vec<Section>,
}

struct Section {
    /// The family's name: the section's key in the file.
    name: String,
    body: Box<dyn FamilySection>,
}

impl Controllers {
    /// Sections in registry order (the caller sorts).
    pub(crate) fn new(sections: Vec<(String, Box<dyn FamilySection>)>) -> Self {
        Controllers {
            sections: sections
                .into_iter()
                .map(|(name, body)| Section { name, body })
                .collect(),
        }
    }

    /// Every section with its family's name, in registry order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &dyn FamilySection)> {
        self.sections.iter().map(|s| (s.name.as_str(), &*s.body))
    }

    /// The section of family `name`.
    pub fn section(&self, name: &str) -> Option<&dyn FamilySection> {
        self.iter().find(|(n, _)| *n == name).map(|(_, s)| s)
    }

    /// The section of type `T` (a family's own section type), if the scenario runs it.
    pub fn get<T: FamilySection>(&self) -> Option<&T> {
        self.sections
            .iter()
            .find_map(|s| s.body.as_any().downcast_ref::<T>())
    }

    /// The section of type `T`, to edit (validate the scenario again after).
    pub fn get_mut<T: FamilySection>(&mut self) -> Option<&mut T> {
        self.sections
            .iter_mut()
            .find_map(|s| s.body.as_any_mut().downcast_mut::<T>())
    }

    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
    }

    pub fn len(&self) -> usize {
        self.sections.len()
    }
}

impl Clone for Controllers {
    fn clone(&self) -> Self {
        Controllers {
            sections: self
                .sections
                .iter()
                .map(|s| Section {
                    name: s.name.clone(),
                    body: s.body.clone_section(),
                })
                .collect(),
        }
    }
}

/// Equal when the same families have the same parameters, as written in files.
impl PartialEq for Controllers {
    fn eq(&self, other: &Self) -> bool {
        self.sections.len() == other.sections.len()
            && self
                .sections
                .iter()
                .zip(&other.sections)
                .all(|(a, b)| a.name == b.name && a.body.to_json() == b.body.to_json())
    }
}

impl Eq for Controllers {}

impl fmt::Debug for Controllers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.sections.iter().map(|s| (&s.name, &s.body)))
            .finish()
    }
}

impl serde::Serialize for Controllers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.sections.len()))?;
        for section in &self.sections {
            map.serialize_entry(&section.name, &section.body.to_json())?;
        }
        map.end()
    }
}
