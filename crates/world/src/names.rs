//! Object names as the API server validates them on create, one rule per kind, for
//! every path that makes objects: the simulated API server ([`crate::apiserver`]), the
//! real-code REST layer (crates/kube), and scenario loading (every name a scenario
//! declares is checked against its kind before anything runs). docs/semantics.md 4.18.
//!
//! The facts, from the Kubernetes sources (facts copied, not code):
//! - A create runs `rest.BeforeCreate` (apiserver `registry/rest/create.go`): the name
//!   is generated from `generateName` first, then the kind's strategy validates the
//!   object, and a failure is `errors.NewInvalid(groupKind, name, errs)`: 422, reason
//!   `Invalid`, message `<Kind[.group]> "<name>" is invalid: <errors>`, the errors
//!   aggregated (one as itself, several as `[a, b]`; apimachinery
//!   `util/errors.aggregate.Error`), each `<field>: Invalid value: "<value>": <msg>`
//!   (`util/validation/field.Error`).
//! - The strategies call `ValidateObjectMeta` / `ValidateObjectMetaAccessor`
//!   (apimachinery `api/validation/objectmeta.go`) with the kind's name function: a
//!   non-empty `generateName` is checked as a prefix (`metadata.generateName`), then the
//!   name (`metadata.name`; empty is "name or generateName is required").
//! - The name functions (kubernetes `pkg/apis/core/validation/validation.go`,
//!   `ValidateNamespaceName`, `ValidateServiceName`, `ValidatePodName`, ...; apimachinery
//!   `api/validation/generic.go`): a Namespace's name is an RFC 1123 label
//!   (`NameIsDNSLabel`); a Service's an RFC 1035 label (`ValidateServiceName =
//!   NameIsDNS1035Label`: it must start with a letter; the `RelaxedServiceNameValidation`
//!   gate, alpha and off by default since 1.34, would relax it to an RFC 1123 label);
//!   RBAC's Roles, ClusterRoles and their bindings take any path segment name
//!   (`rbac/validation.ValidateRBACName = path.IsValidPathSegmentName`: not `.` or `..`,
//!   no `/` or `%`); every other built-in kind's here (Pod, Node, ConfigMap, Secret,
//!   Lease, Deployment, ...) and every custom resource's (apiextensions
//!   `customResourceStrategy.Validate`) is an RFC 1123 subdomain (`NameIsDNSSubdomain`).
//! - The rules and their messages (apimachinery `util/validation/validation.go`):
//!   `IsDNS1123Subdomain` (at most 253 bytes, dot-separated labels of `[a-z0-9-]`
//!   starting and ending alphanumeric), `IsDNS1123Label` (at most 63 bytes of one such
//!   label), `IsDNS1035Label` (at most 63, starting with a letter), `MaxLenError`
//!   ("must be no more than N characters", counting bytes), `RegexError`.
//! - As a prefix, a name's trailing dash stands for the suffix to come:
//!   `maskTrailingDash` replaces the last *two* bytes of a name longer than one byte that
//!   ends in `-` with `a` (an upstream quirk, kept: it decides which prefixes pass).

use crate::object::Kind;

const SUBDOMAIN_MAX: usize = 253;
const LABEL_MAX: usize = 63;

/// The rule a kind's names follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// RFC 1123 subdomain: most kinds, custom resources too.
    Subdomain,
    /// RFC 1123 label: Namespace.
    Label,
    /// RFC 1035 label: Service.
    Dns1035Label,
    /// Any name that is a safe path segment: RBAC's roles and bindings.
    PathSegment,
}

/// The RBAC kinds whose names are path segments.
const RBAC_KINDS: [&str; 4] = ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"];

/// core/v1 Namespace: a namespaced object's namespace is a Namespace's name.
pub const NAMESPACE: Kind = Kind::new(&crate::object::KindInfo::cluster_scoped(
    "",
    "v1",
    "Namespace",
    "namespaces",
));

/// The rule `kind`'s names follow on create.
pub fn rule(kind: Kind) -> Rule {
    match (kind.group(), kind.as_str()) {
        ("", "Namespace") => Rule::Label,
        ("", "Service") => Rule::Dns1035Label,
        ("rbac.authorization.k8s.io", k) if RBAC_KINDS.contains(&k) => Rule::PathSegment,
        _ => Rule::Subdomain,
    }
}

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

