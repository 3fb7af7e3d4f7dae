//! The docs' commands, run; the docs' links, followed. `README.md` and `docs/*.md` show
//! commands a reader will paste; this test runs them against the built binary so they cannot
//! rot, and checks that every relative link in those files leads somewhere.
//!
//! Which commands run (the convention the docs follow):
//!
//! - Only fenced code blocks whose info string is `sh` or `console` hold commands (in a
//!   `console` block, only the lines that start with `$ `). A line ending in `\` continues on
//!   the next one.
//! - A command is a line that starts with `gpucap ` or `cargo run -- ` (run as `gpucap` with the
//!   same arguments: the binary cargo built for this test, `CARGO_BIN_EXE_gpucap`). Other lines
//!   (`cargo test`, `cargo bench`, scripts) are not gpucap commands and are left to their own
//!   tests.
//! - Each page's commands run in order through `sh -c` (so `#` comments and `> file` work), with
//!   `gpucap` first on the `PATH`, in a temporary copy of the repository's `examples/` and
//!   `tests/fixtures/` made for that page: a later block on a page sees the files an earlier
//!   one wrote (`plan.json`), and nothing is written into the repository. Each must exit 0.
//! - HTML comments on the lines directly above a block's opening fence change that:
//!   - `<!-- not run: REASON -->`: the block is not run (commands that need the network,
//!     credentials or the cloud, or that take more than about 20 s in a debug build). The test
//!     counts and prints every command it skips, with the reason.
//!   - `<!-- docs-test: cwd=DIR; before=COMMAND; exits=0,0,0|2 -->`, every key optional:
//!     `cwd` is the directory in the copy the block runs in (default: the copy's root, i.e. the
//!     repository's root); `before` is a command run first (it must exit 0) to make what the
//!     prose says the reader already has; `exits` gives each command's exit status in order, as
//!     the docs state it, `a|b` where either is right (default 0).
//!
//! Missing data (a doc, `examples/`, a `cwd`) fails the test and names it; nothing skips
//! silently.

#[path = "support/files.rs"]
mod files;
use files::copy_dir;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// A command that runs longer than this is a failure, not a wait: the docs' runnable commands
/// take seconds (slow ones are marked not run), so this only stops a hang.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(180);

/// Pages run two at a time: the machines this runs on have two cores, and the slow commands
/// (a quickstart plan) are on different pages.
const WORKERS: usize = 2;

fn root() -> PathBuf {
    PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
}

/// `README.md` and every `docs/*.md`, sorted, relative to the repository's root.
fn doc_files() -> Vec<PathBuf> {
    let readme = root().join("README.md");
    assert!(readme.is_file(), "{} is missing", readme.display());
    let docs = root().join("docs");
    let mut files: Vec<PathBuf> = fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("the docs folder {} is missing: {e}", docs.display()))
        .map(|e| e.expect("read docs/").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no pages in {}", docs.display());
    files.insert(0, readme);
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// Commands

/// How a block's commands run, from the HTML comments above it.
#[derive(Debug, Default)]
struct Directives {
    not_run: Option<String>,
    cwd: Option<String>,
    before: Option<String>,
    exits: Option<Vec<Vec<i32>>>,
}

#[derive(Debug)]
struct Block {
    /// `file:line` of the opening fence.
    at: String,
    commands: Vec<String>,
    directives: Directives,
}

/// The command blocks of one page, in order; blocks without a gpucap command are left out.
fn command_blocks(path: &Path) -> Vec<Block> {
    let text = read(path);
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let Some(fence) = fence_of(trimmed) else {
            i += 1;
            continue;
        };
        let info = trimmed[fence.len()..].trim();
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim() != fence {
            body.push(lines[i]);
            i += 1;
        }
        i += 1;
        let at = format!("{}:{}", relative(path), start + 1);
        let directives = directives_above(&lines, start, &at);
        if info != "sh" && info != "console" {
            assert!(
                directives.not_run.is_none() && directives.cwd.is_none(),
                "{at}: a docs-test or not-run comment above a block that is not `sh` or `console`"
            );
            continue;
        }
        let commands = commands_in(&body, info == "console");
        if commands.is_empty() {
            assert!(
                directives.not_run.is_none()
                    && directives.cwd.is_none()
                    && directives.exits.is_none(),
                "{at}: a docs-test or not-run comment above a block with no gpucap command"
            );
            continue;
        }
        if let Some(exits) = &directives.exits {
            assert_eq!(
                exits.len(),
                commands.len(),
                "{at}: `exits` gives {} statuses for {} commands",
                exits.len(),
                commands.len()
            );
        }
        blocks.push(Block {
            at,
            commands,
            directives,
        });
    }
    blocks
}

