//! The size rule of the source tree: no file under `src/` over [`MAX_FILE_LINES`] lines and no
//! function over [`MAX_FN_LINES`] lines, except the documented exceptions below (each with its
//! reason). A reader should meet rooms of one concept, not catalogues.
//!
//! Files are tokenized with `proc-macro2` (comments dropped, strings kept whole, line numbers
//! kept), so a brace inside a string or a comment does not fool the count. A function's length
//! runs from the line of its `fn` keyword to the line of its closing brace, both included; a
//! nested function or closure counts towards the function that holds it, and a nested `fn`
//! item is measured on its own as well.
//!
//! The test fails, naming each offender with its size, when a file or function exceeds its limit
//! without an exception, or when an exception is stale (the file or function no longer exceeds
//! the limit, or no longer exists), so that the list only shrinks.
//!
//! Run `cargo test --test structure -- --nocapture` to print the counts and the largest items.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// Most lines a file under `src/` may have.
const MAX_FILE_LINES: usize = 800;
/// Most lines a function may span, `fn` line to closing brace.
const MAX_FN_LINES: usize = 120;

/// Files allowed over [`MAX_FILE_LINES`]: `(path relative to the crate root, why)`.
const FILE_EXCEPTIONS: &[(&str, &str)] = &[];

/// Functions allowed over [`MAX_FN_LINES`]: `(path relative to the crate root, fn name, why)`.
///
/// None left: the report's HTML/SVG builders are maud templates, one function per page section,
/// and its plotters charts are drawn panel by panel (issue 34). An exception added here needs
/// its reason.
const FN_EXCEPTIONS: &[(&str, &str, &str)] = &[];

/// One function found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Function {
    /// The function's name.
    name: String,
    /// 1-based line of its `fn` keyword.
    line: usize,
    /// Lines from the `fn` keyword to the closing brace, both included.
    lines: usize,
}

/// Every function with a body in `source` (trait methods without a body are skipped).
///
/// # Panics
/// When `source` does not tokenize (the compiler would have refused it first).
fn functions(source: &str) -> Vec<Function> {
    let tokens = TokenStream::from_str(source).expect("source tokenizes");
    let mut found = Vec::new();
    collect(tokens, &mut found);
    found
}

fn collect(tokens: TokenStream, found: &mut Vec<Function>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Ident(keyword) if keyword == "fn" => {
                if let Some(TokenTree::Ident(name)) = tokens.get(i + 1) {
                    // The body is the first brace group before a `;` (a bodiless signature).
                    let body = tokens[i + 2..]
                        .iter()
                        .take_while(|t| !matches!(t, TokenTree::Punct(p) if p.as_char() == ';'))
                        .find_map(|t| match t {
                            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => Some(g),
                            _ => None,
                        });
                    if let Some(body) = body {
                        let start = keyword.span().start().line;
                        let end = body.span().end().line;
                        found.push(Function {
                            name: name.to_string(),
                            line: start,
                            lines: end - start + 1,
                        });
                    }
                }
            }
            TokenTree::Group(group) => collect(group.stream(), found),
            _ => {}
        }
        i += 1;
    }
}

/// Every `.rs` file under `<crate>/src`, relative to the crate root, sorted.
fn source_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(root.join("src"))
        .into_iter()
        .map(|entry| entry.expect("src/ is readable"))
        .filter(|entry| entry.path().extension().is_some_and(|e| e == "rs"))
        .map(|entry| {
            entry
                .path()
                .strip_prefix(root)
                .expect("under the crate root")
                .to_path_buf()
        })
        .collect();
    files.sort();
    files
}

/// `(file, line count)` for every file of the tree.
type FileSizes = Vec<(String, usize)>;
/// `(file, function)` for every function of the tree.
type FunctionSizes = Vec<(String, Function)>;

/// The sizes of the whole tree.
fn measure() -> (FileSizes, FunctionSizes) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut fns = Vec::new();
    for relative in source_files() {
        let source = std::fs::read_to_string(root.join(&relative)).expect("readable source");
        let name = relative.to_string_lossy().replace('\\', "/");
        files.push((name.clone(), source.lines().count()));
        for function in functions(&source) {
            fns.push((name.clone(), function));
        }
    }
    (files, fns)
}