impl Rule {
    /// What the rule asks, in a scenario loader's words.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Subdomain => {
                "DNS-1123 subdomain: 1 to 253 characters among a-z 0-9 - ., dot-separated parts each starting and ending with a letter or digit"
            }
            Rule::Label => {
                "DNS-1123 label: 1 to 63 characters among a-z 0-9 -, starting and ending with a letter or digit"
            }
            Rule::Dns1035Label => {
                "DNS-1035 label: 1 to 63 characters among a-z 0-9 -, starting with a letter and ending with a letter or digit"
            }
            Rule::PathSegment => "a path segment: not empty, `.` or `..`, without `/` or `%`",
        }
    }

    /// The server's messages for `name` (none: it passes); `prefix` for a
    /// `generateName`.
    pub fn errors(self, name: &str, prefix: bool) -> Vec<String> {
        if self == Rule::PathSegment {
            return path_segment_errors(name, prefix);
        }
        let masked;
        let name: &[u8] = if prefix {
            masked = mask_trailing_dash(name.as_bytes());
            &masked
        } else {
            name.as_bytes()
        };
        let (max, ok, msg) = match self {
            Rule::Subdomain => (
                SUBDOMAIN_MAX,
                !name.is_empty() && name.split(|b| *b == b'.').all(is_label),
                SUBDOMAIN_MSG,
            ),
            Rule::Label => (LABEL_MAX, is_label(name), LABEL_MSG),
            Rule::Dns1035Label => (
                LABEL_MAX,
                is_label(name) && name[0].is_ascii_lowercase(),
                DNS1035_MSG,
            ),
            Rule::PathSegment => unreachable!("handled above"),
        };
        let mut errors = Vec::new();
        if name.len() > max {
            errors.push(format!("must be no more than {max} characters"));
        }
        if !ok {
            errors.push(msg.to_string());
        }
        errors
    }
}

/// `maskTrailingDash`: a name longer than one byte that ends in `-` loses its last two
/// bytes to an `a`.
fn mask_trailing_dash(name: &[u8]) -> Vec<u8> {
    if name.len() > 1 && name.ends_with(b"-") {
        let mut m = name[..name.len() - 2].to_vec();
        m.push(b'a');
        m
    } else {
        name.to_vec()
    }
}

