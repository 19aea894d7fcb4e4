//! Text shown to a person: which characters are hidden (controls, bidirectional and invisible
//! formatting characters) and how they are made visible. A leaf module, so that every other
//! module may use it (the token rules, the evidence, the display).

/// A character [`printable`] escapes: a control character; a line or paragraph separator
/// (U+2028, U+2029); a default-ignorable code point ([`is_default_ignorable`]: bidirectional
/// and invisible formatting characters, joiners, fillers, variation selectors, tags — rendered
/// as nothing at all); or an interlinear annotation character (U+FFF9 to U+FFFB). Found by a
/// first-time user: a group name holding U+00AD, U+180E, U+FE0F, U+3164 or a tag character
/// passed as plain text.
pub(crate) fn is_hidden(character: char) -> bool {
    character.is_control()
        || is_default_ignorable(character)
        || matches!(character, '\u{2028}' | '\u{2029}' | '\u{FFF9}'..='\u{FFFB}')
}

/// Is `character` a `Default_Ignorable_Code_Point`?
///
/// Source: Unicode Character Database, `DerivedCoreProperties.txt` (UAX #44), Unicode 16.0
/// (unchanged through 17.0): the ranges below, verbatim.
pub fn is_default_ignorable(character: char) -> bool {
    matches!(
        character,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// `text` made safe to show a person in a terminal or a log line: control characters (newlines
/// included) and the other hidden characters ([`is_hidden`]: bidirectional and invisible
/// formatting characters, fillers, variation selectors, tags) are written as `\u{…}` escapes, so a
/// tool name or argument can neither forge a second log line nor reverse what an approver reads.
/// Everything else is returned unchanged.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        if is_hidden(character) {
            shown.push_str(&format!("\\u{{{:x}}}", u32::from(character)));
        } else {
            shown.push(character);
        }
    }
    std::borrow::Cow::Owned(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_character_that_renders_as_nothing_is_hidden() {
        // Each found passing as plain text in a group name by a first-time user, and the
        // separators that end a line without being controls.
        for character in [
            '\u{00AD}',
            '\u{180E}',
            '\u{FE0F}',
            '\u{034F}',
            '\u{3164}',
            '\u{115F}',
            '\u{FFF9}',
            '\u{1D173}',
            '\u{E0041}',
            '\u{E007F}',
            '\u{2028}',
            '\u{2029}',
            '\u{200D}',
        ] {
            assert!(is_hidden(character), "U+{:04X}", u32::from(character));
            let shown = printable(&format!("ops{character}")).into_owned();
            assert_eq!(shown, format!("ops\\u{{{:x}}}", u32::from(character)));
        }
        for character in ['a', 'é', '中', '\u{00A0}', '❤', '\u{1F600}'] {
            assert!(!is_hidden(character), "U+{:04X}", u32::from(character));
        }
    }
}
