//! Invariants written in CEL, Kubernetes' own expression language (the one of CRD
//! validation rules and ValidatingAdmissionPolicy), over objects as their JSON: a
//! team writes what must hold of its objects in a scenario file, without Rust.
//!
//! - [`Rule`]: for each object of a kind, an expression over `self` (the object) that
//!   must be true at every check (`self.status.replicas <= self.spec.replicas`);
//! - [`replicas`]: "at most `replicas` live children per owner", the checker of
//!   `reconsim_check::replicas`, its `replicas` an expression over the owner
//!   (`self.spec.replicas`): a child never appears while its owner already has that
//!   many (a scale-down's surplus is not a violation);
//! - [`Expr::holds_for_all`]: a desired state, each object of a kind meeting a rule.
//!
//! Expressions are compiled once, at load, so a typo is an error at its field; an
//! expression that fails on an object (a missing field without `has()`) is a
//! violation that says so, never a silent pass.

use crate::wire;
use reconsim_check::replicas::AtMostReplicas;
use reconsim_check::{Check, Reads, View, Violation};
use reconsim_world::object::{Kind, Object};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// A compiled CEL expression and its source.
#[derive(Clone)]
pub struct Expr {
    source: Arc<str>,
    program: Arc<::cel::Program>,
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Expr({:?})", self.source)
    }
}

impl Expr {
    /// `source` compiled; an error says where it does not parse.
    pub fn compile(source: &str) -> Result<Expr, String> {
        let program = ::cel::Program::compile(source).map_err(|e| format!("not CEL: {e}"))?;
        Ok(Expr {
            source: source.into(),
            program: Arc::new(program),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    fn eval(&self, object: &Value) -> Result<::cel::Value, String> {
        self.eval_with(&[("self", object)])
    }

    /// The expression's value with each `(name, value)` bound.
    fn eval_with(&self, vars: &[(&str, &Value)]) -> Result<::cel::Value, String> {
        let mut ctx = ::cel::Context::default();
        for (name, v) in vars {
            let value = ::cel::to_value(v).map_err(|e| format!("`{name}` as CEL: {e}"))?;
            ctx.add_variable_from_value(*name, value);
        }
        self.program
            .execute(&ctx)
            .map_err(|e| format!("`{}` fails: {e}", self.source))
    }

    /// The expression's truth with each `(name, value)` bound (for [`Over`]: each
    /// name a list of objects).
    pub fn test_with(&self, vars: &[(&str, &Value)]) -> Result<bool, String> {
        match self.eval_with(vars)? {
            ::cel::Value::Bool(b) => Ok(b),
            other => Err(format!("`{}` is {other:?}, not a bool", self.source)),
        }
    }

    /// The expression's truth for `object` (as `self`).
    pub fn test(&self, object: &Value) -> Result<bool, String> {
        match self.eval(object)? {
            ::cel::Value::Bool(b) => Ok(b),
            other => Err(format!("`{}` is {other:?}, not a bool", self.source)),
        }
    }

    /// The expression's value for `object` (as `self`), a count.
    pub fn count(&self, object: &Value) -> Result<u64, String> {
        match self.eval(object)? {
            ::cel::Value::Int(i) if i >= 0 => Ok(i as u64),
            ::cel::Value::UInt(u) => Ok(u),
            other => Err(format!("`{}` is {other:?}, not a count", self.source)),
        }
    }

    /// Whether every object of `kind` meets the expression; `Err` names one that does
    /// not.
    pub fn holds_for_all(&self, kind: Kind, view: &View<'_>) -> Result<(), String> {
        for o in view.api.list(kind) {
            let json = wire::to_json(o).unwrap_or(Value::Null);
            match self.test(&json) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(format!(
                        "{kind} {} does not meet `{}`",
                        o.key(),
                        self.source
                    ));
                }
                Err(e) => return Err(format!("{kind} {}: {e}", o.key())),
            }
        }
        Ok(())
    }
}

/// For each object of a kind, an expression that must hold at every check.
#[derive(Clone, Debug)]
pub struct Rule {
    pub invariant: String,
    pub kind: Kind,
    pub expr: Expr,
}

impl Check for Rule {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let broken = self.expr.holds_for_all(self.kind, view).err()?;
        let object = view
            .api
            .list(self.kind)
            .find(|o| {
                let json = wire::to_json(o).unwrap_or(Value::Null);
                self.expr.test(&json) != Ok(true)
            })
            .map(|o| format!("{} {}", self.kind, o.meta.name));
        Some(Violation {
            invariant: self.invariant.clone(),
            time: view.now,
            message: broken,
            objects: object.into_iter().collect(),
        })
    }

