//! A stacked column chart in the terminal: GPUs over time, one glyph (and colour, when the
//! terminal has it) per campaign, so `gpucap demand` shows the shape of a quarter at a glance.

use std::fmt::Write;

use owo_colors::{AnsiColors, OwoColorize};

use super::stack::Stack;
use crate::timespec::Horizon;

/// Glyphs for bands when there is no colour; with colour every band is a full block.
const GLYPHS: [char; 10] = ['█', '▓', '▒', '░', '#', '%', '@', '*', '+', '='];
const COLORS: [AnsiColors; 10] = [
    AnsiColors::Blue,
    AnsiColors::Yellow,
    AnsiColors::Green,
    AnsiColors::Magenta,
    AnsiColors::Cyan,
    AnsiColors::Red,
    AnsiColors::BrightBlue,
    AnsiColors::BrightYellow,
    AnsiColors::BrightGreen,
    AnsiColors::BrightMagenta,
];

/// Chart size in character cells.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    pub width: usize,
    pub height: usize,
}

impl Default for Size {
    fn default() -> Self {
        Size {
            width: 72,
            height: 12,
        }
    }
}

/// Renders `stack` over `horizon`. Each column stands for a run of hours and shows the stack at
/// the busiest hour in it, so peaks are never averaged away.
pub fn stacked_chart(stack: &Stack, horizon: &Horizon, size: Size, color: bool) -> String {
    let hours = stack.hours as usize;
    let width = size.width.clamp(1, hours.max(1));
    let height = size.height.max(2);
    let totals = stack.totals();
    let peak = totals.iter().copied().max().unwrap_or(0);
    let mut out = String::new();
    if peak == 0 {
        out.push_str("  (no demand in the horizon)\n");
        return out;
    }
    // The busiest hour of each column.
    let columns: Vec<usize> = (0..width)
        .map(|c| {
            let (a, b) = (
                c * hours / width,
                ((c + 1) * hours / width).max(c * hours / width + 1),
            );
            (a..b.min(hours))
                .max_by_key(|&t| (totals[t], std::cmp::Reverse(t)))
                .unwrap_or(a)
        })
        .collect();
    let label_width = peak.to_string().len().max(1);
    for row in 0..height {
        // The value at the middle of this row of cells.
        let level =
            peak as f64 * (height - row) as f64 / height as f64 - peak as f64 / height as f64 / 2.0;
        let axis = match row {
            0 => format!("{peak:>label_width$} ┤"),
            r if r == height / 2 => format!("{:>label_width$} ┤", peak / 2),
            _ => format!("{:>label_width$} │", ""),
        };
        out.push_str(&axis);
        for &t in &columns {
            let mut below = 0.0;
            let mut cell = ' '.to_string();
            for (band, values) in stack.values.iter().enumerate() {
                let top = below + values[t] as f64;
                if level >= below && level < top {
                    cell = glyph(band, color);
                    break;
                }
                below = top;
            }
            out.push_str(&cell);
        }
        out.push('\n');
    }
    let _ = writeln!(out, "{:>label_width$} └{}", 0, "─".repeat(width));
    out.push_str(&axis_labels(horizon, hours, width, label_width + 2));
    for (band, label) in stack.labels.iter().enumerate() {
        let gpu_hours: u64 = stack.values[band].iter().map(|&v| v as u64).sum();
        let _ = writeln!(
            out,
            "  {} {}  ({} GPU-h)",
            glyph(band, color),
            crate::text::visible(label),
            thousands(gpu_hours)
        );
    }
    out
}

fn glyph(band: usize, color: bool) -> String {
    if color {
        '█'.color(COLORS[band % COLORS.len()]).to_string()
    } else {
        GLYPHS[band % GLYPHS.len()].to_string()
    }
}

