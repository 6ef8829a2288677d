//! No crate of the workspace has a module import cycle: in each crate's library (its program
//! where it has none) every file of `src/` is a node, and a path it names (`use crate::budget::Knob`, `super::spec::SizeSpec`,
//! `paired::measure(..)` of a child module, in imports and in code alike) is an edge to
//! the file where the named item is defined, found through `use` bindings (a `pub use` that
//! re-exports a child's item is a name for others, not an edge; a module naming its ancestors'
//! items is part of them, not an edge; inline modules are their file's). Comments, strings and test-only items (`#[cfg(test)]`, `#[cfg(all(test, ..))]`) are
//! left out. The bench's own library also keeps its layers
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

/// Whether `toks[i..]` starts a test-only attribute: `#[cfg(...)]` naming `test` and not
/// `not` (`#[cfg(test)]`, `#[cfg(all(test, feature = "std"))]`); its length if it does.
fn test_attr(toks: &[(Tok, usize)], i: usize) -> Option<usize> {
    let is = |k: usize, t: &Tok| toks.get(i + k).is_some_and(|x| x.0 == *t);
    if !(is(0, &Tok::Punct('#')) && is(1, &Tok::Punct('[')) && is(2, &Tok::Ident("cfg".into()))) {
        return None;
    }
    let len = toks[i..].iter().position(|t| t.0 == Tok::Punct(']'))? + 1;
    let inner = &toks[i..i + len];
    let has = |w: &str| inner.iter().any(|t| t.0 == Tok::Ident(w.into()));
    (has("test") && !has("not")).then_some(len)
}