    fn reads(&self) -> Reads {
        Reads::kinds([self.kind])
    }
}

/// An expression over lists of objects, one list per kind, each under a name of its
/// own (`sets`, `maps`): what must hold across kinds
/// (`maps.all(m, sets.exists(s, s.metadata.name == m.metadata.labels['set']))`).
#[derive(Clone, Debug)]
pub struct Over {
    pub invariant: String,
    /// Each name, and the kind whose objects it lists (in the API server's order).
    pub lists: Vec<(String, Kind)>,
    pub expr: Expr,
}

impl Over {
    /// Whether the expression holds of the world's objects now; `Err` says why not.
    pub fn holds(&self, view: &View<'_>) -> Result<(), String> {
        let lists: Vec<(&str, Value)> = self
            .lists
            .iter()
            .map(|(name, kind)| {
                let objects = view
                    .api
                    .list(*kind)
                    .map(|o| wire::to_json(o).unwrap_or(Value::Null))
                    .collect();
                (name.as_str(), Value::Array(objects))
            })
            .collect();
        let vars: Vec<(&str, &Value)> = lists.iter().map(|(n, v)| (*n, v)).collect();
        match self.expr.test_with(&vars)? {
            true => Ok(()),
            false => Err(format!("`{}` is false", self.expr.source)),
        }
    }
}

impl Check for Over {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let broken = self.holds(view).err()?;
        Some(Violation {
            invariant: self.invariant.clone(),
            time: view.now,
            message: broken,
            objects: Vec::new(),
        })
    }

    fn reads(&self) -> Reads {
        Reads::kinds(self.lists.iter().map(|(_, k)| *k))
    }
}

/// Whether `name` can name a list in an [`Over`] expression: a CEL identifier that is
/// not `self` nor one of CEL's reserved words.
pub fn list_name_ok(name: &str) -> bool {
    const RESERVED: &[&str] = &[
        "self",
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&name)
}

/// "At most `replicas` live children of kind `child` per `owner`", `replicas` read
/// from the owner by a CEL expression (an owner it fails on counts as 0).
pub fn replicas(invariant: &str, owner: Kind, child: Kind, replicas: Expr) -> AtMostReplicas {
    AtMostReplicas::new(invariant, owner, child, move |o: &Object| {
        let json = wire::to_json(o).unwrap_or(Value::Null);
        replicas.count(&json).unwrap_or(0).min(u32::MAX as u64) as u32
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_test_and_count_objects_as_json() {
        let o = json!({"spec": {"replicas": 3}, "status": {"replicas": 2}});
        assert_eq!(
            Expr::compile("self.status.replicas <= self.spec.replicas")
                .unwrap()
                .test(&o),
            Ok(true)
        );
        assert_eq!(
            Expr::compile("self.spec.replicas").unwrap().count(&o),
            Ok(3)
        );
        assert!(
            Expr::compile("self.spec.replicas")
                .unwrap()
                .test(&o)
                .is_err(),
            "not a bool"
        );
        assert!(
            Expr::compile("self.spec.nope > 1")
                .unwrap()
                .test(&o)
                .is_err(),
            "a missing field fails"
        );
        assert_eq!(
            Expr::compile("has(self.spec.nope)").unwrap().test(&o),
            Ok(false)
        );
        assert!(Expr::compile("self.spec.(").is_err());
    }

    #[test]
    fn a_rule_over_lists_of_objects_relates_kinds() {
        let sets = json!([{"metadata": {"name": "web"}}]);
        let maps = json!([
            {"metadata": {"name": "web-1", "labels": {"set": "web"}}},
            {"metadata": {"name": "db-1", "labels": {"set": "db"}}}
        ]);
        let e = Expr::compile(
            "maps.all(m, sets.exists(s, s.metadata.name == m.metadata.labels['set']))",
        )
        .unwrap();
        assert_eq!(e.test_with(&[("sets", &sets), ("maps", &maps)]), Ok(false));
        let one = json!([maps[0].clone()]);
        assert_eq!(e.test_with(&[("sets", &sets), ("maps", &one)]), Ok(true));
        assert!(
            e.test_with(&[("sets", &sets)]).is_err(),
            "an unbound name fails"
        );
        assert!(list_name_ok("maps") && list_name_ok("_x1"));
        assert!(!list_name_ok("self") && !list_name_ok("in") && !list_name_ok("1a"));
        assert!(!list_name_ok("") && !list_name_ok("a-b"));
    }
}
