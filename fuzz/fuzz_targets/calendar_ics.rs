//! An iCalendar file, recurrences included (bounded by `MAX_OCCURRENCES`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let until = chrono::DateTime::parse_from_rfc3339("2027-06-01T00:00:00Z")
        .expect("a time")
        .to_utc();
    let _ = gpucap::calendar::parse(text, std::path::Path::new("events.ics"), until);
});
