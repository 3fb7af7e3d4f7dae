//! Keeps credentials out of the journal and the audit log. Both files are kept for months, are
//! read by people who may not see the cloud account, and (on S3) are copied around; a request
//! body or an error message that carries a key would leak it. So every record is scrubbed as
//! JSON just before it is written, and [`credential_paths`] checks the result: a writer that
//! still finds something refuses to write.
//!
//! What counts as a credential:
//! - a field whose name contains `secret`, `token`, `password`, `passwd`, `passphrase`,
//!   `credential`, `authorization`, `api_key`/`apikey`, `access_key`, `private_key`, `cookie` or
//!   `signature` (any case, `-`/`_` ignored). Idempotency and paging tokens (`client_token`,
//!   `ClientToken`, `idempotency_token`, `next_token`, `page_token`) are not secrets and are
//!   kept: reconciliation needs them. The whole value becomes `"[redacted]"`;
//! - in any string: an AWS access key id (`AKIA`/`ASIA` + 16 upper-case letters or digits), a
//!   bearer token (`Bearer …`), `aws_secret_access_key` followed by `=`/`:` and a value, and a
//!   JWT (`eyJ….….…`). Only the matched part is replaced, so error messages stay readable; a
//!   PEM private key replaces the whole string.

use serde_json::Value;

/// What a scrubbed value becomes.
pub const REDACTED: &str = "[redacted]";

/// Field names (lower-case, without `_` and `-`) that are tokens but not secrets.
const NOT_SECRET: &[&str] = &[
    "clienttoken",
    "idempotencytoken",
    "nexttoken",
    "pagetoken",
    "nextpagetoken",
];

const SECRET_WORDS: &[&str] = &[
    "secret",
    "token",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "authorization",
    "apikey",
    "accesskey",
    "privatekey",
    "cookie",
    "signature",
];

/// Whether a field of this name holds a credential.
pub fn is_secret_field(name: &str) -> bool {
    let n: String = name
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    !NOT_SECRET.contains(&n.as_str()) && SECRET_WORDS.iter().any(|w| n.contains(w))
}

/// Replaces credentials in `value` in place; returns the JSON paths it changed (`$.request.x`).
pub fn scrub(value: &mut Value) -> Vec<String> {
    let mut changed = Vec::new();
    scrub_at(value, "$", &mut changed);
    changed
}

fn scrub_at(value: &mut Value, path: &str, changed: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let here = format!("{path}.{k}");
                if is_secret_field(k) {
                    if !is_clean_secret_slot(v) {
                        *v = Value::String(REDACTED.to_string());
                        changed.push(here);
                    }
                } else {
                    scrub_at(v, &here, changed);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                scrub_at(v, &format!("{path}[{i}]"), changed);
            }
        }
        Value::String(s) => {
            if let Some(clean) = scrub_str(s) {
                *s = clean;
                changed.push(path.to_string());
            }
        }
        _ => {}
    }
}

/// The JSON paths in `value` that still look like credentials. Empty means safe to write.
pub fn credential_paths(value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    find_at(value, "$", &mut found);
    found
}

fn find_at(value: &Value, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let here = format!("{path}.{k}");
                if is_secret_field(k) && !is_clean_secret_slot(v) {
                    found.push(here);
                } else {
                    find_at(v, &here, found);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                find_at(v, &format!("{path}[{i}]"), found);
            }
        }
        Value::String(s) if scrub_str(s).is_some() => found.push(path.to_string()),
        _ => {}
    }
}

/// A secret-named field may be written only as null or `"[redacted]"`.
fn is_clean_secret_slot(v: &Value) -> bool {
    matches!(v, Value::Null) || v.as_str() == Some(REDACTED)
}