/// `toks` without the items under a test-only `cfg` (up to the `;` or the matching `}` of the
/// item the attribute is on).
fn without_tests(toks: Vec<(Tok, usize)>) -> Vec<(Tok, usize)> {
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        let Some(len) = test_attr(&toks, i) else {
            out.push(toks[i].clone());
            i += 1;
            continue;
        };
        i += len;
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
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
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

/// A path named in code or a `use` tree, with the name it binds (`use a::b as c` binds `c`;
/// a glob binds nothing).
struct Named {
    path: Vec<String>,
    binds: Option<String>,
    glob: bool,
    line: usize,
}

/// Every path of a `use` tree starting at `toks[*i]` (after `use`), up to its `;`.
fn use_tree(toks: &[(Tok, usize)], i: &mut usize, prefix: &[String], out: &mut Vec<Named>) {
    let mut path = prefix.to_vec();
    let line = toks.get(*i).map_or(0, |t| t.1);
    let mut binds = None;
    let mut glob = false;
    while let Some((t, _)) = toks.get(*i) {
        match t {
            Tok::Ident(s) if s == "as" => {
                if let Some((Tok::Ident(alias), _)) = toks.get(*i + 1) {
                    binds = Some(alias.clone());
                }
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
            Tok::Punct('*') => {
                glob = true;
                *i += 1;
                break;
            }
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
    let binds = if glob { None } else { binds.or_else(|| path.last().cloned()) };
    out.push(Named { path, binds, glob, line });
}

/// What one module (a file's, or an inline `mod m { .. }` in it) names.
#[derive(Default)]
struct Scope {
    file: String,
    /// Paths of `use` declarations that are not `pub`: imports, each an edge.
    imports: Vec<Named>,
    /// Paths of `pub` (or `pub(..)`) `use` declarations: names for others, not edges.
    reexports: Vec<Named>,
    /// Paths in code.
    code: Vec<Named>,
}

/// The scopes of one file (module path -> scope), and every inline module it declares.
fn scan(rel: &str, file_module: Vec<String>, code: &str, scopes: &mut BTreeMap<Vec<String>, Scope>) {
    let toks = without_tests(tokens(code));
    let ident = |k: usize| match toks.get(k) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let scope = scopes.entry(file_module.clone()).or_default();
    if scope.file.is_empty() {
        scope.file = rel.to_string();
    }
    // (module path, brace depth at which it closes)
    let mut stack: Vec<(Vec<String>, usize)> = vec![(file_module, 0)];
    let mut depth = 0usize;
    let mut k = 0;
    while k < toks.len() {
        let here = stack.last().map(|s| s.0.clone()).unwrap_or_default();
        match &toks[k].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if stack.len() > 1 && stack.last().is_some_and(|s| s.1 == depth) {
                    stack.pop();
                }
            }
            _ => {}
        }
        if ident(k) == Some("mod") && matches!(toks.get(k + 2), Some((Tok::Punct('{'), _))) {
            if let Some(name) = ident(k + 1) {
                let mut m = here.clone();
                m.push(name.to_string());
                scopes.entry(m.clone()).or_default().file = rel.to_string();
                stack.push((m, depth));
                depth += 1;
                k += 3;
                continue;
            }
        }
        if ident(k) == Some("use") {
            let public = k.checked_sub(1).is_some_and(|p| {
                ident(p) == Some("pub")
                    || (toks[p].0 == Tok::Punct(')') && k >= 4 && ident(k - 4) == Some("pub"))
                    || (toks[p].0 == Tok::Punct(')') && k >= 6 && ident(k - 6) == Some("pub"))
            });
            k += 1;
            let mut found = Vec::new();
            use_tree(&toks, &mut k, &[], &mut found);
            let scope = scopes.entry(here).or_default();
            if public {
                scope.reexports.extend(found)
            } else {
                scope.imports.extend(found)
            }
            continue;
        }
        let starts = ident(k).is_some()
            && matches!(toks.get(k + 1), Some((Tok::Sep, _)))
            && !matches!(k.checked_sub(1).and_then(|p| toks.get(p)), Some((Tok::Sep, _)));
        if starts {
            let mut path = Vec::new();
            let mut j = k;
            while let Some(s) = ident(j) {
                path.push(s.to_string());
                if !matches!(toks.get(j + 1), Some((Tok::Sep, _))) {
                    break;
                }
                j += 2;
            }
            let line = toks[k].1;
            scopes.entry(here).or_default().code.push(Named { path, binds: None, glob: false, line });
            k = j + 1;
            continue;
        }
        k += 1;
    }
}

/// The module graph of a crate: its scopes, with the names each binds.
struct Crate {
    scopes: BTreeMap<Vec<String>, Scope>,
}

impl Crate {
    /// `path` as named in module `m`, from the crate root; `None` for another crate's path.
    fn absolute(&self, m: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let (mut base, mut rest) = match first.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "super" => (m[..m.len().saturating_sub(1)].to_vec(), &path[1..]),
            "self" => (m.to_vec(), &path[1..]),
            _ => {
                let mut child = m.to_vec();
                child.push(first.clone());
                if self.scopes.contains_key(&child) {
                    (m.to_vec(), path)
                } else if let Some(target) = self.bound(m, first) {
                    let mut p = target?;
                    p.extend_from_slice(&path[1..]);
                    return Some(p);
                } else {
                    return None;
                }
            }
        };
        while rest.first().map(String::as_str) == Some("super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend_from_slice(rest);
        Some(base)
    }

    /// What `name` is bound to by a `use` of module `m`: `Some(None)` for another crate's item.
    fn bound(&self, m: &[String], name: &str) -> Option<Option<Vec<String>>> {
        let scope = self.scopes.get(m)?;
        let n = scope.imports.iter().chain(&scope.reexports).find(|n| n.binds.as_deref() == Some(name))?;
        // A `use` path is relative to `m` as any other path is, except that it cannot name a
        // binding of `m` itself (that would loop).
        let first = n.path.first()?;
        let mut child = m.to_vec();
        child.push(first.clone());
        if matches!(first.as_str(), "crate" | "super" | "self") || self.scopes.contains_key(&child) {
            Some(self.absolute(m, &n.path))
        } else {
            Some(None)
        }
    }

    /// The module an absolute path ends in, following `use` bindings (re-exports and imports)
    /// to where the item is defined; `None` for another crate's item.
    fn resolve(&self, path: &[String]) -> Option<Vec<String>> {
        let mut path = path.to_vec();
        'hop: for _ in 0..16 {
            let mut m: Vec<String> = Vec::new();
            for (i, seg) in path.iter().enumerate() {
                let mut child = m.clone();
                child.push(seg.clone());
                if self.scopes.contains_key(&child) {
                    m = child;
                    continue;
                }
                match self.bound(&m, seg) {
                    Some(Some(mut target)) => {
                        target.extend_from_slice(&path[i + 1..]);
                        path = target;
                        continue 'hop;
                    }
                    Some(None) => return None,
                    None => {
                        // A glob re-export: the name may come from the glob's module.
                        let globs = self
                            .scopes
                            .get(&m)
                            .into_iter()
                            .flat_map(|s| s.reexports.iter().chain(&s.imports));
                        for g in globs.filter(|n| n.glob) {
                            if let Some(mut from) = self.absolute(&m, &g.path) {
                                if self.scopes.contains_key(&from) && self.bound(&from, seg).is_some() {
                                    from.extend_from_slice(&path[i..]);
                                    path = from;
                                    continue 'hop;
                                }
                            }
                        }
                        return Some(m);
                    }
                }
            }
            return Some(m);
        }
        None
    }

    /// The file of the module `m` is written in.
    fn file(&self, m: &[String]) -> Option<&str> {
        self.scopes.get(m).map(|s| s.file.as_str())
    }
}

/// The module paths of files named by `#[path = "..."]` (or a `cfg_attr` with `path = `) on a
/// `mod` declaration: the per-target files of one module are that module, and the first of
/// them names it.
fn path_attributes(files: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
    let mut moved = BTreeMap::new();
    for (rel, src) in files {
        let dir = match rel.rsplit_once('/') {
            Some((d, "mod.rs" | "lib.rs" | "main.rs")) => format!("{d}/"),
            Some((_, _)) => format!("{}/", rel.trim_end_matches(".rs")),
            None if matches!(rel.as_str(), "lib.rs" | "main.rs") => String::new(),
            None => format!("{}/", rel.trim_end_matches(".rs")),
        };
        let lines: Vec<&str> = src.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(at) = line.find("path = \"") else { continue };
            let rest = &line[at + 8..];
            let Some(end) = rest.find('"') else { continue };
            let target = format!("{dir}{}", &rest[..end]);
            let decl = lines[i + 1..].iter().map(|l| l.trim()).find(|l| !l.starts_with("#["));
            let name = decl.and_then(|d| d.trim_start_matches("pub ").strip_prefix("mod "));
            if let Some(name) = name.map(|n| n.trim_end_matches(';').trim()) {
                let mut m = module_of(rel);
                m.push(name.to_string());
                moved.insert(target, m);
            }
        }
    }
    moved
}

