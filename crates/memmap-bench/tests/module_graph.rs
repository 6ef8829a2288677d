//! The library's module graph has no cycle: every file of `src/` (the binary's `main.rs`
//! aside) is a node, and a path it names (`use crate::budget::Knob`, `super::spec::SizeSpec`,
//! `paired::measure(..)` of a child module, in `use` trees and in code alike) is an edge to
//! the file of the deepest module on that path. A re-export is an edge of the file that makes
//! it, and naming an item through a re-export is an edge to the re-exporting file, so a
//! `mod.rs` that re-exports its children must not be used by them. Comments, strings and
//! `#[cfg(test)]` items are left out: what ships has the layers
//! size/budget/measure/limits, scenarios, report, cli.
//!
//! A cycle fails the test with every edge of it and the path that made the edge.

use std::collections::BTreeMap;
use std::path::Path;

/// A token of Rust code once comments and literals are gone.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`.
    Sep,
    /// Any other punctuation character.
    Punct(char),
}

/// `src` with comments, string, byte-string, raw-string and character literals blanked out
/// (newlines kept, so lines still count).
fn strip(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(&b, i) {
            out.extend(b[i..end].iter().map(|&c| blank(c)));
            i = end;
        } else if c == '"' || (c == 'b' && next == Some('"') && !ident_before(&b, i)) {
            i += if c == 'b' { 2 } else { 1 };
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
                out.push(' ');
            }
            i += 1;
        } else if c == '\'' && (next == Some('\\') || b.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\''); a lifetime has no closing quote.
            i += 1;
            while i < b.len() && b[i] != '\'' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether the character before `i` continues an identifier (`ab"` is not a byte string).
