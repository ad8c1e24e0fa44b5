//! The layer rule of the module map in `src/lib.rs`, checked on the source.
//!
//! Every file under `src/` is tokenized (comments dropped, strings kept whole) and each
//! reference to another top-level module is collected: `crate::<module>` paths in `use`
//! statements, types and expressions (`use crate::{a, b::c}` groups included), `super::` paths
//! that climb out of their module, `"crate::<module>…"` strings in attributes
//! (`#[serde(with = "crate::duration_ms")]`), and `lockbench::<module>` in the binary
//! (`src/main.rs`, `src/cli/`). Doc comments are not imports and are not counted.
//!
//! The test fails, naming the file, line and import, when
//! (a) a module imports from a module in a later layer of [`LAYERS`], or
//! (b) files of different top-level modules form an import cycle (also within one layer),
//! or when a top-level module is missing from [`LAYERS`], or [`LAYERS`] and the "Layers"
//! paragraph of `src/lib.rs` disagree.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// The layer order, lowest first: a module may import from its own layer and the layers
/// before it, never from a later one. Same list as the "Layers" paragraph of `src/lib.rs`
/// (checked by [`layer_list_matches_the_module_map`]). `cli` is the binary's module.
const LAYERS: &[&[&str]] = &[
    &[
        "atomic_file",
        "duration_ms",
        "node",
        "variant_names",
        "work",
    ],
    &["history", "ledger", "recording", "lease", "sink"],
    &["checker"],
    &["strategy"],
    &["toxiproxy"],
    &["topology"],
    &["nemesis"],
    &["driver"],
    &["results"],
    &["orchestration"],
    &["matrix"],
    &["report"],
    &["cli"],
];

/// Imports that break the rule today while another branch of issue 20 moves their target:
/// `(file, module it imports, why)`. They are left out of both checks; the test fails once one
/// no longer occurs, so that its entry is deleted and the list only shrinks.
const KNOWN_EXCEPTIONS: &[(&str, &str, &str)] = &[];

/// One reference from a file to another top-level module.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Import {
    /// The referring file, relative to the crate root (`src/nemesis/schedule.rs`).
    file: String,
    /// 1-based line of the reference.
    line: usize,
    /// The top-level module of the referring file.
    from: String,
    /// The top-level module referred to.
    to: String,
    /// The source line, trimmed.
    text: String,
}

impl fmt::Display for Import {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {} -> {}: `{}`",
            self.file, self.line, self.from, self.to, self.text
        )
    }
}

/// The module path of a file under `src/` (`["strategy", "kind"]`; `[]` for `lib.rs` and
/// `main.rs`). The binary's modules (`src/cli/`) are named like the library's: `cli` is
/// simply the last layer.
fn module_path(relative: &Path) -> Vec<String> {
    let mut path: Vec<String> = relative
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = path.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        path.push(stem.to_string());
    }
    path
}

