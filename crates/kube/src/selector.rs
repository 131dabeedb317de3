//! Label and field selectors, as the API server parses and matches them
//! (apimachinery `labels/selector.go` and `fields/selector.go`; docs/semantics.md 4.15).
//!
//! Labels: `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`,
//! comma-joined (a comma inside parentheses belongs to the set). Fields: `f=v`, `f==v`,
//! `f!=v`, comma-joined, on the fields the kind's registry serves: `metadata.name` and
//! `metadata.namespace` for every kind, and a Pod's `spec.nodeName` and `status.phase`
//! and a Node's `spec.unschedulable` among the built-in kinds' own.

use reconsim_world::object::{Kind, Node, Object, Pod, PodPhase, Resource};
use std::collections::BTreeMap;

/// A request's selectors: its labels' and its fields'.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    labels: Vec<(String, Requirement)>,
    fields: Vec<(Field, bool, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String),
    NotEquals(String),
    Exists,
    Absent,
    In(Vec<String>),
    NotIn(Vec<String>),
}

/// A field a selector may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Name,
    Namespace,
    PodNodeName,
    PodPhase,
    NodeUnschedulable,
}

/// Why a selector was refused: the HTTP status and the message, as the server words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub code: u16,
    pub message: String,
}

impl Selector {
    /// A label selector. `None` for what the real parser rejects, or the numeric `<`
    /// and `>` it takes but reconsim does not serve.
    pub fn parse(text: &str) -> Option<Selector> {
        let mut labels = Vec::new();
        for term in terms(text) {
            labels.push(label_term(term)?);
        }
        Some(Selector {
            labels,
            fields: Vec::new(),
        })
    }

    /// This selector with the field selector `text` for `kind` (`fieldSelector`).
    pub fn with_fields(mut self, text: &str, kind: Kind) -> Result<Selector, Refused> {
        for term in terms(text) {
            let (key, equals, value) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, true, v)
            } else {
                return Err(Refused {
                    code: 400,
                    message: format!("invalid selector: '{text}'; can't understand '{term}'"),
                });
            };
            let key = key.trim();
            let field = field_of(key, kind).ok_or_else(|| Refused {
                code: 400,
                message: format!("field label not supported: {key}"),
            })?;
            self.fields.push((field, equals, unescape(value.trim())));
        }
        Ok(self)
    }

    /// Whether labels alone satisfy the label selector.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.labels.iter().all(|(k, r)| match r {
            Requirement::Equals(v) => labels.get(k) == Some(v),
            Requirement::NotEquals(v) => labels.get(k) != Some(v),
            Requirement::Exists => labels.contains_key(k),
            Requirement::Absent => !labels.contains_key(k),
            Requirement::In(set) => labels.get(k).is_some_and(|v| set.contains(v)),
            Requirement::NotIn(set) => labels.get(k).is_none_or(|v| !set.contains(v)),
        })
    }

    /// Whether `o` satisfies both selectors.
    pub fn matches_object(&self, o: &Object) -> bool {
        self.matches(&o.meta.labels)
            && self
                .fields
                .iter()
                .all(|(field, equals, value)| (field_value(*field, o) == *value) == *equals)
    }
}

/// The comma-separated terms of a selector, a comma inside parentheses kept in its term.
fn terms(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            '\\' if !escaped => {
                escaped = true;
                continue;
            }
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 && !escaped => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        escaped = false;
    }
    out.push(text[start..].trim());
    out.retain(|t| !t.is_empty());
    out
}

fn label_term(term: &str) -> Option<(String, Requirement)> {
    if let Some((k, v)) = term.split_once("!=") {
        return Some((k.trim().into(), Requirement::NotEquals(v.trim().into())));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Some((k.trim().into(), Requirement::Equals(v.trim().into())));
    }
    if let Some(k) = term.strip_prefix('!') {
        return Some((k.trim().into(), Requirement::Absent));
    }
    if term.contains('<') || term.contains('>') {
        return None;
    }
    let Some(open) = term.find('(') else {
        if term.contains(char::is_whitespace) {
            return None;
        }
        return Some((term.into(), Requirement::Exists));
    };
    let inner = term[open + 1..].strip_suffix(')')?;
    let mut head = term[..open].split_whitespace();
    let (key, op) = (head.next()?, head.next()?);
    if head.next().is_some() {
        return None;
    }
    let set: Vec<String> = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    match op {
        "in" => Some((key.into(), Requirement::In(set))),
        "notin" => Some((key.into(), Requirement::NotIn(set))),
        _ => None,
    }
}

