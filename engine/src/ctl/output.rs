//! What the operator's commands print: aligned tables for people, JSON
//! for scripts, from one description of the answer.

use std::io::Write;

use serde_json::{Map, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables, and plain lines for records.
    #[value(alias = "text")]
    Table,
    Json,
}

/// Rows under column names. In JSON each row is an object keyed by the
/// column names in snake case.
#[derive(Debug, Default)]
pub struct Table {
    pub columns: Vec<&'static str>,
    pub rows: Vec<Vec<Value>>,
}

impl Table {
    pub fn new(columns: &[&'static str]) -> Table {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<Value>) {
        debug_assert_eq!(cells.len(), self.columns.len());
        self.rows.push(cells);
    }

    fn json(&self) -> Value {
        Value::Array(
            self.rows
                .iter()
                .map(|r| {
                    let obj: Map<String, Value> = self
                        .columns
                        .iter()
                        .map(|c| c.to_ascii_lowercase().replace([' ', '-'], "_"))
                        .zip(r.iter().cloned())
                        .collect();
                    Value::Object(obj)
                })
                .collect(),
        )
    }

    fn render(&self, out: &mut String) {
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(cell).collect())
            .collect();
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.len()).collect();
        for r in &cells {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |out: &mut String, items: &mut dyn Iterator<Item = &str>| {
            let mut l = String::new();
            for (i, (item, w)) in items.zip(&widths).enumerate() {
                if i > 0 {
                    l.push_str("  ");
                }
                l.push_str(item);
                let pad = w.saturating_sub(item.chars().count());
                l.extend(std::iter::repeat_n(' ', pad));
            }
            out.push_str(l.trim_end());
            out.push('\n');
        };
        line(out, &mut self.columns.iter().copied());
        for r in &cells {
            line(out, &mut r.iter().map(String::as_str));
        }
    }
}

/// A table cell as text: strings bare, null as "-".
fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An answer: named tables (a describe has several) or plain key-value
/// facts before them.
#[derive(Debug, Default)]
pub struct Report {
    pub facts: Vec<(&'static str, Value)>,
    pub sections: Vec<(&'static str, Table)>,
}

impl Report {
    /// One untitled table: JSON is its array of rows.
    pub fn table(t: Table) -> Report {
        Report {
            facts: Vec::new(),
            sections: vec![("", t)],
        }
    }

    pub fn fact(&mut self, name: &'static str, v: impl Into<Value>) {
        self.facts.push((name, v.into()));
    }

    pub fn section(&mut self, name: &'static str, t: Table) {
        self.sections.push((name, t));
    }

    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => {
                let v = match (self.facts.is_empty(), self.sections.as_slice()) {
                    (true, [("", t)]) => t.json(),
                    _ => {
                        let mut obj = Map::new();
                        for (k, v) in &self.facts {
                            obj.insert((*k).to_owned(), v.clone());
                        }
                        for (k, t) in &self.sections {
                            obj.insert((*k).to_owned(), t.json());
                        }
                        Value::Object(obj)
                    }
                };
                let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
                s.push('\n');
                s
            }
            Format::Table => {
                let mut out = String::new();
                let w = self.facts.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
                for (k, v) in &self.facts {
                    out.push_str(&format!("{:w$}  {}\n", k.to_ascii_uppercase(), cell(v)));
                }
                for (name, t) in &self.sections {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    if !name.is_empty() {
                        out.push_str(&name.to_ascii_uppercase());
                        out.push('\n');
                    }
                    t.render(&mut out);
                }
                out
            }
        }
    }

    pub fn print(&self, format: Format) {
        let _ = std::io::stdout().write_all(self.render(format).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_answer_two_formats() {
        let mut t = Table::new(&["TOPIC", "PARTITIONS", "LAG"]);
        t.row(vec![json!("orders"), json!(3), Value::Null]);
        t.row(vec![json!("a-much-longer-name"), json!(12), json!(7)]);
        let r = Report::table(t);
        assert_eq!(
            r.render(Format::Table),
            "TOPIC               PARTITIONS  LAG\n\
             orders              3           -\n\
             a-much-longer-name  12          7\n"
        );
        let v: Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
        assert_eq!(
            v[1],
            json!({"topic": "a-much-longer-name", "partitions": 12, "lag": 7})
        );
        let mut r = Report::default();
        r.fact("name", "orders");
        r.section("partitions", Table::new(&["PARTITION"]));
        let v: Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
        assert_eq!(v, json!({"name": "orders", "partitions": []}));
    }
}