/// The fence (```` ``` ```` or `~~~`, however long) a line opens, if it opens one.
fn fence_of(line: &str) -> Option<&str> {
    let ch = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = line.chars().take_while(|c| *c == ch).count();
    (len >= 3).then(|| &line[..len])
}

/// The gpucap commands of a block's lines, continuations joined, `cargo run -- ` turned into
/// `gpucap `.
fn commands_in(body: &[&str], console: bool) -> Vec<String> {
    let mut joined: Vec<String> = Vec::new();
    let mut pending: Option<String> = None;
    for line in body {
        let mut line = line.trim_end().to_string();
        if pending.is_none() && console {
            match line.strip_prefix("$ ") {
                Some(rest) => line = rest.to_string(),
                None => continue,
            }
        }
        let full = match pending.take() {
            Some(head) => format!("{head} {}", line.trim_start()),
            None => line,
        };
        match full.strip_suffix('\\') {
            Some(head) => pending = Some(head.trim_end().to_string()),
            None => joined.push(full),
        }
    }
    joined.extend(pending);
    joined
        .into_iter()
        .filter_map(|line| {
            let line = line.trim();
            if let Some(args) = line.strip_prefix("cargo run -- ") {
                Some(format!("gpucap {args}"))
            } else if line.starts_with("gpucap ") {
                Some(line.to_string())
            } else {
                None
            }
        })
        .collect()
}

/// The `not run` and `docs-test` comments on the lines directly above line `fence`.
fn directives_above(lines: &[&str], fence: usize, at: &str) -> Directives {
    let mut directives = Directives::default();
    let mut j = fence;
    while j > 0 {
        let line = lines[j - 1].trim();
        let Some(inner) = line
            .strip_prefix("<!--")
            .and_then(|l| l.strip_suffix("-->"))
        else {
            break;
        };
        j -= 1;
        let inner = inner.trim();
        if let Some(reason) = inner.strip_prefix("not run:") {
            let reason = reason.trim();
            assert!(!reason.is_empty(), "{at}: `not run:` without a reason");
            directives.not_run = Some(reason.to_string());
        } else if let Some(spec) = inner.strip_prefix("docs-test:") {
            parse_docs_test(spec, at, &mut directives);
        }
    }
    directives
}

fn parse_docs_test(spec: &str, at: &str, directives: &mut Directives) {
    for part in spec.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .unwrap_or_else(|| panic!("{at}: `{part}` in a docs-test comment is not KEY=VALUE"));
        let value = value.trim().to_string();
        match key.trim() {
            "cwd" => directives.cwd = Some(value),
            "before" => directives.before = Some(value),
            "exits" => {
                let exits = value
                    .split(',')
                    .map(|alternatives| {
                        alternatives
                            .split('|')
                            .map(|code| {
                                code.trim().parse::<i32>().unwrap_or_else(|_| {
                                    panic!("{at}: `{code}` in `exits` is not an exit status")
                                })
                            })
                            .collect()
                    })
                    .collect();
                directives.exits = Some(exits);
            }
            other => panic!("{at}: unknown docs-test key `{other}` (cwd, before, exits)"),
        }
    }
}

/// A directory to run in: the repository's examples and test fixtures, copied.
fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["examples", "tests/fixtures"] {
        let from = root().join(sub);
        assert!(
            from.is_dir(),
            "{} is missing; the docs' commands run on it",
            from.display()
        );
        let to = dir.path().join(sub);
        fs::create_dir_all(&to).expect("create the copy");
        copy_dir(&from, &to);
    }
    dir
}

/// A folder holding `gpucap`, the binary under test, to put first on the `PATH`.
fn bin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gpucap"), dir.path().join("gpucap"))
        .expect("link the gpucap binary");
    dir
}

struct Outcome {
    status: Option<i32>,
    output: String,
    took: Duration,
}

/// `line` through `sh -c` in `cwd`, with `bin` first on the `PATH`; stdout and stderr go to
/// files in `logs` (no pipe to fill), and a run past [`COMMAND_TIMEOUT`] is killed.
fn run_shell(line: &str, cwd: &Path, bin: &Path, logs: &Path, n: usize) -> Outcome {
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    let out_path = logs.join(format!("{n}.out"));
    let err_path = logs.join(format!("{n}.err"));
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(line)
        .current_dir(cwd)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env("GPUCAP_CACHE_DIR", logs.join("cache"))
        .env_remove("RUST_LOG")
        .env_remove("GPUCAP_CONFIG")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).expect("stdout file"))
        .stderr(fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("run sh");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for sh") {
            break status.code();
        }
        if started.elapsed() > COMMAND_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    let tail = |p: &Path| {
        let text = fs::read_to_string(p).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    };
    Outcome {
        status,
        output: format!(
            "stdout (end):\n{}\nstderr (end):\n{}",
            tail(&out_path),
            tail(&err_path)
        ),
        took,
    }
}