/// True when `tokens[i..]` starts with `::`.
fn is_path_sep(tokens: &[TokenTree], i: usize) -> bool {
    matches!(
        (tokens.get(i), tokens.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

fn ident_at(tokens: &[TokenTree], i: usize) -> Option<String> {
    match tokens.get(i) {
        Some(TokenTree::Ident(id)) => Some(id.to_string()),
        _ => None,
    }
}

/// The first identifier of every comma-separated element of a `use` group.
fn group_heads(group: &TokenStream) -> Vec<String> {
    let tokens: Vec<TokenTree> = group.clone().into_iter().collect();
    let mut heads = Vec::new();
    let mut at_start = true;
    for t in &tokens {
        match t {
            TokenTree::Ident(id) if at_start => {
                heads.push(id.to_string());
                at_start = false;
            }
            TokenTree::Punct(p) if p.as_char() == ',' => at_start = true,
            _ => at_start = false,
        }
    }
    heads
}

/// What a path that starts at a crate root resolves to: the top-level modules it names.
/// `tokens[i]` is the first token after the root (`::` expected).
fn heads_after_root(tokens: &[TokenTree], i: usize) -> Vec<String> {
    if !is_path_sep(tokens, i) {
        return Vec::new();
    }
    match tokens.get(i + 2) {
        Some(TokenTree::Ident(id)) => vec![id.to_string()],
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => group_heads(&g.stream()),
        _ => Vec::new(),
    }
}

/// Collects the top-level modules referred to in `stream`, with the line of each reference.
/// `module` is the module path the tokens are in (inline `mod x { … }` pushes `x`).
fn scan(stream: TokenStream, module: &[String], out: &mut Vec<(usize, String)>) {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        let line = tokens[i].span().start().line;
        let preceded_by_sep = i >= 2 && is_path_sep(&tokens, i - 2);
        match &tokens[i] {
            TokenTree::Group(g) => {
                let inline_mod = i >= 2
                    && g.delimiter() == Delimiter::Brace
                    && ident_at(&tokens, i - 2).as_deref() == Some("mod")
                    && ident_at(&tokens, i - 1).is_some();
                if inline_mod {
                    let mut inner = module.to_vec();
                    inner.push(ident_at(&tokens, i - 1).unwrap_or_default());
                    scan(g.stream(), &inner, out);
                } else {
                    scan(g.stream(), module, out);
                }
            }
            TokenTree::Ident(id) if !preceded_by_sep => match id.to_string().as_str() {
                // `crate::` in the binary names the binary's modules; `lockbench::` the library's.
                "crate" | "lockbench" => {
                    for head in heads_after_root(&tokens, i + 1) {
                        out.push((line, head));
                    }
                }
                "super" => {
                    let mut base = module.to_vec();
                    let mut j = i;
                    loop {
                        base.pop();
                        if is_path_sep(&tokens, j + 1)
                            && ident_at(&tokens, j + 3).as_deref() == Some("super")
                        {
                            j += 3;
                        } else {
                            break;
                        }
                    }
                    match base.first() {
                        Some(top) => out.push((line, top.clone())),
                        None => {
                            for head in heads_after_root(&tokens, j + 1) {
                                out.push((line, head));
                            }
                        }
                    }
                    i = j;
                }
                _ => {}
            },
            TokenTree::Literal(lit) => {
                // `#[serde(with = "crate::duration_ms")]`: a path in a string, nothing else.
                let text = lit.to_string();
                if let Some(path) = text
                    .strip_prefix("\"crate::")
                    .and_then(|s| s.strip_suffix('"'))
                {
                    let is_path = path.split("::").all(|seg| {
                        !seg.is_empty() && seg.chars().all(|c| c.is_alphanumeric() || c == '_')
                    });
                    if is_path {
                        out.push((
                            line,
                            path.split("::").next().unwrap_or_default().to_string(),
                        ));
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// Every import between different top-level modules in the files under `src`.
fn imports(root: &Path) -> (Vec<Import>, BTreeSet<String>) {
    let src = root.join("src");
    let mut found = Vec::new();
    let mut modules = BTreeSet::new();
    for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let entry = entry.expect("readable src tree");
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let relative = path.strip_prefix(&src).expect("under src");
        let here = module_path(relative);
        let Some(from) = here.first().cloned() else {
            continue; // lib.rs / main.rs: only `mod` declarations and `cli::main()`.
        };
        modules.insert(from.clone());
        let text = std::fs::read_to_string(path).expect("readable source file");
        let stream = TokenStream::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: cannot tokenize: {e:?}", path.display()));
        let mut refs = Vec::new();
        scan(stream, &here, &mut refs);
        let lines: Vec<&str> = text.lines().collect();
        let file = PathBuf::from("src")
            .join(relative)
            .to_string_lossy()
            .into_owned();
        for (line, to) in refs {
            if to == from || to == "self" || to == "super" || to == "crate" {
                continue;
            }
            found.push(Import {
                file: file.clone(),
                line,
                from: from.clone(),
                to,
                text: lines
                    .get(line.saturating_sub(1))
                    .map_or("", |l| l.trim())
                    .to_string(),
            });
        }
    }
    found.sort();
    found.dedup();
    (found, modules)
}

/// Index of `module`'s layer in [`LAYERS`].
fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Imports that go to a later layer.
fn upward(imports: &[Import]) -> Vec<String> {
    imports
        .iter()
        .filter_map(|imp| {
            let (from, to) = (layer_of(&imp.from)?, layer_of(&imp.to)?);
            (to > from).then(|| {
                format!(
                    "{imp}\n    {} is in layer {} and may not import {} (layer {})",
                    imp.from,
                    from + 1,
                    imp.to,
                    to + 1
                )
            })
        })
        .collect()
}

/// Imports on a cycle between top-level modules: `a → b` where `b` also reaches `a`.
fn cyclic(imports: &[Import]) -> Vec<String> {
    let mut reach: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for imp in imports {
        reach.entry(&imp.from).or_default().insert(&imp.to);
    }
    // Transitive closure: a dozen modules, so the plain fixed point is instant.
    loop {
        let mut grew = false;
        let snapshot = reach.clone();
        for targets in reach.values_mut() {
            let more: Vec<&str> = targets
                .iter()
                .flat_map(|t| snapshot.get(t).into_iter().flatten().copied())
                .collect();
            for m in more {
                grew |= targets.insert(m);
            }
        }
        if !grew {
            break;
        }
    }
    imports
        .iter()
        .filter(|imp| {
            reach
                .get(imp.to.as_str())
                .is_some_and(|r| r.contains(imp.from.as_str()))
        })
        .map(|imp| {
            format!(
                "{imp}\n    {} also reaches {} (an import cycle)",
                imp.to, imp.from
            )
        })
        .collect()
}

fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_module_imports_from_a_later_layer_or_forms_a_cycle() {
    let (imports, modules) = imports(&crate_root());
    assert!(
        imports.len() > 50,
        "only {} cross-module imports found: is the scanner broken?",
        imports.len()
    );
    let unlisted: Vec<&String> = modules.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(
        unlisted.is_empty(),
        "top-level modules missing from LAYERS in tests/layers.rs (and from the Layers \
         paragraph of src/lib.rs): {unlisted:?}"
    );
    let excepted = |imp: &Import| {
        KNOWN_EXCEPTIONS
            .iter()
            .any(|(file, to, _)| imp.file == *file && imp.to == *to)
    };
    let stale: Vec<String> = KNOWN_EXCEPTIONS
        .iter()
        .filter(|(file, to, _)| !imports.iter().any(|i| i.file == *file && i.to == *to))
        .map(|(file, to, why)| format!("{file} -> {to} ({why})"))
        .collect();
    assert!(
        stale.is_empty(),
        "these KNOWN_EXCEPTIONS in tests/layers.rs no longer occur: delete them\n{}",
        stale.join("\n")
    );
    let imports: Vec<Import> = imports.into_iter().filter(|i| !excepted(i)).collect();
    let mut problems = upward(&imports);
    problems.extend(cyclic(&imports));
    assert!(
        problems.is_empty(),
        "{} import(s) break the layer order (lowest first: {}):\n{}",
        problems.len(),
        LAYERS
            .iter()
            .map(|l| l.join(", "))
            .collect::<Vec<_>>()
            .join(" → "),
        problems.join("\n")
    );
}

#[test]
fn layer_list_matches_the_module_map() {
    let lib = std::fs::read_to_string(crate_root().join("src/lib.rs")).expect("src/lib.rs");
    let paragraph: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .skip_while(|l| l.trim() != "## Layers")
        .skip_while(|l| !l.contains('→'))
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let documented: Vec<Vec<String>> = paragraph
        .split('→')
        .map(|layer| {
            layer
                .split(',')
                .map(|m| m.split('`').nth(1).unwrap_or_default().to_string())
                .collect()
        })
        .collect();
    let listed: Vec<Vec<String>> = LAYERS
        .iter()
        .map(|l| l.iter().map(|m| m.to_string()).collect())
        .collect();
    assert_eq!(
        documented, listed,
        "the Layers paragraph of src/lib.rs (`a`, `b` → `c` → … up to an empty line) and \
         LAYERS in tests/layers.rs differ"
    );
}

/// The scanner on a made-up file `src/strategy/kind.rs`.
fn scan_str(source: &str, file: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    scan(
        TokenStream::from_str(source).unwrap(),
        &module_path(Path::new(file)),
        &mut out,
    );
    out
}

#[test]
fn scanner_finds_paths_groups_super_and_attribute_strings_but_not_comments() {
    let source = r#"
//! See [`crate::report`] (a doc link, not an import).
use crate::{node::NodeEndpoint, lease::{Lease, AcquireError}};
use super::quorum;
// crate::driver in a comment
fn f() -> crate::topology::TopologyKind { todo!() }
#[derive(serde::Serialize)]
struct S { #[serde(with = "crate::duration_ms")] d: u64 }
const T: &str = "see crate::results for more";
mod tests {
    use super::*;
    use super::super::checker::Verdict;
}
"#;
    let found = scan_str(source, "strategy/kind.rs");
    let names: Vec<&str> = found.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(
        names,
        [
            "node",
            "lease",
            "strategy",
            "topology",
            "duration_ms",
            "strategy",
            "strategy"
        ],
        "{found:?}"
    );
    assert_eq!(found[0].0, 3, "line numbers are 1-based source lines");
    // `super::x` in a folder's mod.rs climbs to the crate root.
    let found = scan_str("use super::driver::X;", "strategy/mod.rs");
    assert_eq!(found, [(1, "driver".to_string())]);
    // The binary reaches the library as `lockbench::`.
    let found = scan_str("use lockbench::{report, results::RunDir};", "cli/run.rs");
    assert_eq!(
        found,
        [(1, "report".to_string()), (1, "results".to_string())]
    );
}

#[test]
fn rules_name_upward_imports_and_cycles() {
    let imp = |from: &str, to: &str| Import {
        file: format!("src/{from}/x.rs"),
        line: 1,
        from: from.into(),
        to: to.into(),
        text: format!("use crate::{to}::X;"),
    };
    let up = upward(&[imp("strategy", "topology"), imp("topology", "strategy")]);
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(
        up[0].starts_with("src/strategy/x.rs:1: strategy -> topology: `use crate::topology::X;`"),
        "{}",
        up[0]
    );
    let cycle = cyclic(&[
        imp("history", "ledger"),
        imp("ledger", "recording"),
        imp("recording", "history"),
        imp("checker", "history"),
    ]);
    assert_eq!(cycle.len(), 3, "{cycle:?}");
    assert!(cycle.iter().all(|c| !c.contains("checker")), "{cycle:?}");
}
