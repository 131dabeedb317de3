//! Object names as the API server validates them on create (apimachinery
//! `api/validation/objectmeta.go` `ValidateObjectMeta`, `NameIsDNSSubdomain` and
//! `NameIsDNSLabel`; `util/validation/validation.go` `IsDNS1123Subdomain`,
//! `IsDNS1123Label`; docs/semantics.md 4.18): a Namespace's name is an RFC 1123 label,
//! every other served kind's (custom resources' too) an RFC 1123 subdomain. A
//! `generateName` is checked as a prefix: its trailing dash stands for the suffix
//! to come (`maskTrailingDash`).

use reconsim_world::object::Kind;

const SUBDOMAIN_MAX: usize = 253;
const LABEL_MAX: usize = 63;

/// Why `name` is not a valid RFC 1123 label: each of the server's messages.
fn label_errors(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if name.len() > LABEL_MAX {
        errors.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    if !is_label(name) {
        errors.push(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into(),
        );
    }
    errors
}

/// Why `name` is not a valid RFC 1123 subdomain.
fn subdomain_errors(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if name.len() > SUBDOMAIN_MAX {
        errors.push(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    if name.is_empty() || !name.split('.').all(is_label) {
        errors.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into(),
        );
    }
    errors
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// The kind as a 422 names it: `ConfigMap`, `Deployment.apps`.
pub fn qualified_kind(kind: Kind) -> String {
    if kind.group().is_empty() {
        kind.as_str().to_string()
    } else {
        format!("{}.{}", kind.as_str(), kind.group())
    }
}

/// The 422 message for a create of `kind` with `name` or `generate_name` the server
/// refuses; `None` when it takes them.
pub fn check(kind: Kind, name: Option<&str>, generate_name: Option<&str>) -> Option<String> {
    let rule = |n: &str| {
        if kind.group().is_empty() && kind.as_str() == "Namespace" {
            label_errors(n)
        } else {
            subdomain_errors(n)
        }
    };
    let (field, value, errors) = match (name.filter(|n| !n.is_empty()), generate_name) {
        (Some(n), _) => ("metadata.name", n, rule(n)),
        (None, Some(prefix)) if !prefix.is_empty() => {
            let masked = match prefix.strip_suffix('-') {
                Some(head) => format!("{head}a"),
                None => prefix.to_string(),
            };
            ("metadata.generateName", prefix, rule(&masked))
        }
        _ => return None,
    };
    if errors.is_empty() {
        return None;
    }
    let shown = name.unwrap_or("");
    Some(format!(
        "{} {shown:?} is invalid: {field}: Invalid value: {value:?}: {}",
        qualified_kind(kind),
        errors.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains_as_the_server_checks_them() {
        assert!(is_label("a-1") && is_label("0") && !is_label("-a") && !is_label("a-"));
        assert!(!is_label("A") && !is_label("a_b") && !is_label(""));
        assert!(subdomain_errors("web.example-1.com").is_empty());
        assert_eq!(subdomain_errors("Web").len(), 1);
        assert_eq!(subdomain_errors("a..b").len(), 1);
        assert_eq!(subdomain_errors(&"a".repeat(254)).len(), 1);
        assert_eq!(subdomain_errors(&format!("{}_", "a".repeat(254))).len(), 2);
        assert_eq!(label_errors("team.a").len(), 1);
    }
}