/// The graph of `files` (path under `src/`, source): per file, its edges. A path in code or in
/// an import is an edge to the file where the named item is defined, found through `use`
/// bindings; a `pub use` binds a name for others and is no edge itself, and a module naming an
/// item of one of its ancestors (the crate root included) makes no edge: it is part of them.
fn graph(files: &[(String, String)]) -> BTreeMap<String, Vec<Edge>> {
    let moved = path_attributes(files);
    let mut scopes = BTreeMap::new();
    for (rel, src) in files {
        let module = moved.get(rel).cloned().unwrap_or_else(|| module_of(rel));
        scan(rel, module, &strip(src), &mut scopes);
    }
    let krate = Crate { scopes };
    let mut g: BTreeMap<String, Vec<Edge>> = files.iter().map(|(rel, _)| (rel.clone(), Vec::new())).collect();
    for (m, scope) in &krate.scopes {
        for n in scope.imports.iter().chain(&scope.code) {
            let first = n.path.first().map(String::as_str);
            // In code, only paths that start at a module of this crate are followed: a local
            // binding's associated item (`Knob::new`) is named by the `use` that bound it.
            let local = matches!(first, Some("crate" | "super" | "self")) || {
                let mut child = m.clone();
                child.extend(first.map(str::to_string));
                krate.scopes.contains_key(&child)
            };
            if !local && !scope.imports.iter().any(|i| std::ptr::eq(i, n)) {
                continue;
            }
            let Some(to) = krate.absolute(m, &n.path).and_then(|p| krate.resolve(&p)) else { continue };
            // A module is part of its ancestors: naming their items is no edge.
            if to.len() < m.len() && m.starts_with(&to) {
                continue;
            }
            let Some(to) = krate.file(&to) else { continue };
            if to != scope.file {
                let edge = Edge { to: to.to_string(), line: n.line, path: n.path.join("::") };
                g.entry(scope.file.clone()).or_default().push(edge);
            }
        }
    }
    g
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

/// The files of one crate's library (or of its program, where it has no library).
fn crate_files(src: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    read_tree(src, src, &mut files);
    if files.iter().any(|(rel, _)| rel == "lib.rs") {
        files.retain(|(rel, _)| rel != "main.rs");
    }
    files
}

#[test]
fn no_crate_of_the_workspace_has_a_module_cycle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<_> =
        std::fs::read_dir(&crates).expect("read crates/").flatten().map(|e| e.path()).collect();
    dirs.sort();
    let mut checked = Vec::new();
    let mut cycles = String::new();
    for src in dirs.iter().map(|d| d.join("src")).filter(|s| s.is_dir()) {
        let name = src
            .parent()
            .and_then(Path::file_name)
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        if let Some(c) = find_cycle(&graph(&crate_files(&src))) {
            cycles += &format!("an import cycle of {} files in {name}/src:\n{}", c.len(), show(&c));
        }
        checked.push(name);
    }
    assert!(checked.len() >= 8, "found only these crates: {checked:?}");
    assert!(cycles.is_empty(), "{cycles}");
}