/// `s` with credential-looking parts replaced, or `None` when there are none.
pub fn scrub_str(s: &str) -> Option<String> {
    if s.contains("-----BEGIN") && s.contains("PRIVATE KEY") {
        return Some(REDACTED.to_string());
    }
    let mut out = s.to_string();
    let mut hit = false;
    hit |= replace_all(&mut out, find_aws_key_id);
    hit |= replace_all(&mut out, find_bearer);
    hit |= replace_all(&mut out, find_aws_secret_assignment);
    hit |= replace_all(&mut out, find_jwt);
    hit.then_some(out)
}

/// Replaces every range `find` reports (`find(text, from)` → the next `(start, end)` at or after
/// `from`) with [`REDACTED`].
fn replace_all(s: &mut String, find: fn(&str, usize) -> Option<(usize, usize)>) -> bool {
    let mut from = 0;
    let mut hit = false;
    while let Some((a, b)) = find(s, from) {
        s.replace_range(a..b, REDACTED);
        from = a + REDACTED.len();
        hit = true;
    }
    hit
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `AKIA`/`ASIA` + 16 of `[A-Z0-9]`, not inside a longer word.
fn find_aws_key_id(s: &str, from: usize) -> Option<(usize, usize)> {
    let b = s.as_bytes();
    let mut i = from;
    while i + 20 <= b.len() {
        let head = &b[i..i + 4];
        if (head == b"AKIA" || head == b"ASIA")
            && (i == 0 || !is_word_byte(b[i - 1]))
            && b[i + 4..i + 20]
                .iter()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && (i + 20 == b.len() || !is_word_byte(b[i + 20]))
        {
            return Some((i, i + 20));
        }
        i += 1;
    }
    None
}

/// The credential after `Bearer ` (case-insensitive), up to whitespace or a quote.
fn find_bearer(s: &str, from: usize) -> Option<(usize, usize)> {
    let lower = s.to_ascii_lowercase();
    let mut at = from;
    while let Some(pos) = lower.get(at..)?.find("bearer ") {
        let start = at + pos + "bearer ".len();
        let start = start + count_spaces(&s[start..]);
        let end = token_end(s, start);
        if end > start && &s[start..end] != REDACTED {
            return Some((start, end));
        }
        at = start.max(at + pos + 1);
    }
    None
}

/// The value after `aws_secret_access_key` and `=`/`:` (shell, ini or JSON-ish text).
fn find_aws_secret_assignment(s: &str, from: usize) -> Option<(usize, usize)> {
    let lower = s.to_ascii_lowercase();
    let mut at = from;
    while let Some(pos) = lower.get(at..)?.find("aws_secret_access_key") {
        let mut i = at + pos + "aws_secret_access_key".len();
        let bytes = s.as_bytes();
        while i < bytes.len() && matches!(bytes[i], b' ' | b'"' | b'\'' | b'\t') {
            i += 1;
        }
        if i < bytes.len() && matches!(bytes[i], b'=' | b':') {
            i += 1;
            while i < bytes.len() && matches!(bytes[i], b' ' | b'"' | b'\'' | b'\t') {
                i += 1;
            }
            let end = token_end(s, i);
            if end > i && &s[i..end] != REDACTED {
                return Some((i, end));
            }
        }
        at = at + pos + 1;
    }
    None
}

/// `eyJ<b64url>.<b64url>.<b64url>` (a JSON Web Token; its header always starts with `{"`).
fn find_jwt(s: &str, from: usize) -> Option<(usize, usize)> {
    let mut at = from;
    while let Some(pos) = s.get(at..)?.find("eyJ") {
        let start = at + pos;
        let b = s.as_bytes();
        let mut end = start;
        let mut dots = 0;
        while end < b.len()
            && (b[end].is_ascii_alphanumeric() || matches!(b[end], b'-' | b'_' | b'.'))
        {
            if b[end] == b'.' {
                dots += 1;
            }
            end += 1;
        }
        if dots == 2 && end - start >= 20 && (start == 0 || !is_word_byte(b[start - 1])) {
            return Some((start, end));
        }
        at = start + 3;
    }
    None
}

fn count_spaces(s: &str) -> usize {
    s.bytes().take_while(|b| *b == b' ').count()
}

fn token_end(s: &str, start: usize) -> usize {
    s[start..]
        .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';'))
        .map_or(s.len(), |n| start + n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn credential_fields_and_values_are_scrubbed_and_then_pass_the_check() {
        let mut v = json!({
            "request": {
                "ClientToken": "gpucap-0123abcd-a1-0",
                "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "SessionToken": "FQoGZXIvYXdzE...",
                "headers": {"Authorization": "Bearer abc.def", "X-Request": "fine"},
                "nested": [{"password": 12345}, {"db_password": null}],
                "note": "creds AKIAIOSFODNN7EXAMPLE and ASIAY34FZKBOKMUTVV7A leaked",
                "cfg": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG",
                "auth_header": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
                "pem": "-----BEGIN PRIVATE KEY-----\nMIIE...\n-----END PRIVATE KEY-----\n",
                "tags": {"gpucap:intent": "i-1", "managed-by": "gpucap"},
            },
            "idempotency": {"client_token": "gpucap-0123abcd-a1-0"},
        });
        assert!(!credential_paths(&v).is_empty());
        let changed = scrub(&mut v);
        assert!(changed.contains(&"$.request.aws_secret_access_key".to_string()));
        assert!(
            credential_paths(&v).is_empty(),
            "{:?}",
            credential_paths(&v)
        );
        let r = &v["request"];
        assert_eq!(r["aws_secret_access_key"], REDACTED);
        assert_eq!(r["SessionToken"], REDACTED);
        assert_eq!(r["headers"]["Authorization"], REDACTED);
        assert_eq!(r["headers"]["X-Request"], "fine");
        assert_eq!(r["nested"][0]["password"], REDACTED);
        assert_eq!(r["nested"][1]["db_password"], Value::Null);
        assert_eq!(r["note"], "creds [redacted] and [redacted] leaked");
        assert_eq!(r["cfg"], "aws_secret_access_key = [redacted]");
        assert_eq!(r["pem"], REDACTED);
        // Idempotency tokens and gpucap's tags are needed for reconciliation: kept.
        assert_eq!(r["ClientToken"], "gpucap-0123abcd-a1-0");
        assert_eq!(v["idempotency"]["client_token"], "gpucap-0123abcd-a1-0");
        assert_eq!(r["tags"]["gpucap:intent"], "i-1");
        let text = v.to_string();
        for secret in ["AKIAIOSFODNN7", "wJalrXUtnFEMI", "eyJhbGci", "MIIE", "FQoG"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }

    #[test]
    fn bearer_tokens_outside_secret_fields_are_caught() {
        assert_eq!(
            scrub_str("401 for bearer abc123XYZ, retry").as_deref(),
            Some("401 for bearer [redacted], retry")
        );
        assert_eq!(scrub_str("an ordinary message about a block"), None);
        // Ids that merely resemble the pattern are left alone.
        assert_eq!(scrub_str("cr-0a1b2c3d4e5f67890"), None);
        assert_eq!(scrub_str("XAKIAIOSFODNN7EXAMPLE1"), None);
        let v = json!({"message": "Bearer s3cr3t"});
        assert_eq!(credential_paths(&v), vec!["$.message".to_string()]);
    }

    #[test]
    fn field_names_are_classified_ignoring_case_and_separators() {
        for name in [
            "secret",
            "client_secret",
            "X-Amz-Security-Token",
            "Password",
            "apiKey",
            "AccessKeyId",
            "private-key",
        ] {
            assert!(is_secret_field(name), "{name}");
        }
        for name in [
            "client_token",
            "ClientToken",
            "NextToken",
            "key",
            "tags",
            "id",
        ] {
            assert!(!is_secret_field(name), "{name}");
        }
    }
}