/// `IsValidPathSegmentName` (`IsValidPathSegmentPrefix` for a prefix: no whole-name
/// check, a suffix will follow).
fn path_segment_errors(name: &str, prefix: bool) -> Vec<String> {
    if !prefix && (name == "." || name == "..") {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .into_iter()
        .filter(|c| name.contains(c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label(b: &[u8]) -> bool {
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// The kind as a 422 names it (`GroupKind.String`): `ConfigMap`, `Deployment.apps`.
pub fn qualified_kind(kind: Kind) -> String {
    if kind.group().is_empty() {
        kind.as_str().to_string()
    } else {
        format!("{}.{}", kind.as_str(), kind.group())
    }
}

/// The 422 message of a create of `kind` whose name (generated already, as the server
/// generates before it validates) or `generateName` the server refuses; `None` when it
/// takes them. Only the name's rules: the server's other checks are its own.
pub fn create_invalid(kind: Kind, name: &str, generate_name: Option<&str>) -> Option<String> {
    let rule = rule(kind);
    let mut errors = Vec::new();
    if let Some(prefix) = generate_name.filter(|p| !p.is_empty()) {
        for msg in rule.errors(prefix, true) {
            errors.push(format!(
                "metadata.generateName: Invalid value: {prefix:?}: {msg}"
            ));
        }
    }
    if name.is_empty() {
        errors.push("metadata.name: Required value: name or generateName is required".into());
    } else {
        for msg in rule.errors(name, false) {
            errors.push(format!("metadata.name: Invalid value: {name:?}: {msg}"));
        }
    }
    let listed = match errors.len() {
        0 => return None,
        1 => errors.remove(0),
        _ => format!("[{}]", errors.join(", ")),
    };
    Some(format!(
        "{} {name:?} is invalid: {listed}",
        qualified_kind(kind)
    ))
}

/// `Err(expected)` unless `name` (a `generateName` if `prefix`) is one the server
/// takes for `kind`: what a scenario loader says it expected (`a Machine name
/// (DNS-1123 subdomain: ...)`); the caller shows the name ([`quoted`]).
pub fn check(kind: Kind, name: &str, prefix: bool) -> Result<(), String> {
    let rule = rule(kind);
    let empty = name.is_empty();
    if empty || !rule.errors(name, prefix).is_empty() {
        let what = if prefix { "generateName" } else { "name" };
        return Err(format!("a {} {what} ({})", kind.as_str(), rule.describe()));
    }
    Ok(())
}

/// A name for an error message: quoted and escaped, so a name holding a line break or
/// a megabyte of text cannot forge or flood the lines around it (its first 60
/// characters, then `...`).
pub fn quoted(name: &str) -> String {
    const SHOWN: usize = 60;
    let mut s: String = name.chars().take(SHOWN).collect();
    if name.chars().nth(SHOWN).is_some() {
        s.push_str("...");
    }
    format!("{s:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::KindInfo;

    const CONFIG_MAP: Kind = Kind::new(&KindInfo::namespaced("", "v1", "ConfigMap", "configmaps"));
    const SERVICE: Kind = Kind::new(&KindInfo::namespaced("", "v1", "Service", "services"));
    const ROLE: Kind = Kind::new(&KindInfo::namespaced(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
    ));

    #[test]
    fn labels_and_subdomains_as_the_server_checks_them() {
        assert!(is_label(b"a-1") && is_label(b"0") && !is_label(b"-a") && !is_label(b"a-"));
        assert!(!is_label(b"A") && !is_label(b"a_b") && !is_label(b""));
        let sub = |n: &str| Rule::Subdomain.errors(n, false).len();
        assert_eq!(sub("web.example-1.com"), 0);
        assert_eq!(sub("Web"), 1);
        assert_eq!(sub("a..b"), 1);
        assert_eq!(sub(".."), 1);
        assert_eq!(sub("a b"), 1);
        assert_eq!(sub("a/b"), 1);
        assert_eq!(sub(&"a".repeat(253)), 0);
        assert_eq!(sub(&"a".repeat(254)), 1);
        assert_eq!(sub(&format!("{}_", "a".repeat(254))), 2);
        assert_eq!(Rule::Label.errors("team.a", false).len(), 1);
        assert_eq!(Rule::Dns1035Label.errors("1web", false).len(), 1);
        assert_eq!(Rule::Dns1035Label.errors("web-1", false).len(), 0);
        assert_eq!(Rule::PathSegment.errors("system:admin", false).len(), 0);
        assert_eq!(Rule::PathSegment.errors("..", false), ["may not be '..'"]);
        assert_eq!(Rule::PathSegment.errors("a/b%", false).len(), 2);
    }

    #[test]
    fn a_prefix_loses_its_trailing_dash_as_upstream_masks_it() {
        // The last two bytes become `a`: `.-` passes as `a`, `-` alone is kept.
        assert!(Rule::Subdomain.errors("web-", true).is_empty());
        assert!(Rule::Subdomain.errors(".-", true).is_empty());
        assert_eq!(Rule::Subdomain.errors("-", true).len(), 1);
        assert_eq!(Rule::Subdomain.errors("Web-", true).len(), 1);
    }

    #[test]
    fn kinds_have_their_rules() {
        assert_eq!(rule(CONFIG_MAP), Rule::Subdomain);
        assert_eq!(rule(NAMESPACE), Rule::Label);
        assert_eq!(rule(SERVICE), Rule::Dns1035Label);
        assert_eq!(rule(ROLE), Rule::PathSegment);
    }

    #[test]
    fn the_422_message_lists_every_error_as_the_server_aggregates_them() {
        assert_eq!(create_invalid(CONFIG_MAP, "web", None), None);
        assert_eq!(
            create_invalid(CONFIG_MAP, "Web", None).unwrap(),
            format!(
                r#"ConfigMap "Web" is invalid: metadata.name: Invalid value: "Web": {SUBDOMAIN_MSG}"#
            )
        );
        assert_eq!(
            create_invalid(CONFIG_MAP, "Web-bcdfg", Some("Web-")).unwrap(),
            format!(
                r#"ConfigMap "Web-bcdfg" is invalid: [metadata.generateName: Invalid value: "Web-": {SUBDOMAIN_MSG}, metadata.name: Invalid value: "Web-bcdfg": {SUBDOMAIN_MSG}]"#
            )
        );
        assert!(
            create_invalid(SERVICE, "1web", None)
                .unwrap()
                .contains("DNS-1035")
        );
    }

    #[test]
    fn a_loader_is_told_what_was_expected_and_names_are_shown_bounded() {
        assert!(check(CONFIG_MAP, "web", false).is_ok());
        assert!(check(CONFIG_MAP, "", false).is_err());
        let why = check(CONFIG_MAP, "my set", false).unwrap_err();
        assert!(
            why.starts_with("a ConfigMap name (DNS-1123 subdomain"),
            "{why}"
        );
        let shown = quoted(&"x".repeat(1 << 20));
        assert!(shown.len() < 70 && shown.ends_with("...\""), "{shown}");
        assert_eq!(quoted("a\nb"), r#""a\nb""#);
    }
}
