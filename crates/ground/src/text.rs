//! Text from inputs as it may appear in what gpucap shows and writes.
//!
//! Names come from files many people edit. A control character (an ANSI escape sequence, a
//! carriage return) in a name could rewrite a terminal line or a CI log, and makes an SVG
//! ill-formed (XML 1.0 allows no C0 controls but tab and newline, not even as `&#27;`); a
//! bidirectional override can make a name read differently from what it is. So names with them
//! are refused at input ([`check_name`]), and every writer that shows text from a plan file
//! (which is input too) passes it through [`visible`] first.

use std::borrow::Cow;

/// Characters that change how the text around them is shown: C0/C1 controls (other than
/// none: names are single-line) and the Unicode bidirectional formatting characters.
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with every hidden character shown as Rust writes it (`\u{1b}`, `\n`), visible and inert.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_hidden) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Multi-line text (an error message) with hidden characters escaped, except newlines and tabs.
pub fn visible_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| is_hidden(c) && c != '\n' && c != '\t') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.split('\n')
            .map(|line| {
                line.split('\t')
                    .map(|p| visible(p).into_owned())
                    .collect::<Vec<_>>()
                    .join("\t")
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// A name as input: refused when it holds a hidden character, with the character named.
pub fn check_name(s: &str) -> Result<(), String> {
    match s.chars().find(|&c| is_hidden(c)) {
        None => Ok(()),
        Some(c) => Err(format!(
            "`{}` contains the control or bidirectional character U+{:04X}; names are plain text",
            visible(s),
            u32::from(c)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_shown_escaped_and_refused_in_names() {
        assert_eq!(visible("plain <&> name"), "plain <&> name");
        assert_eq!(visible("a\u{1b}[31mred"), "a\\u{1b}[31mred");
        assert_eq!(visible("x\u{202E}y"), "x\\u{202e}y");
        assert_eq!(visible_lines("a\n\tb\u{7}"), "a\n\tb\\u{7}");
        assert!(check_name("llm-70b").is_ok());
        let err = check_name("evil\u{1b}[2J").unwrap_err();
        assert!(err.contains("U+001B"), "{err}");
        assert!(!err.contains('\u{1b}'), "{err}");
        assert!(check_name("a\u{2066}b").is_err());
    }
}