/// Dates under the x axis, spaced so they do not collide.
fn axis_labels(horizon: &Horizon, hours: usize, width: usize, indent: usize) -> String {
    let mut line = vec![' '; indent + width + 12];
    let mut next_free = 0;
    let ticks = (width / 14).max(1);
    for k in 0..=ticks {
        let col = (k * (width - 1)) / ticks;
        let hour = (col * hours / width) as u32;
        let text = horizon.time_of(hour).format("%Y-%m-%d").to_string();
        let at = indent + col;
        if at < next_free {
            continue;
        }
        for (i, ch) in text.chars().enumerate() {
            if let Some(slot) = line.get_mut(at + i) {
                *slot = ch;
            }
        }
        next_free = at + text.len() + 2;
    }
    let s: String = line.into_iter().collect();
    format!("{}\n", s.trim_end())
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text` with every line wider than `width` columns wrapped at spaces, each continuation
/// indented two columns past the line's own indent. Table lines (drawn with box characters)
/// are left alone: tables are laid out within the width when they are built. Widths are
/// display widths, ANSI colours not counted.
pub fn fit(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let boxed = body
            .trim_start()
            .starts_with(['│', '┌', '└', '╞', '├', '╭', '╰']);
        if boxed || textwrap::core::display_width(body) <= width {
            out.push_str(line);
            continue;
        }
        let indent = " ".repeat(body.len() - body.trim_start().len() + 2);
        let options = textwrap::Options::new(width.max(20)).subsequent_indent(&indent);
        for wrapped in textwrap::wrap(body, options) {
            out.push_str(&wrapped);
            out.push('\n');
        }
        if !line.ends_with('\n') {
            out.pop();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn fit_wraps_long_text_with_a_hanging_indent_and_leaves_tables_alone() {
        let table = "│ a table row that is much wider than twenty columns │\n";
        let text = format!("  warn: one two three four five six seven\n{table}short\n");
        let fitted = fit(&text, 20);
        assert_eq!(
            fitted,
            format!("  warn: one two\n    three four five\n    six seven\n{table}short\n")
        );
        // Never narrower than 20 columns; a last line without a newline keeps none.
        assert_eq!(fit("no newline at the end", 10), "no newline at the\n  end");
    }

    use super::*;
    use crate::timespec::{Span, parse_timestamp};

    #[test]
    fn bands_stack_in_order_and_peaks_survive_bucketing() {
        let horizon = Horizon::new(parse_timestamp("2027-01-01").unwrap(), Span::hours(100));
        let mut a = vec![0u32; 100];
        let mut b = vec![0u32; 100];
        a[10..90].iter_mut().for_each(|v| *v = 4);
        b[50] = 4; // a one-hour spike must show even at 10 hours per column
        let stack = Stack {
            labels: vec!["a".into(), "b".into()],
            values: vec![a, b],
            hours: 100,
        };
        let chart = stacked_chart(
            &stack,
            &horizon,
            Size {
                width: 10,
                height: 4,
            },
            false,
        );
        let rows: Vec<&str> = chart.lines().collect();
        assert!(rows[0].starts_with("8 ┤"), "{chart}");
        assert_eq!(
            rows[0].chars().filter(|&c| c == '▓').count(),
            1,
            "spike on top:\n{chart}"
        );
        assert_eq!(
            rows[3].chars().filter(|&c| c == '█').count(),
            8,
            "base band:\n{chart}"
        );
        assert!(chart.contains("█ a  (320 GPU-h)"), "{chart}");
        assert!(chart.contains("2027-01-01"), "{chart}");
    }

    #[test]
    fn legend_names_are_shown_escaped() {
        let horizon = Horizon::new(parse_timestamp("2027-01-01").unwrap(), Span::hours(10));
        let stack = Stack {
            labels: vec!["a\u{1b}[2Jb".into()],
            values: vec![vec![1; 10]],
            hours: 10,
        };
        let size = Size {
            width: 10,
            height: 4,
        };
        let chart = stacked_chart(&stack, &horizon, size, false);
        assert!(!chart.contains('\u{1b}'), "{chart}");
        assert!(chart.contains("a\\u{1b}[2Jb  (10 GPU-h)"), "{chart}");
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
