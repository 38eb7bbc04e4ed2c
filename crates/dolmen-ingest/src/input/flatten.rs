//! `flattenSpec`: extracting nested fields into top-level columns.
//!
//! Reference: Druid docs, "Source input formats" → `flattenSpec`
//! (<https://druid.apache.org/docs/latest/ingestion/data-formats#flattenspec>).
//!
//! Field types: `root` (a top-level field, `expr` defaults to `name`), `path` (JSONPath subset:
//! `$`, `.name`, `['name']`, `["name"]`, `[n]`, `[-n]` from the end, `[*]` and `.*` wildcards, whose
//! results are collected into an array), `jq` (`.name`, `.["name"]`, `[n]`) and `tree`
//! (`nodes: ["a", "b"]`). Deep scan (`..`), filters and functions are rejected. With
//! `useFieldDiscovery` (default true) all top-level fields are kept next to the extracted ones; a
//! missing path yields null.

use serde_json::{Map, Value};

use super::{InputError, InputRow};

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(i64),
    Wildcard,
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    name: String,
    steps: Vec<Step>,
}

/// A compiled `flattenSpec`.
#[derive(Debug, Clone, PartialEq)]
pub struct FlattenSpec {
    use_field_discovery: bool,
    fields: Vec<Field>,
}

fn invalid(msg: String) -> InputError {
    InputError::InvalidSpec(format!("flattenSpec: {msg}"))
}

impl FlattenSpec {
    /// Compiles a `flattenSpec` JSON object; errors name the offending field and expression.
    pub fn parse(spec: &Value) -> Result<FlattenSpec, InputError> {
        let obj = spec
            .as_object()
            .ok_or_else(|| invalid(format!("expected an object, got [{spec}]")))?;
        let mut use_field_discovery = true;
        let mut fields = Vec::new();
        for (k, v) in obj {
            match k.as_str() {
                "useFieldDiscovery" => {
                    use_field_discovery = match v {
                        Value::Bool(b) => *b,
                        Value::Null => true,
                        other => {
                            return Err(invalid(format!(
                                "[useFieldDiscovery] must be a boolean, got [{other}]"
                            )));
                        }
                    }
                }
                "fields" => match v {
                    Value::Array(items) => {
                        for item in items {
                            fields.push(parse_field(item)?);
                        }
                    }
                    Value::Null => {}
                    other => {
                        return Err(invalid(format!("[fields] must be an array, got [{other}]")));
                    }
                },
                other => return Err(invalid(format!("unknown field [{other}]"))),
            }
        }
        let mut seen = std::collections::HashSet::new();
        for f in &fields {
            if !seen.insert(f.name.as_str()) {
                return Err(invalid(format!("duplicate field name [{}]", f.name)));
            }
        }
        Ok(FlattenSpec {
            use_field_discovery,
            fields,
        })
    }

    /// Whether the spec is a no-op (discovery on, no fields).
    pub fn is_identity(&self) -> bool {
        self.use_field_discovery && self.fields.is_empty()
    }

    /// Flattens one row.
    pub fn apply(&self, row: InputRow) -> InputRow {
        if self.is_identity() {
            return row;
        }
        let root = Value::Object(row);
        let extracted: Vec<(String, Value)> = self
            .fields
            .iter()
            .map(|f| (f.name.clone(), extract(&root, &f.steps)))
            .collect();
        let mut out = match (self.use_field_discovery, root) {
            (true, Value::Object(m)) => m,
            _ => Map::new(),
        };
        for (k, v) in extracted {
            out.insert(k, v);
        }
        out
    }
}