#[test]
fn the_bench_is_layered() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = crate_files(&root);
    assert!(files.len() > 30, "{} files", files.len());
    let g = graph(&files);
    let edges: usize = g.values().map(Vec::len).sum();
    assert!(edges > 100, "the parser found {edges} edges only");
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
        file(
            "lib.rs",
            "pub mod a;\npub mod b;\nmod c;\npub use c::C;\npub mod inline { pub const I: u8 = 0; }\n",
        ),
        file(
            "a/mod.rs",
            "pub mod x;\nmod y;\npub use y::Y;\n// crate::b::Z in a comment\nconst S: &str = \"crate::b\";\n",
        ),
        file("a/x.rs", "use super::super::b::{self, Z as W};\nfn f() { let _ = r#\"crate::a\"#; }\n"),
        file(
            "a/y.rs",
            "pub struct Y;\n#[cfg(test)]\nmod tests { use crate::b::Z; }\n#[cfg(all(test, unix))]\nfn t() { crate::c::g() }\n",
        ),
        file("b.rs", "pub struct Z;\nfn g() -> usize { crate::a::x::f(); 'c' as usize }\n"),
        file(
            "c.rs",
            "use crate::a::Y;\nuse std::fmt;\npub struct C;\nfn g() -> u8 { crate::inline::I }\nmod m { use super::C; fn h() { crate::C; } }\n",
        ),
    ];
    let g = graph(&files);
    let to = |from: &str| g[from].iter().map(|e| e.to.clone()).collect::<Vec<_>>();
    assert!(to("a/mod.rs").is_empty(), "a re-export is no edge; comments and strings are not either");
    assert_eq!(to("a/x.rs"), ["b.rs", "b.rs"]);
    assert!(to("a/y.rs").is_empty(), "test items are left out");
    assert_eq!(to("b.rs"), ["a/x.rs"]);
    assert_eq!(
        to("c.rs"),
        ["a/y.rs", "lib.rs"],
        "a name is followed through re-exports to its file; an inline module is its file's; \
         another crate's path is no edge"
    );
    let c = find_cycle(&g).expect("a/x.rs and b.rs name each other");
    let text = show(&c);
    assert!(text.contains("a/x.rs:1 -> b.rs (super::super::b)"), "{text}");
    assert!(text.contains("b.rs:2 -> a/x.rs (crate::a::x::f)"), "{text}");
}
