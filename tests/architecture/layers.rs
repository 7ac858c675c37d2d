//! The module layers of one source tree, read from its files: which direct
//! children of a module import which, and whether every import goes down
//! the layer table.
//!
//! A child is a file `name.rs` or a folder `name/` beside the parent's
//! `mod.rs` or `lib.rs`. An import of child `b` by child `a` is any path
//! `PREFIX::b` (also inside a `PREFIX::{b, c::D}` group) or a `super::`
//! path that climbs to the parent, in any file of `a`, comments left out.
//! Hand-written rather than a Rust parser crate: the rule needs only paths,
//! and `syn` with full features would parse 30,000 lines for nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Child → the children it imports, with one file per edge as evidence.
pub type Edges = BTreeMap<String, BTreeMap<String, String>>;

/// The direct children of the module whose folder is `root`.
pub fn children(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in fs::read_dir(root).expect("module folder is readable") {
        let entry = entry.expect("folder entry");
        let name = entry.file_name().to_string_lossy().to_string();
        let path = entry.path();
        if path.is_dir() {
            out.insert(name);
        } else if let Some(stem) = name.strip_suffix(".rs")
            && !matches!(stem, "mod" | "lib" | "main")
        {
            out.insert(stem.to_string());
        }
    }
    out
}

fn files_of(root: &Path, child: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let file = root.join(format!("{child}.rs"));
    if file.is_file() {
        out.push(file);
    }
    let mut stack = vec![root.join(child)];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The text of a Rust file without its comments (line and block), string
/// contents kept: paths in strings are not imports, but are rare enough in
/// these trees that keeping them errs on the strict side.
fn without_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' && i + 1 < b.len() {
                out.push(c as char);
                out.push(b[i + 1] as char);
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
            out.push(c as char);
            i += 1;
            continue;
        }
        if c == b'"' {
            // a char literal '"' is not the start of a string
            if !(i > 0 && b[i - 1] == b'\'' && b.get(i + 1) == Some(&b'\'')) {
                in_str = true;
            }
            out.push('"');
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else {
            // keep bytes as they are; non-ASCII only matters inside strings
            out.push(if c.is_ascii() { c as char } else { ' ' });
            i += 1;
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The first identifier of each item of a `{...}` group starting at `open`.
fn group_heads(s: &[u8], open: usize) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expect_head = true;
    let mut i = open;
    while i < s.len() {
        match s[i] {
            b'{' => {
                depth += 1;
                if depth == 1 {
                    expect_head = true;
                }
            }
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            b',' if depth == 1 => expect_head = true,
            c if depth == 1 && expect_head && is_ident(c) => {
                let start = i;
                while i < s.len() && is_ident(s[i]) {
                    i += 1;
                }
                heads.push(String::from_utf8_lossy(&s[start..i]).to_string());
                expect_head = false;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    heads
}

/// The names that follow `prefix::` in `text`: `prefix::a` gives `a`,
/// `prefix::{a, b::C}` gives `a` and `b`.
fn names_after(text: &str, prefix: &str) -> Vec<String> {
    let s = text.as_bytes();
    let pat = format!("{prefix}::");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find(&pat) {
        let at = from + pos;
        from = at + pat.len();
        if at > 0 && (is_ident(s[at - 1]) || s[at - 1] == b':') {
            continue;
        }
        let mut i = from;
        if s.get(i) == Some(&b'{') {
            out.extend(group_heads(s, i));
            continue;
        }
        let start = i;
        while i < s.len() && is_ident(s[i]) {
            i += 1;
        }
        if i > start {
            out.push(String::from_utf8_lossy(&s[start..i]).to_string());
        }
    }
    out
}

/// How many `super::` climb from `file` (inside child folder or file) to
/// the parent module whose folder is `root`.
fn supers_to_parent(root: &Path, file: &Path) -> usize {
    let rel = file.strip_prefix(root).expect("file under root");
    let parts: Vec<_> = rel
        .iter()
        .map(|p| p.to_string_lossy().to_string())
        .collect();
    let last = parts.last().expect("a file name");
    // the module path of the file, relative to the parent
    parts.len() - 1 + usize::from(last != "mod.rs")
}

/// Which children of the module at `root` import which; `prefix` is the
/// absolute path of that module (`crate::controller`, `crate`).
pub fn edges(root: &Path, prefix: &str) -> Edges {
    let kids = children(root);
    let mut out: Edges = BTreeMap::new();
    for child in &kids {
        let entry = out.entry(child.clone()).or_default();
        for file in files_of(root, child) {
            let text = without_comments(&fs::read_to_string(&file).expect("readable source"));
            let climb = supers_to_parent(root, &file);
            let mut names = names_after(&text, prefix);
            if climb > 0 {
                let supers = vec!["super"; climb].join("::");
                names.extend(names_after(&text, &supers));
            }
            for name in names {
                if &name != child && kids.contains(&name) {
                    entry.entry(name).or_insert_with(|| {
                        file.strip_prefix(root)
                            .expect("under root")
                            .display()
                            .to_string()
                    });
                }
            }
        }
    }
    out
}

/// Every import that does not go strictly down `layers` (lowest first), and
/// every child the table does not place, as messages.
pub fn violations(edges: &Edges, layers: &[(&str, &[&str])]) -> Vec<String> {
    let mut level = BTreeMap::new();
    for (i, (_, mods)) in layers.iter().enumerate() {
        for m in *mods {
            level.insert(m.to_string(), i);
        }
    }
    let mut out = Vec::new();
    for child in edges.keys() {
        if !level.contains_key(child) {
            out.push(format!("`{child}` is in no layer of the table: place it"));
        }
    }
    for m in level.keys() {
        if !edges.contains_key(m) {
            out.push(format!("the table names `{m}`, which is not a module here"));
        }
    }
    for (from, tos) in edges {
        let Some(&lf) = level.get(from) else { continue };
        for (to, file) in tos {
            let Some(&lt) = level.get(to) else { continue };
            if lt >= lf {
                let how = if lt == lf {
                    "its sibling"
                } else {
                    "the higher"
                };
                out.push(format!(
                    "`{from}` (layer {}) imports {how} `{to}` (layer {}) in {file}",
                    layers[lf].0, layers[lt].0
                ));
            }
        }
    }
    out
}

/// The modules that sit on an import cycle (Tarjan's strongly connected
/// components of more than one module).
pub fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    struct T<'a> {
        e: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        let e = t.e;
        for w in e.get(v).into_iter().flat_map(|m| m.keys()) {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        e: edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}
