//! Limits a JSON text is held to before it is parsed ([`check_json`]), so that what a parse
//! allocates is bounded by the limits and not by how the text is shaped.
//!
//! A parse allocates per value, not per byte (`[0,0,...]` is two bytes per value), so a size cap
//! alone lets a file allocate tens of times its size. [`check_json`] counts values (scalars and
//! keys as 1, arrays as 4, objects as 8: what each first allocates) and depth in one pass,
//! allocating nothing; a parse into a `Value` then allocates at most about 100 bytes per counted
//! value plus twice the bytes of its strings (`tests/json_peak.rs` measures it). The depth limit
//! is below serde_json's own recursion limit (128), which stays on as well.

use std::path::Path;

use crate::error::DumpError;

/// What a JSON text may hold, checked by [`check_json`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonLimits {
    /// The most bytes.
    pub max_bytes: u64,
    /// The most values, keys included, an array counting as 4 and an object as 8.
    pub max_values: u64,
    /// The deepest nesting of arrays and objects (a flat object is depth 1).
    pub max_depth: u32,
}

/// Checks that `json` keeps `limits` without parsing or allocating; malformed text is left to the
/// parser.
///
/// # Errors
///
/// [`DumpError::TooLarge`] for the size, [`DumpError::JsonLimit`] for the values or the depth.
pub fn check_json(json: &[u8], limits: &JsonLimits, path: &Path) -> Result<(), DumpError> {
    if json.len() as u64 > limits.max_bytes {
        return Err(DumpError::TooLarge {
            path: path.to_path_buf(),
            len: json.len() as u64,
            max: limits.max_bytes,
        });
    }
    let over = |what, max| DumpError::JsonLimit { path: path.to_path_buf(), what, max };
    let (mut values, mut depth) = (0u64, 0u32);
    let (mut in_string, mut escaped, mut in_scalar) = (false, false, false);
    for &b in json {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        let weight = match b {
            b'"' => {
                in_string = true;
                1
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > limits.max_depth {
                    return Err(over("levels of nesting", u64::from(limits.max_depth)));
                }
                if b == b'[' { 4 } else { 8 }
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                0
            }
            b',' | b':' | b' ' | b'\t' | b'\n' | b'\r' => 0,
            // A number, `true`, `false` or `null` (or garbage the parser refuses): one value
            // per run of such bytes.
            _ => u64::from(!in_scalar),
        };
        in_scalar =
            !matches!(b, b'"' | b'[' | b'{' | b']' | b'}' | b',' | b':' | b' ' | b'\t' | b'\n' | b'\r');
        values += weight;
        if values > limits.max_values {
            return Err(over("JSON values (arrays counting 4, objects 8)", limits.max_values));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: JsonLimits = JsonLimits { max_bytes: 1 << 20, max_values: 26, max_depth: 3 };

    fn check(s: &str) -> Result<(), String> {
        check_json(s.as_bytes(), &L, Path::new("x.json")).map_err(|e| e.to_string())
    }

    #[test]
    fn values_are_counted_keys_and_all() {
        // The object (8), two keys, the array (4), its four elements and the inner object (8):
        // 26 values.
        assert!(check(r#"{"a":[1,true,null,"s"],"b":{}}"#).is_ok());
        // A number with a sign, a fraction and an exponent is one value.
        let six = JsonLimits { max_values: 6, ..L };
        assert!(check_json(b"[-1.5e3, 2]", &six, Path::new("x.json")).is_ok());
        assert!(check_json(b"[-1.5e3, 2, 3]", &six, Path::new("x.json")).is_err());
        let e = check(r#"{"a":[1,true,null,"s"],"b":{},"c":1}"#).unwrap_err();
        assert_eq!(
            e,
            "x.json: holds more than 26 JSON values (arrays counting 4, objects 8), the most this reader \
             accepts"
        );
    }

    #[test]
    fn strings_hide_structure_and_escapes_do_not_end_them() {
        assert!(check(r#"["[[[[,,,{{{\"]]]", "\\"]"#).is_ok());
        // The escaped quote does not end the string: the brackets after it are text.
        assert!(check(r#"["\"[[[[[[[["]"#).is_ok());
    }

    #[test]
    fn nesting_is_limited_before_the_parser_recurses() {
        assert!(check("[[[]]]").is_ok());
        let e = check("[[[[]]]]").unwrap_err();
        assert_eq!(e, "x.json: holds more than 3 levels of nesting, the most this reader accepts");
        // serde_json's own recursion limit is on too (no `unbounded_depth`).
        let deep = "[".repeat(200) + &"]".repeat(200);
        let e = serde_json::from_str::<serde_json::Value>(&deep).unwrap_err();
        assert!(e.to_string().contains("recursion limit exceeded"), "{e}");
    }

    #[test]
    fn size_is_limited_first() {
        let l = JsonLimits { max_bytes: 4, ..L };
        let e = check_json(b"[1, 2]", &l, Path::new("x.json")).unwrap_err();
        assert!(matches!(e, DumpError::TooLarge { len: 6, max: 4, .. }), "{e}");
    }
}
