//! API server: a create whose name or generateName its kind's rule refuses is 422
//! Invalid in the real server's words (reconsim_world::names, docs/semantics.md 4.18),
//! and stores nothing.

use reconsim_world::api::{ApiError, ApiOp};
use reconsim_world::object::{Body, Object, ObjectMeta, Resource};

mod common;
use common::Widget;
use common::apiserver::{NS, World, widget};

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn invalid(w: &mut World, object: Object) -> String {
    match w.call(ApiOp::Create(Box::new(object))) {
        Err(ApiError::Invalid(why)) => why,
        r => panic!("expected 422 Invalid, got {r:?}"),
    }
}

#[test]
fn a_create_with_a_name_the_kind_refuses_is_422_and_stores_nothing() {
    let mut w = World::new(Default::default());
    for name in ["my set", "a/b", "..", "Web", "a..b", "-a", "a_b"] {
        assert_eq!(
            invalid(&mut w, widget(name)),
            format!(
                r#"Widget.test.reconsim.dev {name:?} is invalid: metadata.name: Invalid value: {name:?}: {SUBDOMAIN}"#
            ),
        );
    }
    // 254 bytes: too long; a megabyte and a space: too long and malformed.
    let long = "a".repeat(254);
    assert_eq!(
        invalid(&mut w, widget(&long)),
        format!(
            r#"Widget.test.reconsim.dev "{long}" is invalid: metadata.name: Invalid value: "{long}": must be no more than 253 characters"#
        ),
    );
    let huge = format!("{} x", "x".repeat(1 << 20));
    let why = invalid(&mut w, widget(&huge));
    assert!(
        why.contains(": [metadata.name: Invalid value: "),
        "two errors"
    );
    assert!(why.contains("must be no more than 253 characters, metadata.name"));
    // Nothing was stored; a valid name at the limit is.
    let stored = w.server().objects().count();
    assert_eq!(stored, 0);
    w.obj(ApiOp::Create(Box::new(widget(&"a".repeat(253)))));
    w.obj(ApiOp::Create(Box::new(widget("web.example-1"))));
}

#[test]
fn a_generate_name_is_checked_as_a_prefix_with_the_generated_name() {
    let mut w = World::new(Default::default());
    let generated = |prefix: &str| {
        let mut meta = ObjectMeta::named(NS, "");
        meta.generate_name = Some(prefix.to_string());
        Object::new(meta, Body::new(Widget::default()))
    };
    let made = w.obj(ApiOp::Create(Box::new(generated("web-"))));
    assert!(made.meta.name.starts_with("web-") && made.meta.name.len() == 9);
    let why = invalid(&mut w, generated("Web-"));
    // The server generates first, so the 422 names the generated name and lists both.
    let head = r#"Widget.test.reconsim.dev "Web-"#;
    assert!(why.starts_with(head), "{why}");
    assert!(
        why.contains(&format!(
            r#" is invalid: [metadata.generateName: Invalid value: "Web-": {SUBDOMAIN}, metadata.name: Invalid value: "Web-"#
        )),
        "{why}"
    );
    assert_eq!(w.server().list(Widget::KIND).count(), 1);
}