#[derive(Default)]
struct PageReport {
    ran: Vec<String>,
    /// Per block not run: where and why, and its commands.
    skipped: Vec<(String, Vec<String>)>,
    failures: Vec<String>,
}

fn run_page(path: &Path) -> PageReport {
    let mut report = PageReport::default();
    let blocks = command_blocks(path);
    if blocks.iter().all(|b| b.directives.not_run.is_some()) {
        for block in &blocks {
            skip(&mut report, block);
        }
        return report;
    }
    let copy = fixture_copy();
    let bin = bin_dir();
    let logs = tempfile::tempdir().expect("tempdir");
    let mut n = 0;
    for block in &blocks {
        if block.directives.not_run.is_some() {
            skip(&mut report, block);
            continue;
        }
        let cwd = match &block.directives.cwd {
            Some(dir) => copy.path().join(dir),
            None => copy.path().to_path_buf(),
        };
        if !cwd.is_dir() {
            report.failures.push(format!(
                "{}: the block's cwd `{}` is not a folder of the copy of examples/ and tests/fixtures/",
                block.at,
                block.directives.cwd.as_deref().unwrap_or(".")
            ));
            continue;
        }
        if let Some(before) = &block.directives.before {
            n += 1;
            let out = run_shell(before, &cwd, bin.path(), logs.path(), n);
            if out.status != Some(0) {
                report.failures.push(format!(
                    "{}: `before={before}` exited {:?}\n{}",
                    block.at, out.status, out.output
                ));
                continue;
            }
        }
        for (k, command) in block.commands.iter().enumerate() {
            n += 1;
            let expected = block
                .directives
                .exits
                .as_ref()
                .map_or_else(|| vec![0], |e| e[k].clone());
            let out = run_shell(command, &cwd, bin.path(), logs.path(), n);
            report.ran.push(format!(
                "{}: {command}  ({:.1} s)",
                block.at,
                out.took.as_secs_f64()
            ));
            if !out.status.is_some_and(|s| expected.contains(&s)) {
                let status = out.status.map_or_else(
                    || format!("no status (killed after {COMMAND_TIMEOUT:?}?)"),
                    |s| s.to_string(),
                );
                report.failures.push(format!(
                    "{}: `{command}` exited {status}, the docs say {expected:?}\n{}",
                    block.at, out.output
                ));
            }
        }
    }
    report
}

fn skip(report: &mut PageReport, block: &Block) {
    let reason = block.directives.not_run.as_deref().unwrap_or_default();
    report.skipped.push((
        format!("{} (not run: {reason})", block.at),
        block.commands.clone(),
    ));
}

/// Written to stderr directly, not through `eprintln!`, so the counts show in a passing run
/// too (the test harness captures only the print macros).
fn say(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

#[test]
fn the_docs_commands_run() {
    let started = Instant::now();
    let queue = Mutex::new(doc_files().into_iter().collect::<VecDeque<_>>());
    let reports: Mutex<BTreeMap<String, PageReport>> = Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().expect("queue").pop_front();
                    let Some(page) = next else { break };
                    let report = run_page(&page);
                    reports
                        .lock()
                        .expect("reports")
                        .insert(relative(&page), report);
                }
            });
        }
    });
    let reports = reports.into_inner().expect("reports");
    let ran: Vec<&String> = reports.values().flat_map(|r| &r.ran).collect();
    let skipped: Vec<&(String, Vec<String>)> = reports.values().flat_map(|r| &r.skipped).collect();
    let skipped_count: usize = skipped.iter().map(|(_, commands)| commands.len()).sum();
    let failures: Vec<&String> = reports.values().flat_map(|r| &r.failures).collect();
    let mut summary = format!(
        "docs commands: {} run, {} skipped, {} failed, in {:.1} s\n",
        ran.len(),
        skipped_count,
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    for line in &ran {
        summary.push_str(&format!("  ran      {line}\n"));
    }
    for (block, commands) in &skipped {
        summary.push_str(&format!("  skipped  {block}:\n"));
        for command in commands {
            summary.push_str(&format!("             {command}\n"));
        }
    }
    say(&summary);
    assert!(
        failures.is_empty(),
        "{} docs command(s) failed:\n\n{}",
        failures.len(),
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    // The fresh-machine command is what people and CI rely on: it must be among those run.
    let fresh = "gpucap --config examples/quickstart/gpucap.toml plan";
    assert!(
        ran.iter()
            .any(|r| r.starts_with("README.md:") && r.contains(&format!(": {fresh}  ("))),
        "README.md's fresh-machine command (`cargo run -- --config examples/quickstart/gpucap.toml plan`) was not found or not run"
    );
}

#[test]
fn the_convention_reads_blocks_as_documented() {
    let body = [
        "gpucap plan -o plan.json   # a comment",
        "cargo run -- --config x.toml plan",
        "cargo bench --bench solver",
        "gpucap prices --write-snapshot a.csv \\",
        "  --from-catalog dir",
        "examples/apply-offline/run.sh",
    ];
    assert_eq!(
        commands_in(&body, false),
        [
            "gpucap plan -o plan.json   # a comment",
            "gpucap --config x.toml plan",
            "gpucap prices --write-snapshot a.csv --from-catalog dir",
        ]
    );
    assert_eq!(
        commands_in(
            &["$ gpucap --help", "usage: …", "gpucap not a command"],
            true
        ),
        ["gpucap --help"]
    );
    let lines = [
        "<!-- not run: needs AWS credentials -->",
        "<!-- docs-test: cwd=examples/approval; exits=0,3|0 -->",
        "```sh",
    ];
    let d = directives_above(&lines, 2, "x.md:3");
    assert_eq!(d.not_run.as_deref(), Some("needs AWS credentials"));
    assert_eq!(d.cwd.as_deref(), Some("examples/approval"));
    assert_eq!(d.exits, Some(vec![vec![0], vec![3, 0]]));
}

// ---------------------------------------------------------------------------------------------
// Links

/// The anchors GitHub gives a page's headings: the heading's text, lower-cased, with
/// everything but letters, digits, `-` and `_` dropped and each space a `-`; a repeated one
/// gets `-1`, `-2`, …
fn anchors(path: &Path) -> BTreeSet<String> {
    let text = read(path);
    let mut anchors = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(&text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let slug = slug(&heading.take().unwrap_or_default());
                let count = seen.entry(slug.clone()).or_insert(0);
                anchors.insert(if *count == 0 {
                    slug.clone()
                } else {
                    format!("{slug}-{count}")
                });
                *count += 1;
            }
            _ => {}
        }
    }
    anchors
}

fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every link destination in a page that is not a URL (`http:`, `mailto:`, …).
fn relative_links(path: &Path) -> Vec<String> {
    let text = read(path);
    Parser::new_ext(&text, Options::ENABLE_TABLES)
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some(dest_url.to_string())
            }
            _ => None,
        })
        .filter(|dest| {
            let scheme = dest.split_once(':').map(|(s, _)| s);
            !scheme.is_some_and(|s| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '+'))
        })
        .collect()
}

/// The file a link in `page` leads to, and its anchor.
fn resolve(page: &Path, dest: &str) -> (PathBuf, Option<String>) {
    let (file, anchor) = match dest.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor.to_string())),
        None => (dest, None),
    };
    let target = if file.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().expect("a page's folder").join(file)
    };
    (target, anchor)
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in doc_files() {
        for dest in relative_links(&page) {
            checked += 1;
            let (target, anchor) = resolve(&page, &dest);
            if !target.exists() {
                broken.push(format!("{}: `{dest}`: no such file", relative(&page)));
                continue;
            }
            if let Some(anchor) = anchor
                && target.extension().is_some_and(|e| e == "md")
                && !anchors(&target).contains(&anchor)
            {
                broken.push(format!(
                    "{}: `{dest}`: {} has no heading with the anchor `#{anchor}`",
                    relative(&page),
                    relative(&target)
                ));
            }
        }
    }
    assert!(checked > 0, "no relative links found in the docs");
    assert!(
        broken.is_empty(),
        "broken links in the docs:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_docs_page_is_reachable_from_the_readme() {
    let pages: BTreeSet<PathBuf> = doc_files()
        .into_iter()
        .map(|p| fs::canonicalize(&p).expect("canonicalize"))
        .collect();
    let start = fs::canonicalize(root().join("README.md")).expect("README.md");
    let mut reached = BTreeSet::from([start.clone()]);
    let mut queue = VecDeque::from([start]);
    while let Some(page) = queue.pop_front() {
        for dest in relative_links(&page) {
            let (target, _) = resolve(&page, &dest);
            let Ok(target) = fs::canonicalize(&target) else {
                continue;
            };
            if pages.contains(&target) && reached.insert(target.clone()) {
                queue.push_back(target);
            }
        }
    }
    let unreached: Vec<String> = pages.difference(&reached).map(|p| relative(p)).collect();
    assert!(
        unreached.is_empty(),
        "docs pages no link leads to from README.md (directly or through docs/README.md): {}",
        unreached.join(", ")
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    assert_eq!(
        slug("Configuration: gpucap.toml"),
        "configuration-gpucaptoml"
    );
    assert_eq!(
        slug("Placing campaigns whole (gangs)"),
        "placing-campaigns-whole-gangs"
    );
    assert_eq!(
        slug("Fresh machine: two commands"),
        "fresh-machine-two-commands"
    );
}
