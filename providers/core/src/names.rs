//! Names gpucap gives to what it creates, in the form every cloud accepts.
//!
//! Plan action ids, capacity-cap ids and the resource names the providers derive from them are
//! all built from one slug rule, so an id read in a plan is the id a cloud resource carries.

/// Lowercase ASCII letters, digits and single dashes: every run of other characters becomes one
/// dash, and none leads or trails.
pub fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::slug;

    #[test]
    fn a_slug_is_lowercase_letters_digits_and_single_dashes() {
        assert_eq!(slug("--A  b__c--"), "a-b-c");
        assert_eq!(slug("p5.48xlarge"), "p5-48xlarge");
        assert_eq!(slug("éé"), "");
    }
}
