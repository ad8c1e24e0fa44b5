//! The documentation as a newcomer meets it, checked without any service: the README stays a
//! front door (at most 300 lines, a quick start of exactly two commands), every `lockbench …`
//! example in the README and docs/*.md parses (the built binary, the example's arguments and
//! `--help`), and every relative link, with its `#anchor`, leads somewhere.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const README_MAX_LINES: usize = 300;

/// The quick start's two commands, as the README has given them since the main job existed.
const QUICK_START: [&str; 2] = ["scripts/quickstart.sh", "scripts/test.sh"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// README.md and every docs/*.md, sorted.
fn readme_and_docs() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    files.insert(0, root().join("README.md"));
    files
}

/// The lines of `text` inside fenced code blocks, with their 1-based line numbers and the
/// fence's info string (`sh`, `text`, …).
fn code_lines(text: &str) -> Vec<(usize, &str, &str)> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            fence = if fence.is_some() {
                None
            } else {
                Some(info.trim())
            };
        } else if let Some(info) = fence {
            out.push((i + 1, info, line));
        }
    }
    out
}

/// The commands of the README's "Quick start" section: its code lines without comments.
fn quick_start_commands(readme: &str) -> Vec<String> {
    let start = readme
        .find("\n## Quick start\n")
        .expect("README has a \"## Quick start\" section");
    let rest = &readme[start + 1..];
    let section = match rest[3..].find("\n## ") {
        Some(end) => &rest[..end + 3],
        None => rest,
    };
    code_lines(section)
        .into_iter()
        .map(|(_, _, l)| l.split(" #").next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, at most {README_MAX_LINES}: move reference text to docs/"
    );
    assert_eq!(
        quick_start_commands(&readme),
        QUICK_START,
        "the README's quick start must give exactly the two commands"
    );
}

/// One `lockbench …` example: where it is, and its arguments after `lockbench`.
struct Example {
    at: String,
    args: Vec<String>,
}

/// Every shell line of a code block that runs `lockbench`, joined over `\` continuations, cut at
/// a trailing comment, a pipe or a `&`.
fn examples(path: &Path) -> Vec<Example> {
    let text = read(path);
    let name = path.strip_prefix(root()).unwrap().display().to_string();
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (n, _, line) in code_lines(&text) {
        let line = line.trim();
        let (at, joined) = match pending.take() {
            Some((at, head)) => (at, format!("{head} {line}")),
            None if line.starts_with("lockbench ") => (n, line.to_string()),
            None => continue,
        };
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((at, head.trim_end().to_string()));
            continue;
        }
        let command = joined
            .split(" #")
            .next()
            .unwrap()
            .split(" | ")
            .next()
            .unwrap()
            .trim_end()
            .trim_end_matches('&')
            .trim_end();
        let words = shlex::split(command)
            .unwrap_or_else(|| panic!("{name}:{at}: cannot split `{command}` as a shell would"));
        out.push(Example {
            at: format!("{name}:{at}"),
            args: words[1..].to_vec(),
        });
    }
    assert!(
        pending.is_none(),
        "{name}: a `\\` continuation runs off the end of its block"
    );
    out
}

#[test]
fn every_lockbench_example_in_the_readme_and_docs_parses() {
    let examples: Vec<Example> = readme_and_docs().iter().flat_map(|p| examples(p)).collect();
    assert!(
        examples.len() >= 30,
        "only {} `lockbench …` examples found: is the extraction broken?",
        examples.len()
    );
    let mut failures = Vec::new();
    for e in &examples {
        let out = Command::new(env!("CARGO_BIN_EXE_lockbench"))
            .args(&e.args)
            .arg("--help")
            .output()
            .unwrap();
        if !out.status.success() {
            failures.push(format!(
                "{}: lockbench {} --help exited {:?}: {}",
                e.at,
                e.args.join(" "),
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// GitHub's anchor for a heading: lower case, only letters, digits, `_`, `-` and spaces kept,
/// spaces made `-`; a repeated anchor gets `-1`, `-2`, ….
fn anchors(markdown: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        if fence || !heading.trim_start_matches('#').starts_with(' ') {
            continue;
        }
        let slug: String = heading
            .trim_start_matches('#')
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut candidate = slug.clone();
        let mut n = 0;
        while !seen.insert(candidate.clone()) {
            n += 1;
            candidate = format!("{slug}-{n}");
        }
    }
    seen
}

/// The targets of the inline links `[text](target)` of `markdown`, outside code blocks and
/// code spans, with their line numbers.
fn link_targets(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence = false;
    for (i, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        // Drop code spans, so `a[i](x)` in code is not a link.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// Why `target`, linked from `from`, does not resolve; `None` when it does.
fn broken(from: &Path, target: &str) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        from.to_path_buf()
    } else {
        from.parent().unwrap().join(path)
    };
    if !file.exists() {
        return Some(format!("{} does not exist", file.display()));
    }
    let anchor = anchor?;
    if file.extension().is_none_or(|x| x != "md") {
        return Some(format!(
            "an anchor into {}, which is not Markdown",
            file.display()
        ));
    }
    (!anchors(&read(&file)).contains(anchor)).then(|| {
        format!(
            "{} has no heading whose anchor is #{anchor}",
            file.display()
        )
    })
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut files = readme_and_docs();
    files.push(root().join("BENCHMARKS.md"));
    let mut checked = 0;
    let mut failures = Vec::new();
    for file in &files {
        for (line, target) in link_targets(&read(file)) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            if let Some(why) = broken(file, &target) {
                let name = file.strip_prefix(root()).unwrap().display();
                failures.push(format!("{name}:{line}: ({target}): {why}"));
            }
        }
    }
    assert!(
        checked >= 30,
        "only {checked} relative links found: is the extraction broken?"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
