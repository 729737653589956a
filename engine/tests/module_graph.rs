//! The top-level modules of the engine (and of datum-mq) import each other
//! without a loop: read every source file, collect the `crate::module`
//! paths it names (outside its `#[cfg(test)]` part), and look for a cycle
//! in that graph. A loop fails the test with the modules on it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`None` for the crate root).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
    (!matches!(name.as_str(), "lib" | "main")).then_some(name)
}

/// `crate::x` and `crate::{x, y::{z, w}}` names in `code` (the first
/// segment of each path).
fn crate_paths(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            out.insert(ident(rest));
            continue;
        };
        // The items of the group at brace depth 0.
        let (mut depth, mut item_start) = (0usize, 0usize);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    out.insert(ident(&group[item_start..i]));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.insert(ident(&group[item_start..i]));
                    item_start = i + 1;
                }
                _ => {}
            }
        }
    }
    out.remove("");
    out
}

fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(src, f)).collect();
    let mut graph = Graph::new();
    for file in &files {
        let Some(module) = module_of(src, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).expect("readable source");
        let code: String = text
            .split("\n#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let uses = graph.entry(module.clone()).or_default();
        for name in crate_paths(&code) {
            if name != module && modules.contains(&name) {
                uses.insert(name);
            }
        }
    }
    graph
}

/// A cycle of `graph`, if it has one.
fn find_loop(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        graph: &Graph,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(graph, next, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(graph, n, &mut Vec::new(), &mut done))
}

fn check(crate_dir: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(crate_dir)
        .join("src");
    let graph = graph(&src);
    assert!(graph.len() > 5, "read the modules of {}", src.display());
    if let Some(cycle) = find_loop(&graph) {
        let table: Vec<String> = graph
            .iter()
            .map(|(m, uses)| format!("{m} -> {uses:?}"))
            .collect();
        panic!(
            "{crate_dir}: modules import each other in a loop: {}\n{}",
            cycle.join(" -> "),
            table.join("\n")
        );
    }
}

#[test]
fn the_engine_has_no_import_loop() {
    check(".");
}

#[test]
fn datum_mq_has_no_import_loop() {
    check("../client");
}

#[test]
fn a_loop_is_found() {
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    g.entry("d".into()).or_default().insert("a".into());
    assert_eq!(
        find_loop(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    g.get_mut("c").expect("c").clear();
    assert_eq!(find_loop(&g), None);
    assert_eq!(
        crate_paths("use crate::{x, y::{z, v}};\nlet q = crate::w::f();"),
        ["w", "x", "y"].iter().map(|s| s.to_string()).collect()
    );
}