fn parse_field(item: &Value) -> Result<Field, InputError> {
    let obj = item
        .as_object()
        .ok_or_else(|| invalid(format!("field must be an object, got [{item}]")))?;
    let get_str = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    for k in obj.keys() {
        if !matches!(k.as_str(), "type" | "name" | "expr" | "nodes") {
            return Err(invalid(format!("unknown field [{k}] in [{item}]")));
        }
    }
    let name = get_str("name").ok_or_else(|| invalid(format!("field [{item}] has no [name]")))?;
    let kind = get_str("type").unwrap_or_else(|| "root".to_string());
    let expr = get_str("expr");
    let steps = match kind.as_str() {
        "root" => vec![Step::Key(expr.unwrap_or_else(|| name.clone()))],
        "path" => {
            let e = expr.ok_or_else(|| invalid(format!("path field [{name}] has no [expr]")))?;
            parse_json_path(&e).map_err(|m| invalid(format!("field [{name}] expr [{e}]: {m}")))?
        }
        "jq" => {
            let e = expr.ok_or_else(|| invalid(format!("jq field [{name}] has no [expr]")))?;
            parse_jq(&e).map_err(|m| invalid(format!("field [{name}] expr [{e}]: {m}")))?
        }
        "tree" => {
            let nodes = obj
                .get("nodes")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid(format!("tree field [{name}] has no [nodes] array")))?;
            nodes
                .iter()
                .map(|n| {
                    n.as_str().map(|s| Step::Key(s.to_string())).ok_or_else(|| {
                        invalid(format!("tree field [{name}] node [{n}] is not a string"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?
        }
        other => {
            return Err(invalid(format!(
                "unknown field type [{other}] for field [{name}]"
            )));
        }
    };
    Ok(Field { name, steps })
}

/// Parses the bracket/dot steps after the leading `$` (JSONPath) or at the start (jq).
fn parse_steps(s: &str, allow_wildcard: bool) -> Result<Vec<Step>, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut steps = Vec::new();
    while i < chars.len() {
        match chars[i] {
            '.' => {
                i += 1;
                if chars.get(i) == Some(&'.') {
                    return Err("deep scan [..] is not supported".to_string());
                }
                if chars.get(i) == Some(&'[') {
                    continue; // jq's `.["name"]`
                }
                if chars.get(i) == Some(&'*') {
                    if !allow_wildcard {
                        return Err("wildcards are not supported".to_string());
                    }
                    steps.push(Step::Wildcard);
                    i += 1;
                    continue;
                }
                let start = i;
                while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                    i += 1;
                }
                if start == i {
                    if i >= chars.len() && steps.is_empty() {
                        break; // a bare "." (jq identity)
                    }
                    return Err(format!("empty field name at offset {start}"));
                }
                steps.push(Step::Key(chars[start..i].iter().collect()));
            }
            '[' => {
                let close = chars[i..]
                    .iter()
                    .position(|c| *c == ']')
                    .map(|p| p + i)
                    .ok_or_else(|| format!("unclosed [ at offset {i}"))?;
                let inner: String = chars[i + 1..close].iter().collect();
                let inner = inner.trim();
                if inner == "*" {
                    if !allow_wildcard {
                        return Err("wildcards are not supported".to_string());
                    }
                    steps.push(Step::Wildcard);
                } else if (inner.starts_with('\'') && inner.ends_with('\'') && inner.len() >= 2)
                    || (inner.starts_with('"') && inner.ends_with('"') && inner.len() >= 2)
                {
                    let key = &inner[1..inner.len() - 1];
                    if key.contains(['\'', '"']) {
                        return Err(format!("unsupported selector [{inner}]"));
                    }
                    steps.push(Step::Key(key.to_string()));
                } else {
                    let n: i64 = inner
                        .parse()
                        .map_err(|_| format!("unsupported selector [{inner}]"))?;
                    steps.push(Step::Index(n));
                }
                i = close + 1;
            }
            c => return Err(format!("unexpected character [{c}] at offset {i}")),
        }
    }
    Ok(steps)
}

fn parse_json_path(expr: &str) -> Result<Vec<Step>, String> {
    let e = expr.trim();
    let rest = e
        .strip_prefix('$')
        .ok_or_else(|| "a JSONPath must start with [$]".to_string())?;
    parse_steps(rest, true)
}

fn parse_jq(expr: &str) -> Result<Vec<Step>, String> {
    let e = expr.trim();
    if !e.starts_with('.') {
        return Err("a jq expression must start with [.]".to_string());
    }
    parse_steps(e, false)
}

fn extract(root: &Value, steps: &[Step]) -> Value {
    if steps.iter().any(|s| matches!(s, Step::Wildcard)) {
        let mut out = Vec::new();
        collect(root, steps, &mut out);
        return Value::Array(out);
    }
    let mut cur = root;
    for step in steps {
        let next = match (step, cur) {
            (Step::Key(k), Value::Object(m)) => m.get(k),
            (Step::Index(n), Value::Array(a)) => index(a, *n),
            _ => None,
        };
        match next {
            Some(v) => cur = v,
            None => return Value::Null,
        }
    }
    cur.clone()
}

fn index(a: &[Value], n: i64) -> Option<&Value> {
    let idx = if n < 0 {
        a.len()
            .checked_sub(usize::try_from(n.unsigned_abs()).ok()?)?
    } else {
        usize::try_from(n).ok()?
    };
    a.get(idx)
}

fn collect(cur: &Value, steps: &[Step], out: &mut Vec<Value>) {
    let Some((step, rest)) = steps.split_first() else {
        out.push(cur.clone());
        return;
    };
    match (step, cur) {
        (Step::Key(k), Value::Object(m)) => {
            if let Some(v) = m.get(k) {
                collect(v, rest, out);
            }
        }
        (Step::Index(n), Value::Array(a)) => {
            if let Some(v) = index(a, *n) {
                collect(v, rest, out);
            }
        }
        (Step::Wildcard, Value::Array(a)) => a.iter().for_each(|v| collect(v, rest, out)),
        (Step::Wildcard, Value::Object(m)) => m.values().for_each(|v| collect(v, rest, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(v: Value) -> InputRow {
        match v {
            Value::Object(m) => m,
            _ => panic!(),
        }
    }

    #[test]
    fn flatten_fields() {
        let spec = FlattenSpec::parse(&json!({
            "useFieldDiscovery": true,
            "fields": [
                {"type": "root", "name": "r", "expr": "a"},
                {"type": "path", "name": "p", "expr": "$.nested.x"},
                {"type": "path", "name": "q", "expr": "$['nested']['list'][-1]"},
                {"type": "path", "name": "w", "expr": "$.items[*].id"},
                {"type": "jq", "name": "j", "expr": ".nested.list[0]"},
                {"type": "jq", "name": "k", "expr": ".[\"nested\"].x"},
                {"type": "tree", "name": "t", "nodes": ["nested", "x"]},
                {"type": "path", "name": "missing", "expr": "$.nope.nope"}
            ]
        }))
        .unwrap();
        let out = spec.apply(row(json!({
            "a": 1,
            "nested": {"x": "deep", "list": [10, 20, 30]},
            "items": [{"id": 1}, {"id": 2}, {"other": 3}]
        })));
        assert_eq!(out["a"], json!(1));
        assert_eq!(out["r"], json!(1));
        assert_eq!(out["p"], json!("deep"));
        assert_eq!(out["q"], json!(30));
        assert_eq!(out["w"], json!([1, 2]));
        assert_eq!(out["j"], json!(10));
        assert_eq!(out["k"], json!("deep"));
        assert_eq!(out["t"], json!("deep"));
        assert_eq!(out["missing"], Value::Null);
        assert!(out.contains_key("nested"));

        let only = FlattenSpec::parse(&json!({"useFieldDiscovery": false, "fields": [{"type": "path", "name": "p", "expr": "$.a"}]})).unwrap();
        let out = only.apply(row(json!({"a": 1, "b": 2})));
        assert_eq!(Value::Object(out), json!({"p": 1}));
    }

    #[test]
    fn flatten_errors() {
        for (spec, want) in [
            (
                json!({"fields": [{"type": "path", "name": "p", "expr": "$..a"}]}),
                "deep scan",
            ),
            (
                json!({"fields": [{"type": "path", "name": "p", "expr": "a.b"}]}),
                "must start with [$]",
            ),
            (
                json!({"fields": [{"type": "path", "name": "p"}]}),
                "has no [expr]",
            ),
            (
                json!({"fields": [{"type": "bogus", "name": "p"}]}),
                "unknown field type [bogus]",
            ),
            (
                json!({"fields": [{"type": "path", "name": "p", "expr": "$.a[?(@.x)]"}]}),
                "unsupported selector",
            ),
            (
                json!({"fields": [{"type": "path", "name": "p", "expr": "$.a["}]}),
                "unclosed",
            ),
            (json!({"fieldz": []}), "unknown field [fieldz]"),
            (
                json!({"fields": [{"name": "a"}, {"name": "a"}]}),
                "duplicate field name [a]",
            ),
        ] {
            let err = FlattenSpec::parse(&spec).unwrap_err().to_string();
            assert!(err.contains(want), "{spec}: {err}");
        }
        assert!(FlattenSpec::parse(&json!({})).unwrap().is_identity());
    }
}
