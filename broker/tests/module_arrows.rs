//! The broker's module arrows point one way (as TigerBeetle's `tidy` checks style): a scan of
//! every `crate::<module>` path in `broker/src` (`crate::{a, b}` groups too; `//` comment lines
//! skipped, `super::` paths stay inside a module so they are not edges) builds the graph between
//! top-level modules. It must have no import circle other than the ones listed in
//! `CIRCLES_LEFT` (shrink that list, never grow it), nothing may import `server` (process
//! wiring only), and the leaf layers must not reach up into the node or the front end.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Import circles still to untangle: none left (#17 made the group and transaction services
/// submodules of `node`, the shard they are part of).
const CIRCLES_LEFT: &[&[&str]] = &[];

/// Modules below the node: they may not import any of `UPPER`.
const LEAVES: &[&str] = &[
    "runtime",
    "storage",
    "limits",
    "config",
    "stages",
    "fetch_session",
    "internal_topics",
    "group",
    "txn",
    "catalog",
    "topic_configs",
    "dynamic_configs",
    "admission",
    "auto_create",
    "disk_space",
    "memory",
    "metrics",
    "cluster",
    "cluster_config",
];
const UPPER: &[&str] = &["node", "kafka", "server", "admin_http", "cluster_member"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The modules named right after `crate::`: one (`node::Node`) or a group
/// (`{node::Node, storage}`: the first segment of each item at the group's top level).
fn named_modules(after: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect()
    };
    let Some(group) = after.strip_prefix('{') else {
        let name = ident(after);
        return if name.is_empty() { vec![] } else { vec![name] };
    };
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut item_start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if item_start && !c.is_whitespace() => {
                item_start = false;
                let name = ident(&group[i..]);
                if !name.is_empty() && name != "self" {
                    names.push(name);
                }
            }
            _ => {}
        }
    }
    names
}

/// Top-level module -> the top-level modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).expect("under src");
        let first = rel
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        let top = first.trim_end_matches(".rs").to_string();
        if top == "lib" || top == "bin" {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("read source");
        let deps = g.entry(top.clone()).or_default();
        for line in text.lines() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let mut rest = line;
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                for name in named_modules(rest) {
                    if name != top {
                        deps.insert(name);
                    }
                }
            }
        }
    }
    g
}

/// Strongly connected components with more than one module (Tarjan's algorithm).
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: BTreeSet<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        if let Some(deps) = t.g.get(v) {
            for w in deps {
                let w = w.as_str();
                if !t.g.contains_key(w) {
                    continue; // an external crate path
                }
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    let lv = t.low[v];
                    t.low.insert(v, lv.min(lw));
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    let lv = t.low[v];
                    t.low.insert(v, lv.min(iw));
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.insert(scc);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: BTreeSet::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_new_import_circles() {
    let g = graph();
    assert!(g.contains_key("node") && g.contains_key("storage"), "{g:?}");
    let found = circles(&g);
    let allowed: BTreeSet<Vec<String>> = CIRCLES_LEFT
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(
        found, allowed,
        "import circles changed (found vs allowed); module graph: {g:#?}"
    );
}

#[test]
fn nothing_imports_the_server_and_leaves_stay_low() {
    let g = graph();
    for (module, deps) in &g {
        assert!(
            !deps.contains("server"),
            "{module} imports server (process wiring only)"
        );
        if LEAVES.contains(&module.as_str()) {
            let up: Vec<&String> = deps
                .iter()
                .filter(|d| UPPER.contains(&d.as_str()))
                .collect();
            assert!(up.is_empty(), "{module} reaches up into {up:?}");
        }
    }
}

#[test]
fn grouped_paths_are_seen() {
    assert_eq!(named_modules("node::Node;"), vec!["node"]);
    assert_eq!(
        named_modules("{node::{Node, ShardMsg}, storage, limits::X};"),
        vec!["node", "storage", "limits"]
    );
    assert!(named_modules("Foo").is_empty() && named_modules("{}").is_empty());
}

#[test]
fn the_scan_sees_a_circle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    g.entry("d".into()).or_default().insert("a".into());
    let found = circles(&g);
    assert_eq!(
        found,
        [vec!["a".to_string(), "b".into(), "c".into()]]
            .into_iter()
            .collect()
    );
}
