//! Durations (`2w`, `36h`), timestamps and `--time-limit` values.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(span) = gpucap::timespec::Span::parse(text) {
        assert!(span.as_hours() <= gpucap::limits::MAX_SPAN_HOURS);
        let _ = span.as_duration();
    }
    let _ = gpucap::timespec::parse_timestamp(text);
    let _ = gpucap::commands::common::parse_time_limit(text);
});
