//! The wire's own rules, one case a line.

use super::*;

#[test]
fn lists_are_worded_like_the_real_service() {
    assert_eq!(quoted_list(&["a"]), "'a'");
    assert_eq!(quoted_list(&["a", "b"]), "'a' and 'b'");
    assert_eq!(quoted_list(&["a", "b", "c"]), "'a', 'b', and 'c'");
}

#[test]
fn error_body_has_the_four_fields() {
    let body = ApiError::missing("tools[0].name").body();
    assert_eq!(
        body,
        json!({"error": {
            "message": "Missing required parameter: 'tools[0].name'.",
            "type": "invalid_request_error",
            "param": "tools[0].name",
            "code": "missing_required_parameter",
        }})
    );
}

#[test]
fn null_counts_as_absent() {
    let value = json!({"a": null, "b": 1});
    let fields = Fields::of(&value, "").unwrap_or_else(|e| unreachable!("{e:?}"));
    assert_eq!(fields.opt("a"), None);
    assert_eq!(fields.req("a"), Err(ApiError::missing("a")));
    assert_eq!(fields.opt_int("b", 1), Ok(Some(1)));
    assert!(fields.opt_int("b", 2).is_err());
}

#[test]
fn function_names() {
    for good in ["bash", "read_file", "a-b", "X9"] {
        assert!(check_function_name(good, "p").is_ok(), "{good}");
    }
    let long = "a".repeat(65);
    for bad in ["", "has space", "dot.name", long.as_str()] {
        assert!(check_function_name(bad, "p").is_err(), "{bad}");
    }
}