/// The fields `kind`'s registry serves (its `GetAttrs`): every kind's
/// `ObjectMetaFieldsSet`, and the built-in kinds' own that the world models.
fn field_of(key: &str, kind: Kind) -> Option<Field> {
    match key {
        "metadata.name" => Some(Field::Name),
        // A cluster-scoped kind's field set has no namespace (`ObjectMetaFieldsSet`'s
        // `hasNamespaceField`).
        "metadata.namespace" if kind.info().namespaced => Some(Field::Namespace),
        "spec.nodeName" if kind == Pod::KIND => Some(Field::PodNodeName),
        "status.phase" if kind == Pod::KIND => Some(Field::PodPhase),
        "spec.unschedulable" if kind == Node::KIND => Some(Field::NodeUnschedulable),
        _ => None,
    }
}

fn field_value(field: Field, o: &Object) -> String {
    match field {
        Field::Name => o.meta.name.clone(),
        Field::Namespace => o.meta.namespace.clone(),
        Field::PodNodeName => o
            .typed::<Pod>()
            .and_then(|p| p.spec.node_name.clone())
            .unwrap_or_default(),
        Field::PodPhase => o
            .typed::<Pod>()
            .map(|p| match p.status.phase {
                PodPhase::Pending => "Pending",
                PodPhase::Running => "Running",
                PodPhase::Succeeded => "Succeeded",
                PodPhase::Failed => "Failed",
            })
            .unwrap_or_default()
            .to_string(),
        Field::NodeUnschedulable => o
            .typed::<Node>()
            .is_some_and(|n| n.spec.unschedulable)
            .to_string(),
    }
}

/// A field selector's value with its `\,` `\=` `\\` escapes undone.
fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(next) = chars.next()
        {
            out.push(next);
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> BTreeMap<String, String> {
        [("app", "web"), ("tier", "front")]
            .map(|(k, v)| (k.into(), v.into()))
            .into()
    }

    #[test]
    fn equality_based_selectors_match_as_the_api_server_does() {
        let labels = labels();
        let m = |s: &str| Selector::parse(s).unwrap().matches(&labels);
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(m("app!=db"));
        assert!(m("!owner"));
        assert!(!m("app=db"));
        assert!(!m("tier,owner"));
        assert!(m(""));
    }

    #[test]
    fn set_based_selectors_match_as_the_api_server_does() {
        let labels = labels();
        let m = |s: &str| Selector::parse(s).unwrap().matches(&labels);
        assert!(m("app in (web,db)"));
        assert!(m("app in (web, db),tier=front"));
        assert!(!m("app in (db)"));
        assert!(m("app notin (db,cache)"));
        assert!(!m("app notin (web)"));
        assert!(m("owner notin (x)"), "notin holds for an absent label");
        assert!(!m("owner in (x)"));
        assert!(Selector::parse("replicas > 3").is_none());
        assert!(Selector::parse("app of (web)").is_none());
    }

    #[test]
    fn field_selectors_name_only_the_fields_a_kind_serves() {
        let ok = Selector::default()
            .with_fields("metadata.name=a,metadata.namespace!=b", Pod::KIND)
            .unwrap();
        assert_eq!(ok.fields.len(), 2);
        let refused = Selector::default()
            .with_fields("spec.nodeName=n1", Node::KIND)
            .unwrap_err();
        assert_eq!(
            refused,
            Refused {
                code: 400,
                message: "field label not supported: spec.nodeName".into()
            }
        );
        assert!(
            Selector::default()
                .with_fields("spec.nodeName=n1", Pod::KIND)
                .is_ok()
        );
        assert!(
            Selector::default()
                .with_fields("metadata.namespace=a", Node::KIND)
                .is_err(),
            "a Node has no namespace field"
        );
        assert_eq!(unescape(r"a\,b\=c"), "a,b=c");
        assert_eq!(terms(r"metadata.name=a\,b,metadata.namespace=c").len(), 2);
    }
}
