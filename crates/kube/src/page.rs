//! A list in pages (`limit` and `continue`), as the API server's etcd store serves it
//! (apiserver `storage/etcd3/store.go` `GetList`, `storage/continue.go`;
//! docs/semantics.md 4.16): the items in the order of their etcd keys, at most `limit`
//! that match the selectors per page, and a continue token naming the first page's
//! resourceVersion and the key after which the next page starts.

use crate::selector::Selector;
use base64::Engine;
use reconsim_world::object::Object;
use serde_json::{Value, json};
use std::sync::Arc;

/// Which page of a list a request asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    /// `limit`: at most this many items; `None`: all.
    pub limit: Option<usize>,
    /// From a `continue` token: the items after this key.
    pub after: Option<String>,
}

/// One page of a list.
pub struct Selected<'a> {
    pub items: Vec<&'a Arc<Object>>,
    /// The next page's token, if items remain after this one.
    pub continue_token: Option<String>,
    /// How many items remain after this page (`remainingItemCount`), when the list has
    /// no selector and more remain.
    pub remaining: Option<usize>,
}

/// An object's key below its resource's prefix in etcd, `namespace/name` or `name`, as
/// bytes, without building it.
fn key_bytes(o: &Object) -> impl Iterator<Item = u8> + '_ {
    let ns = o.meta.namespace.as_bytes();
    let slash: &[u8] = if ns.is_empty() { b"" } else { b"/" };
    ns.iter()
        .chain(slash)
        .chain(o.meta.name.as_bytes())
        .copied()
}

/// The key as a string (a continue token's).
fn key_of(o: &Object) -> String {
    String::from_utf8(key_bytes(o).collect()).expect("names are UTF-8")
}

/// The page of `items` (a kind's objects at `resource_version`) that `page` asks for,
/// filtered by `selector`. The store reads keys in byte order and stops once the page
/// holds `limit` matching items; the token then starts after the last one read.
pub fn select<'a>(
    items: &'a [Arc<Object>],
    selector: &Selector,
    page: &Page,
    resource_version: u64,
) -> Selected<'a> {
    let by_key = |a: &&Arc<Object>, b: &&Arc<Object>| key_bytes(a).cmp(key_bytes(b));
    let mut keyed: Vec<&Arc<Object>> = items.iter().collect();
    // etcd's byte order of `namespace/name`: not the order of (namespace, name) pairs
    // when one namespace's name starts another's ("a" and "a-b"); most lists are in it
    // already.
    if !keyed.is_sorted_by(|a, b| by_key(a, b).is_le()) {
        keyed.sort_by(by_key);
    }
    let start = match &page.after {
        Some(after) => keyed.partition_point(|o| key_bytes(o).le(after.bytes())),
        None => 0,
    };
    let mut out = Vec::new();
    let mut last: Option<&Arc<Object>> = None;
    let mut read = start;
    for o in &keyed[start..] {
        if page.limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        last = Some(o);
        read += 1;
        if selector.matches_object(o) {
            out.push(*o);
        }
    }
    let more = keyed.len() - read;
    let continue_token = match (more, last) {
        (1.., Some(last)) => Some(encode(resource_version, &key_of(last))),
        _ => None,
    };
    Selected {
        items: out,
        continue_token,
        remaining: (more > 0 && *selector == Selector::default()).then_some(more),
    }
}

/// A continue token as the real server writes one: base64 of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`.
pub fn encode(resource_version: u64, last_key: &str) -> String {
    let token = json!({
        "v": "meta.k8s.io/v1",
        "rv": resource_version,
        "start": format!("{last_key}\u{0}"),
    });
    base64::engine::general_purpose::STANDARD.encode(token.to_string())
}

/// A continue token's resourceVersion and the key its page starts after; `Err` with the
/// server's words for one it did not write.
pub fn decode(token: &str) -> Result<(u64, String), String> {
    let bad = |why: &str| format!("continue key is not valid: {why}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token)
        .map_err(|_| bad("illegal base64 data"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad("not JSON"))?;
    if v["v"] != "meta.k8s.io/v1" {
        return Err(bad(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let rv = v["rv"]
        .as_u64()
        .filter(|rv| *rv > 0)
        .ok_or_else(|| bad("incorrect encoded start resourceVersion"))?;
    let start = v["start"].as_str().ok_or_else(|| bad("no start key"))?;
    let after = start.strip_suffix('\u{0}').unwrap_or(start);
    if after.is_empty() || after.contains("..") || after.starts_with('/') {
        return Err(bad("key path is not valid"));
    }
    Ok((rv, after.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_etcd_byte_order_not_namespace_then_name() {
        // "a-b/y" < "a/x" in etcd ('-' is below '/'), though namespace "a" < "a-b".
        use reconsim_world::object::{ObjectMeta, Pod};
        let pod = |ns: &str, name: &str| {
            Arc::new(Object::new(ObjectMeta::named(ns, name), Pod::default()))
        };
        let items = [pod("a", "x"), pod("a-b", "y"), pod("b", "z")];
        let names = |sel: &Selected<'_>| -> Vec<String> {
            sel.items.iter().map(|o| o.meta.name.clone()).collect()
        };
        let all = select(&items, &Selector::default(), &Page::default(), 7);
        assert_eq!(names(&all), ["y", "x", "z"]);
        let first = Page {
            limit: Some(2),
            after: None,
        };
        let one = select(&items, &Selector::default(), &first, 7);
        assert_eq!(names(&one), ["y", "x"]);
        assert_eq!(one.remaining, Some(1));
        let token = one.continue_token.expect("more remain");
        assert_eq!(decode(&token), Ok((7, "a/x".to_string())));
        let next = Page {
            limit: Some(2),
            after: Some("a/x".into()),
        };
        assert_eq!(
            names(&select(&items, &Selector::default(), &next, 7)),
            ["z"]
        );
    }

    #[test]
    fn a_token_round_trips_and_a_foreign_one_is_refused() {
        let t = encode(42, "default/db");
        assert_eq!(decode(&t), Ok((42, "default/db".to_string())));
        assert!(decode("not base64!").is_err());
        let foreign = base64::engine::general_purpose::STANDARD.encode(r#"{"v":"x","rv":1}"#);
        assert!(decode(&foreign).is_err());
    }
}
