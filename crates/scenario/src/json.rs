//! Strict JSON input: every file reconsim reads (scenarios, failure files, fuzz results)
//! is one bounded JSON object and nothing else.
//!
//! serde is lenient in three ways a user never means: it stops reading after the first
//! document (text after it is ignored), it accepts any derived struct in its sequence
//! form (`[ "name", "desc", ... ]` fills the fields in order), and `std::fs` reads a
//! device such as `/dev/zero` until memory runs out. Here a file is read up to
//! [`FILE_BYTES_MAX`] bytes, must hold exactly one document whose top level is an object,
//! and a struct written as an array is refused at its path ([`check_objects`]): the
//! typed value is serialized again, and wherever it is an object the input must be one.

use crate::format::LoadError;
use crate::limits::FILE_BYTES_MAX;
use serde_json::Value;
use std::io::Read;
use std::path::Path;

/// The text of `path`, at most [`FILE_BYTES_MAX`] bytes of UTF-8.
pub fn read_text(path: &Path) -> Result<String, LoadError> {
    let file = path.display().to_string();
    // About the file as a whole, not a field of it: no path.
    let err = |message: String| LoadError {
        file: file.clone(),
        path: String::new(),
        message,
    };
    let f = std::fs::File::open(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let mut bytes = Vec::new();
    f.take(FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| err(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > FILE_BYTES_MAX {
        return Err(err(format!(
            "a file of at most {FILE_BYTES_MAX} bytes (FILE_BYTES_MAX); this one is larger"
        )));
    }
    String::from_utf8(bytes).map_err(|e| err(format!("UTF-8 text, not bytes ({e})")))
}

/// What the top level of `text` is, if it is not an object: `Err(expected)`.
pub fn check_top_object(text: &str, what: &str) -> Result<(), String> {
    match text.trim_start().as_bytes().first() {
        Some(b'{') => Ok(()),
        None => Err(format!("a JSON object ({what}), not an empty file")),
        Some(b'[') => Err(format!("a JSON object ({what}), not an array")),
        Some(_) => Err(format!("a JSON object ({what})")),
    }
}

/// Parse one JSON document into `T`: errors name `file`, the JSON path and the line;
/// text after the document is an error.
pub fn parse<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, LoadError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut *de).map_err(|e| LoadError {
        file: file.to_string(),
        path: json_path(&e.path().to_string()),
        message: e.inner().to_string(),
    })?;
    de.end().map_err(|e| LoadError {
        file: file.to_string(),
        path: ".".into(),
        message: format!("one JSON document and nothing after it ({e})"),
    })?;
    Ok(value)
}

/// [`parse`] of a document whose top level must be an object (`what` names it in the
/// error).
pub fn parse_object<T: serde::de::DeserializeOwned>(
    file: &str,
    text: &str,
    what: &str,
) -> Result<T, LoadError> {
    check_top_object(text, what).map_err(|message| LoadError {
        file: file.to_string(),
        path: ".".into(),
        message,
    })?;
    parse(file, text)
}

/// `Err((path, expected))` where `input` holds an array and `canonical` (the typed value
/// serialized again) an object: a struct given in serde's sequence form. `at` is the
/// path of `input` in its file.
pub fn check_objects(input: &Value, canonical: &Value, at: &str) -> Result<(), (String, String)> {
    match (input, canonical) {
        (Value::Array(_), Value::Object(_)) => Err((
            if at.is_empty() {
                ".".into()
            } else {
                at.to_string()
            },
            "an object with named fields, not an array".into(),
        )),
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                if let Some(w) = b.get(k) {
                    check_objects(v, w, &format!("{at}.{k}"))?;
                }
            }
            Ok(())
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                check_objects(v, w, &format!("{at}[{i}]"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// serde_path_to_error writes `a.b[0].c`; we print `.a.b[0].c`.
pub(crate) fn json_path(p: &str) -> String {
    if p == "." || p.is_empty() {
        ".".to_string()
    } else {
        format!(".{p}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn trailing_text_is_refused() {
        let r: Result<Value, _> = parse("f.json", "{\"a\": 1} trailing");
        let e = r.unwrap_err();
        assert!(e.message.contains("nothing after it"), "{e}");
        assert!(parse::<Value>("f.json", "{\"a\": 1}\n  \n").is_ok());
    }

    #[test]
    fn the_top_level_is_an_object() {
        let e = parse_object::<Value>("f.json", " []", "a scenario").unwrap_err();
        assert_eq!(e.message, "a JSON object (a scenario), not an array");
        assert!(parse_object::<Value>("f.json", "", "a scenario").is_err());
        assert!(parse_object::<Value>("f.json", "3", "a scenario").is_err());
    }

    #[test]
    fn a_struct_as_an_array_is_refused_at_its_path() {
        let input = json!({"net": [[1, 5]], "r": [1, 2]});
        let canonical = json!({"net": {"latency_ms": [1, 5]}, "r": [1, 2]});
        assert_eq!(check_objects(&input, &canonical, "").unwrap_err().0, ".net");
        assert!(check_objects(&canonical, &canonical, "").is_ok());
    }

    #[test]
    fn devices_are_read_to_the_limit_only() {
        if Path::new("/dev/zero").exists() {
            let e = read_text(Path::new("/dev/zero")).unwrap_err();
            assert!(e.message.contains("FILE_BYTES_MAX"), "{e}");
        }
    }
}