#[test]
fn files_and_functions_stay_within_their_limits() {
    let (files, fns) = measure();
    let mut problems = Vec::new();

    for (file, lines) in &files {
        let excepted = FILE_EXCEPTIONS.iter().any(|(f, _)| f == file);
        if *lines > MAX_FILE_LINES && !excepted {
            problems.push(format!(
                "{file}: {lines} lines (limit {MAX_FILE_LINES}); split it by concept or add an exception with its reason"
            ));
        }
    }
    for (file, why) in FILE_EXCEPTIONS {
        match files.iter().find(|(f, _)| f == file) {
            Some((_, lines)) if *lines > MAX_FILE_LINES => {}
            Some((_, lines)) => problems.push(format!(
                "stale file exception {file} ({lines} lines, within the limit): delete it ({why})"
            )),
            None => problems.push(format!("stale file exception {file}: no such file ({why})")),
        }
    }
    for (file, function) in &fns {
        let excepted = FN_EXCEPTIONS
            .iter()
            .any(|(f, name, _)| f == file && *name == function.name);
        if function.lines > MAX_FN_LINES && !excepted {
            problems.push(format!(
                "{file}:{} fn {}: {} lines (limit {MAX_FN_LINES}); split it or add an exception with its reason",
                function.line, function.name, function.lines
            ));
        }
    }
    for (file, name, why) in FN_EXCEPTIONS {
        let longest = fns
            .iter()
            .filter(|(f, function)| f == file && function.name == *name)
            .map(|(_, function)| function.lines)
            .max();
        match longest {
            Some(lines) if lines > MAX_FN_LINES => {}
            Some(lines) => problems.push(format!(
                "stale fn exception {file} fn {name} ({lines} lines, within the limit): delete it ({why})"
            )),
            None => problems.push(format!("stale fn exception {file} fn {name}: not found ({why})")),
        }
    }

    print_summary(&files, &fns);
    assert!(
        problems.is_empty(),
        "{} structure problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The counts a closing note quotes, and the ten largest files and functions.
fn print_summary(files: &[(String, usize)], fns: &[(String, Function)]) {
    let total: usize = files.iter().map(|(_, n)| n).sum();
    let over = |limit: usize| files.iter().filter(|(_, n)| *n > limit).count();
    let fn_over = |limit: usize| fns.iter().filter(|(_, f)| f.lines > limit).count();
    println!(
        "src: {} files, {total} lines, {} functions; files >600: {}, >800: {}, >1000: {}; functions >=80: {}, >120: {}, >200: {}",
        files.len(),
        fns.len(),
        over(600),
        over(800),
        over(1000),
        fns.iter().filter(|(_, f)| f.lines >= 80).count(),
        fn_over(120),
        fn_over(200)
    );
    let mut by_size: Vec<_> = files.iter().collect();
    by_size.sort_by_key(|(f, n)| (std::cmp::Reverse(*n), f.clone()));
    for (file, lines) in by_size.iter().take(10) {
        println!("  file {lines:5} {file}");
    }
    let mut by_length: Vec<_> = fns.iter().collect();
    by_length.sort_by_key(|(f, function)| (std::cmp::Reverse(function.lines), f.clone()));
    for (file, function) in by_length.iter().take(10) {
        println!(
            "  fn   {:5} {file}:{} {}",
            function.lines, function.line, function.name
        );
    }
}

#[test]
fn the_scan_measures_functions_not_braces_in_strings_or_comments() {
    let source = r#"
trait T {
    fn bodiless(&self) -> u8;
}

/// `fn fake() {` in a doc comment is not a function.
pub async fn outer(x: u8) -> u8 {
    let s = "} fn not_a_fn() { {";
    // } a closing brace in a comment
    fn inner() -> u8 {
        1
    }
    x + inner()
}

impl T for () {
    fn bodiless(&self) -> u8 { 0 }
}
"#;
    let found = functions(source);
    assert_eq!(
        found,
        vec![
            Function {
                name: "outer".into(),
                line: 7,
                lines: 8
            },
            Function {
                name: "inner".into(),
                line: 10,
                lines: 3
            },
            Function {
                name: "bodiless".into(),
                line: 17,
                lines: 1
            },
        ]
    );
}