fn ident_before(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// The end of a raw string (`r"..."`, `r#"..."#`, `br"..."`) starting at `i`, if one does.
fn raw_string_end(b: &[char], i: usize) -> Option<usize> {
    if ident_before(b, i) {
        return None;
    }
    let mut j = i;
    if b.get(j) == Some(&'b') {
        j += 1;
    }
    if b.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    if b.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < b.len() {
        if b[j] == '"' && b[j + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(b.len())
}

/// The tokens of stripped code, each with its line.
fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let b: Vec<char> = code.chars().collect();
    let (mut v, mut i, mut line) = (Vec::new(), 0, 1);
    while i < b.len() {
        let c = b[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            v.push((Tok::Ident(b[start..i].iter().collect()), line));
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            v.push((Tok::Sep, line));
            i += 2;
        } else {
            v.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    v
}

/// `toks` without the items under `#[cfg(test)]` (up to the `;` or the matching `}` of the
/// item the attribute is on).
fn without_tests(toks: Vec<(Tok, usize)>) -> Vec<(Tok, usize)> {
    let attr: Vec<Tok> = ["#", "[", "cfg", "(", "test", ")", "]"]
        .iter()
        .map(|s| match *s {
            "cfg" | "test" => Tok::Ident((*s).to_string()),
            p => Tok::Punct(p.chars().next().unwrap_or(' ')),
        })
        .collect();
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        let is_attr =
            toks.len() - i >= attr.len() && toks[i..i + attr.len()].iter().map(|t| &t.0).eq(attr.iter());
        if !is_attr {
            out.push(toks[i].clone());
            i += 1;
            continue;
        }
        i += attr.len();
        let mut depth = 0;
        while i < toks.len() {
            match toks[i].0 {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    depth -= 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                Tok::Punct(';') if depth == 0 => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// A file's module path from its path under `src/` (`a/mod.rs` and `a.rs` are `a`).
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// One edge: from a file to a file, with the line and path that make it.
#[derive(Debug, Clone)]
struct Edge {
    to: String,
    line: usize,
    path: String,
}

/// Every path of a `use` tree starting at `toks[*i]` (after `use`), up to its `;`.
fn use_tree(toks: &[(Tok, usize)], i: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, usize)>) {
    let mut path = prefix.to_vec();
    let line = toks.get(*i).map_or(0, |t| t.1);
    while let Some((t, _)) = toks.get(*i) {
        match t {
            Tok::Ident(s) if s == "as" => {
                *i += 2;
                break;
            }
            // `self` in a group names the group's module.
            Tok::Ident(s) if s == "self" && !path.is_empty() => *i += 1,
            Tok::Ident(s) => {
                path.push(s.clone());
                *i += 1;
            }
            Tok::Sep => *i += 1,
            Tok::Punct('{') => {
                *i += 1;
                while let Some((t, _)) = toks.get(*i) {
                    match t {
                        Tok::Punct('}') => {
                            *i += 1;
                            break;
                        }
                        Tok::Punct(',') => *i += 1,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
                return;
            }
            _ => break,
        }
    }
    out.push((path, line));
}

/// The edges of the file `rel` (stripped, untested code `code`) among the `modules`.
fn edges_of(rel: &str, code: &str, modules: &BTreeMap<Vec<String>, String>) -> Vec<Edge> {
    let me = module_of(rel);
    let toks = without_tests(tokens(code));
    let ident = |k: usize| match toks.get(k) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let children: Vec<String> = (0..toks.len())
        .filter(|&k| ident(k) == Some("mod") && matches!(toks.get(k + 2), Some((Tok::Punct(';'), _))))
        .filter_map(|k| ident(k + 1).map(str::to_string))
        .collect();
    let mut paths: Vec<(Vec<String>, usize)> = Vec::new();
    let mut k = 0;
    while k < toks.len() {
        let first = ident(k);
        let starts = matches!(toks.get(k + 1), Some((Tok::Sep, _)))
            && !matches!(k.checked_sub(1).and_then(|p| toks.get(p)), Some((Tok::Sep, _)));
        if first == Some("use") {
            k += 1;
            use_tree(&toks, &mut k, &[], &mut paths);
            continue;
        }
        if let (Some(f), true) = (first, starts) {
            if matches!(f, "crate" | "super" | "self") || children.iter().any(|c| c == f) {
                let mut path = Vec::new();
                let mut j = k;
                while let Some(s) = ident(j) {
                    path.push(s.to_string());
                    if !matches!(toks.get(j + 1), Some((Tok::Sep, _))) {
                        break;
                    }
                    j += 2;
                }
                paths.push((path, toks[k].1));
                k = j + 1;
                continue;
            }
        }
        k += 1;
    }
    let mut edges = Vec::new();
    for (path, line) in paths {
        let Some(first) = path.first() else { continue };
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "super" => me[..me.len().saturating_sub(1)].to_vec(),
            "self" => me.clone(),
            c if children.iter().any(|x| x == c) => me.clone(),
            _ => continue,
        };
        let mut rest =
            if first == "crate" || first == "super" || first == "self" { &path[1..] } else { &path[..] };
        while rest.first().map(String::as_str) == Some("super") {
            base.pop();
            rest = &rest[1..];
        }
        let mut deepest = modules.get(&base).cloned();
        for seg in rest {
            base.push(seg.clone());
            match modules.get(&base) {
                Some(f) => deepest = Some(f.clone()),
                None => break,
            }
        }
        if let Some(to) = deepest.filter(|t| t != rel) {
            edges.push(Edge { to, line, path: path.join("::") });
        }
    }
    edges
}

/// The graph of `files` (path under `src/`, source): per file, its edges.
fn graph(files: &[(String, String)]) -> BTreeMap<String, Vec<Edge>> {
    let modules: BTreeMap<Vec<String>, String> =
        files.iter().map(|(rel, _)| (module_of(rel), rel.clone())).collect();
    files.iter().map(|(rel, src)| (rel.clone(), edges_of(rel, &strip(src), &modules))).collect()
}

/// A cycle of `g`, as its edges (from, edge), if there is one.
fn find_cycle(g: &BTreeMap<String, Vec<Edge>>) -> Option<Vec<(String, Edge)>> {
    // 0: not seen, 1: on the current path, 2: done.
    let mut state: BTreeMap<&str, u8> = BTreeMap::new();
    fn visit<'g>(
        v: &'g str,
        g: &'g BTreeMap<String, Vec<Edge>>,
        state: &mut BTreeMap<&'g str, u8>,
        stack: &mut Vec<(String, Edge)>,
    ) -> Option<Vec<(String, Edge)>> {
        state.insert(v, 1);
        for e in g.get(v).into_iter().flatten() {
            stack.push((v.to_string(), e.clone()));
            match state.get(e.to.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|(from, _)| *from == e.to).unwrap_or(0);
                    return Some(stack[start..].to_vec());
                }
                0 => {
                    if let Some(c) = visit(e.to.as_str(), g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
            stack.pop();
        }
        state.insert(v, 2);
        None
    }
    for v in g.keys() {
        if state.get(v.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(v, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The cycle as text, an edge a line.
fn show(cycle: &[(String, Edge)]) -> String {
    cycle.iter().map(|(from, e)| format!("  {from}:{} -> {} ({})\n", e.line, e.to, e.path)).collect()
}

/// Every `.rs` file under `dir`, by its path under `root`.
fn read_tree(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("read src").flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::path);
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            read_tree(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(root).expect("under src").to_string_lossy().replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&p).expect("read a source file")));
        }
    }
}

#[test]
fn the_library_module_graph_has_no_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&root, &root, &mut files);
    files.retain(|(rel, _)| rel != "main.rs");
    assert!(files.len() > 30, "{} files", files.len());
    let g = graph(&files);
    let edges: usize = g.values().map(Vec::len).sum();
    assert!(edges > 100, "the parser found {edges} edges only");
    if let Some(c) = find_cycle(&g) {
        panic!("an import cycle of {} files in memmap-bench/src:\n{}", c.len(), show(&c));
    }
    // The layers: nothing below the command line names it, the report names no scenario.
    for (from, es) in &g {
        for e in es {
            let names_cli = e.to.starts_with("cli/") && !from.starts_with("cli/");
            assert!(!names_cli, "{from}:{} names the command line: {}", e.line, e.path);
            let report_names_a_scenario = from.starts_with("report/") && e.to.starts_with("scenarios/");
            assert!(!report_names_a_scenario, "{from}:{} names a scenario: {}", e.line, e.path);
        }
    }
}

#[test]
fn the_parser_sees_every_kind_of_path_and_a_cycle() {
    let file = |rel: &str, src: &str| (rel.to_string(), src.to_string());
    let files = vec![
        file("lib.rs", "pub mod a;\npub mod b;\n"),
        file(
            "a/mod.rs",
            "pub mod x;\nmod y;\npub use y::Y;\n// crate::b::Z in a comment\nconst S: &str = \"crate::b\";\n",
        ),
        file("a/x.rs", "use super::super::b::{self, Z as W};\nfn f() { let _ = r#\"crate::a\"#; }\n"),
        file("a/y.rs", "pub struct Y;\n#[cfg(test)]\nmod tests { use crate::b::Z; }\n"),
        file("b.rs", "pub struct Z;\nfn g() -> usize { crate::a::x::f(); 'c' as usize }\n"),
    ];
    let g = graph(&files);
    let to = |from: &str| g[from].iter().map(|e| e.to.clone()).collect::<Vec<_>>();
    assert_eq!(to("a/mod.rs"), ["a/y.rs"], "a re-export is an edge; comments and strings are not");
    assert_eq!(to("a/x.rs"), ["b.rs", "b.rs"]);
    assert!(to("a/y.rs").is_empty(), "test items are left out");
    assert_eq!(to("b.rs"), ["a/x.rs"]);
    let c = find_cycle(&g).expect("a/x.rs and b.rs name each other");
    let text = show(&c);
    assert!(text.contains("a/x.rs:1 -> b.rs (super::super::b)"), "{text}");
    assert!(text.contains("b.rs:2 -> a/x.rs (crate::a::x::f)"), "{text}");
}
