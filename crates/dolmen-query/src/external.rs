//! `EXTERN`: external data as a table (Druid's `TABLE(EXTERN(...))`, reference-behaviour
//! "SQL-based ingestion"; `docs/multi-stage-query/reference.md#extern-function`).
//!
//! ```sql
//! FROM TABLE(EXTERN('<inputSource json>', '<inputFormat json>', '<signature json>'))
//! FROM TABLE(EXTERN(inputSource => '…', inputFormat => '…')) [EXTEND] (col TYPE, …)
//! ```
//! DataFusion's parser takes neither form in `FROM`, so [`rewrite_extern`] turns both into a
//! call of the table function `extern('<source>', '<format>', '<signature>')` first (the
//! `EXTEND` column list becomes the signature JSON), and [`ExternFunction`] is registered under
//! that name.
//!
//! The table reads its input through dolmen-ingest's input sources and formats (`local`,
//! `inline`, `http` with its allow-list, `s3`, `combining`; `json`, `csv`, `tsv`, `parquet`,
//! `avro_ocf`, gzip files), the same code as native batch ingestion, so values and errors match
//! it. Rows become Arrow batches of the signature's types by Druid's conversion rules
//! ([`convert`]): numbers from numeric strings, `null` for what does not parse, JSON arrays into
//! array columns. Parsing runs on blocking threads, one output partition per group of input
//! entities (at most one per core); dropping the stream (a cancelled query) stops the readers.
//! As in Druid's multi-stage engine (`maxParseExceptions` 0 by default), a row that cannot be
//! parsed fails the query, naming the input. Local NDJSON, CSV/TSV and Parquet files take a
//! vectorized path with the same conversions (`crate::extern_files`).

use std::sync::Arc;

use arrow::array::{
    ArrayBuilder, ArrayRef, Float32Builder, Float64Builder, Int64Builder, ListBuilder,
    StringBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::datasource::TableType;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::scalar::ScalarValue;
use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};
use dolmen_ingest::input::thread_exec::ThreadReadExec;
use dolmen_ingest::input::{InputEntity, InputFormat, InputSource, open_rows};
use serde_json::Value;

/// Name the table function is registered under (see [`rewrite_extern`]).
pub const EXTERN_FUNCTION: &str = "extern";

/// Rows per output batch.
const BATCH_ROWS: usize = 8192;

/// Rewrites every `TABLE(EXTERN(...)) [EXTEND] (col TYPE, ...)` of `sql` into
/// `extern('<source>', '<format>', '<signature>')`; other text is kept byte for byte, and the
/// line breaks of a rewritten region are kept so later lines keep their numbers. Text without
/// the word `extern` is returned unchanged without tokenizing.
///
/// # Errors
/// A tokenizer error, or a plan error for a malformed `EXTERN` (a missing argument, an
/// argument that is not a string literal, an unknown argument name, a bad `EXTEND` type).
pub fn rewrite_extern(sql: &str, dialect: &dyn Dialect) -> Result<String> {
    if !sql.to_ascii_lowercase().contains("extern") {
        return Ok(sql.to_string());
    }
    let tokens = Tokenizer::new(dialect, sql)
        .tokenize_with_location()
        .map_err(|e| DataFusionError::SQL(Box::new(e.into()), None))?;
    // Byte offset of each token's start, and the end of the text.
    let offsets = token_offsets(sql, &tokens);
    let sig: Vec<usize> = (0..tokens.len())
        .filter(|i| !matches!(tokens[*i].token, Token::Whitespace(_)))
        .collect();
    let word = |k: usize, w: &str| {
        sig.get(k).is_some_and(|&i| {
            matches!(&tokens[i].token, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w))
        })
    };
    let is = |k: usize, t: &Token| sig.get(k).is_some_and(|&i| &tokens[i].token == t);
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0; // byte offset copied so far
    let mut k = 0;
    while k < sig.len() {
        if !(word(k, "table")
            && is(k + 1, &Token::LParen)
            && word(k + 2, "extern")
            && is(k + 3, &Token::LParen))
        {
            k += 1;
            continue;
        }
        let start = offsets[sig[k]];
        let mut j = k + 4;
        let mut positional: Vec<String> = Vec::new();
        let mut named: Vec<(String, String)> = Vec::new();
        loop {
            if is(j, &Token::RParen) {
                j += 1;
                break;
            }
            // `name => 'value'` or `'value'`.
            let (name, value_at) = match sig.get(j).map(|&i| &tokens[i].token) {
                Some(Token::Word(w)) if is(j + 1, &Token::RArrow) => (Some(w.value.clone()), j + 2),
                _ => (None, j),
            };
            let value = match sig.get(value_at).map(|&i| &tokens[i].token) {
                Some(Token::SingleQuotedString(s)) => s.clone(),
                other => {
                    return plan_err!(
                        "EXTERN: arguments must be string literals, found [{}]",
                        other.map_or("end of text".to_string(), ToString::to_string)
                    );
                }
            };
            match name {
                Some(n) => named.push((n, value)),
                None => positional.push(value),
            }
            j = value_at + 1;
            if is(j, &Token::Comma) {
                j += 1;
            } else if !is(j, &Token::RParen) {
                return plan_err!("EXTERN: expected ',' or ')' after an argument");
            }
        }
        if !is(j, &Token::RParen) {
            return plan_err!("TABLE(EXTERN(...)): missing ')' after EXTERN(...)");
        }
        j += 1;
        let mut args: [Option<String>; 3] = [None, None, None];
        for (i, v) in positional.into_iter().enumerate() {
            if i >= 3 {
                return plan_err!(
                    "EXTERN takes at most three arguments: inputSource, inputFormat, signature"
                );
            }
            args[i] = Some(v);
        }
        for (n, v) in named {
            let slot = match n.to_ascii_lowercase().as_str() {
                "inputsource" => 0,
                "inputformat" => 1,
                "signature" => 2,
                _ => {
                    return plan_err!(
                        "EXTERN: unknown argument [{n}]; expected inputSource, inputFormat, signature"
                    );
                }
            };
            args[slot] = Some(v);
        }
        // `[EXTEND] (col TYPE, ...)`.
        let extend_kw = word(j, "extend");
        let list_at = if extend_kw { j + 1 } else { j };
        let mut end = j;
        if is(list_at, &Token::LParen) && (extend_kw || column_list_follows(&tokens, &sig, list_at))
        {
            let (columns, after) = parse_extend(&tokens, &sig, list_at)?;
            if args[2].is_some() {
                return plan_err!(
                    "EXTERN: give the columns either as a signature or with EXTEND, not both"
                );
            }
            args[2] = Some(serde_json::to_string(&columns).expect("json"));
            end = after;
        } else if extend_kw {
            return plan_err!("EXTEND: expected a column list '(name TYPE, ...)'");
        }
        let [Some(source), Some(format), Some(signature)] = args else {
            return plan_err!(
                "EXTERN needs inputSource, inputFormat and signature (or an EXTEND column list)"
            );
        };
        let end_byte = match sig.get(end) {
            Some(&i) => offsets[i],
            None => sql.len(),
        };
        // Keep the whitespace before the next token.
        let end_byte = trim_back_whitespace(sql, start, end_byte);
        out.push_str(&sql[copied..start]);
        out.push_str(&format!(
            "{EXTERN_FUNCTION}({}, {}, {})",
            quote(&source),
            quote(&format),
            quote(&signature)
        ));
        out.extend(sql[start..end_byte].chars().filter(|c| *c == '\n'));
        copied = end_byte;
        k = end;
    }
    out.push_str(&sql[copied..]);
    Ok(out)
}

/// `(` at `at` opens a column list (`name TYPE`), not a subquery or an alias list.
fn column_list_follows(tokens: &[TokenWithSpan], sig: &[usize], at: usize) -> bool {
    let t = |k: usize| sig.get(k).map(|&i| &tokens[i].token);
    matches!(t(at + 1), Some(Token::Word(_)))
        && matches!(t(at + 2), Some(Token::Word(_)))
        && !matches!(t(at + 1), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("select"))
}

/// Parses `(name TYPE [ARRAY], ...)` at `at`; returns the signature and the index after `)`.
fn parse_extend(
    tokens: &[TokenWithSpan],
    sig: &[usize],
    at: usize,
) -> Result<(Vec<serde_json::Map<String, Value>>, usize)> {
    let t = |k: usize| sig.get(k).map(|&i| &tokens[i].token);
    let mut k = at + 1;
    let mut cols = Vec::new();
    loop {
        let Some(Token::Word(name)) = t(k) else {
            return plan_err!("EXTEND: expected a column name");
        };
        k += 1;
        let mut ty = Vec::new();
        while let Some(Token::Word(w)) = t(k) {
            ty.push(w.value.to_ascii_uppercase());
            k += 1;
            // `COMPLEX<json>`
            if w.value.eq_ignore_ascii_case("COMPLEX")
                && let (Some(Token::Lt), Some(Token::Word(inner)), Some(Token::Gt)) =
                    (t(k), t(k + 1), t(k + 2))
                && inner.value.eq_ignore_ascii_case("json")
            {
                ty.pop();
                ty.push("JSON".to_string());
                k += 3;
            }
        }
        // `DECIMAL(10, 2)`-style arguments are not Druid types; reject below by name.
        let (base, array) = match ty.as_slice() {
            [b, a] if a == "ARRAY" => (b.as_str(), true),
            [b] => (b.as_str(), false),
            [b1, b2] if b1 == "DOUBLE" && b2 == "PRECISION" => ("DOUBLE", false),
            _ => return plan_err!("EXTEND: column [{}] needs a type", name.value),
        };
        let native = match base {
            "VARCHAR" | "CHAR" | "STRING" => "STRING",
            "BIGINT" | "INTEGER" | "INT" | "SMALLINT" | "TINYINT" | "LONG" | "BOOLEAN" => "LONG",
            "DOUBLE" | "DECIMAL" | "NUMERIC" => "DOUBLE",
            "FLOAT" | "REAL" => "FLOAT",
            "OTHER" | "JSON" => "COMPLEX<json>",
            other => {
                return plan_err!(
                    "EXTEND: unsupported type [{other}] for column [{}]; use VARCHAR, BIGINT, DOUBLE, FLOAT or their ARRAY forms",
                    name.value
                );
            }
        };
        let ty = if array {
            format!("ARRAY<{native}>")
        } else {
            native.to_ascii_lowercase()
        };
        let mut m = serde_json::Map::new();
        m.insert("name".into(), Value::String(name.value.clone()));
        m.insert("type".into(), Value::String(ty));
        cols.push(m);
        match t(k) {
            Some(Token::Comma) => k += 1,
            Some(Token::RParen) => return Ok((cols, k + 1)),
            _ => return plan_err!("EXTEND: expected ',' or ')' after column [{}]", name.value),
        }
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn trim_back_whitespace(sql: &str, start: usize, end: usize) -> usize {
    let trimmed = sql[start..end].trim_end();
    start + trimmed.len()
}

/// Byte offset of each token's start.
pub(crate) fn token_offsets(sql: &str, tokens: &[TokenWithSpan]) -> Vec<usize> {
    // Token locations are 1-based line/column in characters.
    let mut line_starts = vec![0usize];
    for (i, c) in sql.char_indices() {
        if c == '\n' {
            line_starts.push(i + 1);
        }
    }
    tokens
        .iter()
        .map(|t| {
            let l = t.span.start.line as usize;
            let c = t.span.start.column as usize;
            let Some(&ls) = line_starts.get(l.saturating_sub(1)) else {
                return sql.len();
            };
            sql[ls..]
                .char_indices()
                .nth(c.saturating_sub(1))
                .map_or(sql.len(), |(o, _)| ls + o)
        })
        .collect()
}

/// The `extern(source, format, signature)` table function.
#[derive(Debug, Default)]
pub struct ExternFunction;

impl TableFunctionImpl for ExternFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        let text = |i: usize, what: &str| -> Result<String> {
            match exprs.get(i) {
                Some(Expr::Literal(ScalarValue::Utf8(Some(s)), _))
                | Some(Expr::Literal(ScalarValue::Utf8View(Some(s)), _))
                | Some(Expr::Literal(ScalarValue::LargeUtf8(Some(s)), _)) => Ok(s.clone()),
                _ => plan_err!(
                    "EXTERN: argument {} ({what}) must be a string literal",
                    i + 1
                ),
            }
        };
        if exprs.len() != 3 {
            return plan_err!(
                "EXTERN takes three arguments (inputSource, inputFormat, signature), got {}",
                exprs.len()
            );
        }
        Ok(Arc::new(ExternTable::new(
            &text(0, "inputSource")?,
            &text(1, "inputFormat")?,
            &text(2, "signature")?,
        )?))
    }
}

/// The Arrow type of a Druid native type name in a signature.
fn arrow_type(ty: &str) -> Option<(DataType, bool)> {
    let up = ty.trim().to_ascii_uppercase();
    let scalar = |t: &str| match t {
        "STRING" => Some(DataType::Utf8),
        "LONG" => Some(DataType::Int64),
        "DOUBLE" => Some(DataType::Float64),
        "FLOAT" => Some(DataType::Float32),
        _ => None,
    };
    if up == "COMPLEX<JSON>" {
        return Some((DataType::Utf8, true));
    }
    if let Some(inner) = up.strip_prefix("ARRAY<").and_then(|s| s.strip_suffix('>')) {
        let t = scalar(inner)?;
        return Some((DataType::List(Arc::new(Field::new("item", t, true))), false));
    }
    scalar(&up).map(|t| (t, false))
}

/// Rows [`probe_multi_value`] reads.
const PROBE_ROWS: usize = 10_000;

/// The `string` columns among `names` that hold a JSON array (or a `listDelimiter` list) in
/// one of the first [`PROBE_ROWS`] rows of an `inline` source or of the first file of a `local`
/// source. Druid reads such a column as a multi-value string (its input row's dimension
/// selector sees several values), so the table declares it as one; other sources are not read
/// while planning, and their array values become the arrays' JSON text. An unreadable input is
/// left for the scan to report.
fn probe_multi_value(
    source: &InputSource,
    format: &InputFormat,
    names: &[&str],
) -> std::collections::HashSet<String> {
    let mut found = std::collections::HashSet::new();
    if names.is_empty() {
        return found;
    }
    let entity = match source {
        InputSource::Inline { data } => InputEntity::Inline(data.clone().into_bytes().into()),
        InputSource::Local { .. } => match source.entities() {
            Ok(mut e) if !e.is_empty() => e.swap_remove(0),
            _ => return found,
        },
        _ => return found,
    };
    let Ok(rows) = open_rows(&entity, format) else {
        return found;
    };
    for row in rows.take(PROBE_ROWS) {
        let Ok(row) = row else { break };
        for n in names {
            if matches!(row.get(*n), Some(Value::Array(_))) {
                found.insert((*n).to_string());
            }
        }
        if found.len() == names.len() {
            break;
        }
    }
    found
}

/// A nullable multi-value string field (`List<Utf8>` marked with
/// [`dolmen_segment::MULTI_VALUE_METADATA_KEY`]).
fn multi_value_field(name: &str) -> Field {
    Field::new(name, dolmen_segment::multi_value_string_type(), true).with_metadata(
        [(
            dolmen_segment::MULTI_VALUE_METADATA_KEY.to_string(),
            "true".to_string(),
        )]
        .into(),
    )
}

/// A table over external input (see the module docs).
#[derive(Debug)]
pub struct ExternTable {
    source: InputSource,
    format: InputFormat,
    schema: SchemaRef,
}

impl ExternTable {
    /// Parses and checks the three `EXTERN` arguments.
    ///
    /// # Errors
    /// A plan error naming the argument (`inputSource`, `inputFormat`, `signature`) and the
    /// bad field.
    pub fn new(source: &str, format: &str, signature: &str) -> Result<ExternTable> {
        let source_json: Value = serde_json::from_str(source).map_err(|e| {
            DataFusionError::Plan(format!("EXTERN inputSource is not valid JSON: {e}"))
        })?;
        let source: InputSource = serde_path_to_error::deserialize(&source_json).map_err(|e| {
            DataFusionError::Plan(format!("EXTERN inputSource.{}: {}", e.path(), e.inner()))
        })?;
        source
            .validate_at(dolmen_ingest::input::input_source_config(), "inputSource")
            .map_err(|e| DataFusionError::Plan(format!("EXTERN {e}")))?;
        if matches!(source, InputSource::Druid(_)) {
            return plan_err!(
                "EXTERN inputSource: the [druid] input source is not supported here; select from the datasource directly"
            );
        }
        let format_json: Value = serde_json::from_str(format).map_err(|e| {
            DataFusionError::Plan(format!("EXTERN inputFormat is not valid JSON: {e}"))
        })?;
        let format: InputFormat = serde_path_to_error::deserialize(&format_json).map_err(|e| {
            DataFusionError::Plan(format!("EXTERN inputFormat.{}: {}", e.path(), e.inner()))
        })?;
        format
            .validate()
            .map_err(|e| DataFusionError::Plan(format!("EXTERN inputFormat: {e}")))?;
        let sig: Vec<Value> = serde_json::from_str(signature).map_err(|e| {
            DataFusionError::Plan(format!("EXTERN signature is not a JSON array: {e}"))
        })?;
        if sig.is_empty() {
            return plan_err!("EXTERN signature: at least one column is needed");
        }
        let mut fields = Vec::with_capacity(sig.len());
        for (i, c) in sig.iter().enumerate() {
            let Some(name) = c
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            else {
                return plan_err!("EXTERN signature[{i}].name: missing");
            };
            let ty = c.get("type").and_then(Value::as_str).unwrap_or("string");
            let Some((dt, json)) = arrow_type(ty) else {
                return plan_err!(
                    "EXTERN signature[{i}].type: unknown type [{ty}] of column [{name}]; use string, long, double, float, COMPLEX<json> or ARRAY<STRING|LONG|DOUBLE>"
                );
            };
            if fields.iter().any(|f: &Field| f.name() == name) {
                return plan_err!("EXTERN signature: column [{name}] appears twice");
            }
            fields.push(if json {
                crate::functions::scalar::json_field(name)
            } else {
                Field::new(name, dt, true)
            });
        }
        let strings: Vec<&str> = fields
            .iter()
            .filter(|f| {
                f.data_type() == &DataType::Utf8 && !crate::functions::scalar::is_json_field(f)
            })
            .map(|f| f.name().as_str())
            .collect();
        let multi = probe_multi_value(&source, &format, &strings);
        let fields: Vec<Field> = fields
            .into_iter()
            .map(|f| {
                if multi.contains(f.name()) {
                    multi_value_field(f.name())
                } else {
                    f
                }
            })
            .collect();
        Ok(ExternTable {
            source,
            format,
            schema: Arc::new(Schema::new(fields)),
        })
    }
}

#[async_trait]
impl TableProvider for ExternTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
    fn table_type(&self) -> TableType {
        TableType::Temporary
    }
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let source = self.source.clone();
        let entities = tokio::task::spawn_blocking(move || source.entities())
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?
            .map_err(|e| DataFusionError::Plan(format!("EXTERN inputSource: {e}")))?;
        let schema = match projection {
            Some(p) => Arc::new(self.schema.project(p)?),
            None => Arc::clone(&self.schema),
        };
        let threads = state.config().target_partitions().max(1);
        let fast = crate::extern_files::plan(&self.source, &self.format, &schema, &entities);
        let work = match fast {
            Some(plan) => {
                let tasks = tokio::task::spawn_blocking({
                    let plan = plan.clone();
                    move || plan.tasks(threads)
                })
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))??;
                Work::Files(Arc::new(plan), tasks)
            }
            None => {
                let partitions = threads.min(entities.len()).max(1);
                let mut groups: Vec<Vec<InputEntity>> = vec![Vec::new(); partitions];
                for (i, e) in entities.into_iter().enumerate() {
                    groups[i % partitions].push(e);
                }
                Work::Rows(groups)
            }
        };
        let detail = format!(
            "format={}, partitions={}, vectorized={}",
            self.format.type_name(),
            work.partitions(),
            matches!(work, Work::Files(..))
        );
        let partitions = work.partitions();
        let format = self.format.clone();
        let thread_schema = Arc::clone(&schema);
        let read = move |partition: usize, send: &mut dyn FnMut(Result<RecordBatch>) -> bool| {
            match &work {
                Work::Rows(groups) => {
                    let entities = groups.get(partition).map_or(&[][..], Vec::as_slice);
                    read_entities(entities, &format, &thread_schema, limit, send);
                }
                Work::Files(plan, tasks) => {
                    let tasks = tasks.get(partition).map_or(&[][..], Vec::as_slice);
                    let mut sent = 0usize;
                    let mut send = |r: Result<RecordBatch>| {
                        let (failed, n) = match &r {
                            Ok(b) => (false, b.num_rows()),
                            Err(_) => (true, 0),
                        };
                        sent += n;
                        send(r) && !failed && limit.is_none_or(|l| sent < l)
                    };
                    crate::extern_files::run(plan, tasks, &thread_schema, &mut send);
                }
            }
        };
        Ok(Arc::new(ThreadReadExec::new(
            "ExternExec",
            detail,
            schema,
            partitions,
            Arc::new(read),
        )))
    }
}

/// What each partition of the `EXTERN` scan reads.
#[derive(Debug)]
enum Work {
    /// Input entities, row by row (the general path).
    Rows(Vec<Vec<InputEntity>>),
    /// Local files, vectorized ([`crate::extern_files`]).
    Files(
        Arc<crate::extern_files::FilePlan>,
        Vec<Vec<crate::extern_files::FileTask>>,
    ),
}

impl Work {
    fn partitions(&self) -> usize {
        match self {
            Work::Rows(g) => g.len(),
            Work::Files(_, t) => t.len(),
        }
    }
}

/// Reads `entities` in order, sending batches of [`BATCH_ROWS`] rows until done, `limit`
/// rows, an error, or `send` returns false (the receiver is gone).
fn read_entities(
    entities: &[InputEntity],
    format: &InputFormat,
    schema: &SchemaRef,
    limit: Option<usize>,
    send: &mut dyn FnMut(Result<RecordBatch>) -> bool,
) {
    let mut builders = Builders::new(schema);
    let mut sent = 0usize;
    for entity in entities {
        let rows = match open_rows(entity, format) {
            Ok(r) => r,
            Err(e) => {
                send(Err(DataFusionError::Execution(format!(
                    "EXTERN: cannot read [{}]: {e}",
                    entity.name()
                ))));
                return;
            }
        };
        for row in rows {
            let row = match row {
                Ok(r) => r,
                Err(e) => {
                    send(Err(DataFusionError::Execution(format!(
                        "CannotParseExternalData: [{}]: {e}",
                        entity.name()
                    ))));
                    return;
                }
            };
            builders.push(&row);
            if builders.len() >= BATCH_ROWS || limit.is_some_and(|l| sent + builders.len() >= l) {
                let n = builders.len();
                if !send(builders.finish()) {
                    return;
                }
                sent += n;
                if limit.is_some_and(|l| sent >= l) {
                    return;
                }
            }
        }
    }
    if builders.len() > 0 {
        send(builders.finish());
    }
}

/// One Arrow builder per signature column.
pub(crate) struct Builders {
    schema: SchemaRef,
    cols: Vec<Col>,
    rows: usize,
}

enum Col {
    Str(StringBuilder),
    Json(StringBuilder),
    Long(Int64Builder),
    Double(Float64Builder),
    Float(Float32Builder),
    List(ListBuilder<Box<dyn ArrayBuilder>>, DataType),
}

impl Builders {
    pub(crate) fn new(schema: &SchemaRef) -> Builders {
        let cols = schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Int64 => Col::Long(Int64Builder::new()),
                DataType::Float64 => Col::Double(Float64Builder::new()),
                DataType::Float32 => Col::Float(Float32Builder::new()),
                DataType::List(inner) => {
                    let b: Box<dyn ArrayBuilder> = match inner.data_type() {
                        DataType::Int64 => Box::new(Int64Builder::new()),
                        DataType::Float64 => Box::new(Float64Builder::new()),
                        _ => Box::new(StringBuilder::new()),
                    };
                    Col::List(ListBuilder::new(b), inner.data_type().clone())
                }
                _ if crate::functions::scalar::is_json_field(f) => Col::Json(StringBuilder::new()),
                _ => Col::Str(StringBuilder::new()),
            })
            .collect();
        Builders {
            schema: Arc::clone(schema),
            cols,
            rows: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.rows
    }

    pub(crate) fn push(&mut self, row: &serde_json::Map<String, Value>) {
        for (field, col) in self.schema.fields().iter().zip(self.cols.iter_mut()) {
            let v = row.get(field.name()).unwrap_or(&Value::Null);
            match col {
                Col::Str(b) => b.append_option(convert::to_text(v)),
                Col::Json(b) => b.append_option((!v.is_null()).then(|| v.to_string())),
                Col::Long(b) => b.append_option(convert::to_long(v)),
                Col::Double(b) => b.append_option(convert::to_double(v)),
                Col::Float(b) => b.append_option(convert::to_double(v).map(|x| x as f32)),
                Col::List(b, inner) => {
                    let items: Vec<&Value> = match v {
                        Value::Null => {
                            b.append(false);
                            continue;
                        }
                        Value::Array(a) => a.iter().collect(),
                        other => vec![other],
                    };
                    let values = b.values();
                    for item in items {
                        match inner {
                            DataType::Int64 => values
                                .as_any_mut()
                                .downcast_mut::<Int64Builder>()
                                .expect("long list")
                                .append_option(convert::to_long(item)),
                            DataType::Float64 => values
                                .as_any_mut()
                                .downcast_mut::<Float64Builder>()
                                .expect("double list")
                                .append_option(convert::to_double(item)),
                            _ => values
                                .as_any_mut()
                                .downcast_mut::<StringBuilder>()
                                .expect("string list")
                                .append_option(convert::to_text(item)),
                        }
                    }
                    b.append(true);
                }
            }
        }
        self.rows += 1;
    }

    pub(crate) fn finish(&mut self) -> Result<RecordBatch> {
        let arrays: Vec<ArrayRef> = self
            .cols
            .iter_mut()
            .map(|c| -> ArrayRef {
                match c {
                    Col::Str(b) | Col::Json(b) => Arc::new(b.finish()),
                    Col::Long(b) => Arc::new(b.finish()),
                    Col::Double(b) => Arc::new(b.finish()),
                    Col::Float(b) => Arc::new(b.finish()),
                    Col::List(b, _) => Arc::new(b.finish()),
                }
            })
            .collect();
        self.rows = 0;
        let arrays = arrays
            .into_iter()
            .zip(self.schema.fields())
            .map(|(a, f)| {
                if a.data_type() == f.data_type() {
                    Ok(a)
                } else {
                    // List item fields are named and nullable like the schema's.
                    arrow::compute::cast(&a, f.data_type())
                }
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), arrays)?)
    }
}

/// Druid's conversions of input values to column types (the rules of its dimension handlers
/// and `Rows.objectToNumber`): numbers from numeric strings, booleans as 1/0 (text `true` /
/// `false`), anything unparseable as null.
pub mod convert {
    use serde_json::Value;

    /// A value as a string column value (arrays and objects as their JSON text).
    pub fn to_text(v: &Value) -> Option<String> {
        match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Number(n) => Some(n.to_string()),
            other => Some(other.to_string()),
        }
    }

    /// A value as a long (doubles truncate toward zero).
    pub fn to_long(v: &Value) -> Option<i64> {
        match v {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            Value::String(s) => {
                let t = s.trim();
                t.parse::<i64>().ok().or_else(|| {
                    t.parse::<f64>()
                        .ok()
                        .filter(|f| f.is_finite())
                        .map(|f| f as i64)
                })
            }
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// A value as a double.
    pub fn to_double(v: &Value) -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    #[test]
    fn rewrites_both_forms_and_keeps_lines() {
        let d = GenericDialect {};
        let sql = "SELECT *\nFROM TABLE(EXTERN('{\"type\":\"inline\",\"data\":\"a\"}', '{\"type\":\"csv\"}', '[{\"name\":\"x\",\"type\":\"string\"}]'))\nWHERE x = 'y'";
        let out = rewrite_extern(sql, &d).unwrap();
        assert_eq!(
            out,
            "SELECT *\nFROM extern('{\"type\":\"inline\",\"data\":\"a\"}', '{\"type\":\"csv\"}', '[{\"name\":\"x\",\"type\":\"string\"}]')\nWHERE x = 'y'"
        );
        let sql = "SELECT * FROM TABLE(EXTERN(\n  inputSource => 'S',\n  inputFormat => 'F'\n)) EXTEND (\"ts\" VARCHAR, n BIGINT, tags VARCHAR ARRAY) AS t";
        let out = rewrite_extern(sql, &d).unwrap();
        assert_eq!(
            out,
            "SELECT * FROM extern('S', 'F', '[{\"name\":\"ts\",\"type\":\"string\"},{\"name\":\"n\",\"type\":\"long\"},{\"name\":\"tags\",\"type\":\"ARRAY<STRING>\"}]')\n\n\n AS t"
        );
        // Without EXTEND keyword, and text without extern is untouched.
        let out = rewrite_extern(
            "SELECT * FROM TABLE(EXTERN(inputSource => 'S', inputFormat => 'F')) (a DOUBLE)",
            &d,
        )
        .unwrap();
        assert!(
            out.ends_with("'[{\"name\":\"a\",\"type\":\"double\"}]')"),
            "{out}"
        );
        assert_eq!(rewrite_extern("SELECT 'x'", &d).unwrap(), "SELECT 'x'");
        let e = rewrite_extern("SELECT * FROM TABLE(EXTERN(x => 'a'))", &d).unwrap_err();
        assert!(e.to_string().contains("unknown argument [x]"), "{e}");
        let e =
            rewrite_extern("SELECT * FROM TABLE(EXTERN('a', 'b')) EXTEND (a WAT)", &d).unwrap_err();
        assert!(e.to_string().contains("unsupported type [WAT]"), "{e}");
    }

    #[test]
    fn conversions_follow_druid() {
        use serde_json::json;
        assert_eq!(convert::to_long(&json!("12")), Some(12));
        assert_eq!(convert::to_long(&json!("12.9")), Some(12));
        assert_eq!(convert::to_long(&json!("x")), None);
        assert_eq!(convert::to_long(&json!(true)), Some(1));
        assert_eq!(convert::to_double(&json!("1.5")), Some(1.5));
        assert_eq!(convert::to_text(&json!(3)), Some("3".into()));
        assert_eq!(convert::to_text(&json!(null)), None);
    }

    #[tokio::test]
    async fn reads_inline_rows_with_types() {
        let ctx = datafusion::prelude::SessionContext::new();
        ctx.register_udtf(EXTERN_FUNCTION, Arc::new(ExternFunction));
        let sql = r#"SELECT * FROM extern('{"type":"inline","data":"{\"a\":\"1\",\"b\":2.5,\"t\":[\"x\",\"y\"]}\n{\"a\":\"z\",\"t\":\"w\"}"}', '{"type":"json"}', '[{"name":"a","type":"long"},{"name":"b","type":"double"},{"name":"t","type":"ARRAY<STRING>"}]')"#;
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string();
        assert!(text.contains("| 1 | 2.5 | [x, y] |"), "{text}");
        assert!(text.contains("|   |     | [w]    |"), "{text}");
        let e = ctx
            .sql(r#"SELECT * FROM extern('{"type":"druid","dataSource":"x","interval":"2000/2001"}', '{"type":"json"}', '[{"name":"a","type":"long"}]')"#)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("druid"), "{e}");
        let e = ctx
            .sql(r#"SELECT * FROM extern('{"type":"inline","data":""}', '{"type":"json"}', '[{"name":"a","type":"wat"}]')"#)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("unknown type [wat]"), "{e}");
    }

    /// A `string` column that holds JSON arrays is a multi-value string (Druid's input rows
    /// give such a column several values), found by reading the inline data while planning;
    /// other string columns stay `Utf8`.
    #[test]
    fn string_columns_fed_arrays_are_multi_value() {
        let t = ExternTable::new(
            r#"{"type":"inline","data":"{\"a\":\"x\",\"m\":\"p\"}\n{\"a\":\"y\",\"m\":[\"p\",\"q\"]}"}"#,
            r#"{"type":"json"}"#,
            r#"[{"name":"a","type":"string"},{"name":"m","type":"string"}]"#,
        )
        .unwrap();
        let schema = t.schema();
        assert_eq!(schema.field(0).data_type(), &DataType::Utf8);
        let m = schema.field(1);
        assert_eq!(m.data_type(), &dolmen_segment::multi_value_string_type());
        assert!(
            m.metadata()
                .contains_key(dolmen_segment::MULTI_VALUE_METADATA_KEY)
        );
    }

    async fn rows(ctx: &datafusion::prelude::SessionContext, sql: &str) -> Vec<String> {
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string();
        text.lines().map(str::to_string).collect()
    }

    /// Local files take the vectorized path; the answer equals the general path's over the
    /// same bytes (inline source).
    #[tokio::test]
    async fn local_files_read_like_the_general_path() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = datafusion::prelude::SessionContext::new();
        ctx.register_udtf(EXTERN_FUNCTION, Arc::new(ExternFunction));
        let sig = r#"[{"name":"a","type":"long"},{"name":"b","type":"double"},{"name":"s","type":"string"},{"name":"t","type":"ARRAY<STRING>"}]"#;
        let cases = [
            (
                "data.json",
                // The last row has a scalar in the array column and an object in a string
                // column: the vectorized decoder rejects it and the range is re-read row by row.
                "{\"a\":\"1\",\"b\":2.5,\"s\":\"x\",\"t\":[\"x\",\"y\"]}\n{\"a\":2.7,\"b\":\"3\",\"s\":7,\"t\":null}\n{\"a\":\"q\",\"s\":{\"k\":1},\"t\":\"z\"}\n",
                r#"{"type":"json"}"#,
            ),
            (
                "data.csv",
                "a,b,s,t\n1,2.5,x,x|y\n2.7,3,,z\n,q,\"c,d\",\n",
                r#"{"type":"csv","findColumnsFromHeader":true,"listDelimiter":"|"}"#,
            ),
        ];
        for (name, data, format) in cases {
            let path = dir.path().join(name);
            std::fs::write(&path, data).unwrap();
            let local = format!(r#"{{"type":"local","files":["{}"]}}"#, path.display());
            let inline = serde_json::json!({"type": "inline", "data": data}).to_string();
            let q = |src: &str| {
                format!(
                    "SELECT * FROM extern('{}', '{format}', '{sig}') ORDER BY a NULLS LAST",
                    src.replace('\'', "''")
                )
            };
            let fast = rows(&ctx, &q(&local)).await;
            let general = rows(&ctx, &q(&inline)).await;
            assert_eq!(fast, general, "{name}");
            assert_eq!(fast.len(), 7, "{name}: {fast:#?}");
            let plan = rows(&ctx, &format!("EXPLAIN {}", q(&local)))
                .await
                .join("\n");
            assert!(plan.contains("vectorized=true"), "{plan}");
        }
        // Parquet: integer and timestamp columns (timestamps as epoch ms, as Druid reads them).
        let path = dir.path().join("data.parquet");
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new(
                "ts",
                DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None),
                true,
            ),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(arrow::array::Int32Array::from(vec![Some(5), None])),
                Arc::new(arrow::array::TimestampMicrosecondArray::from(vec![
                    Some(1_500_000),
                    Some(2_000),
                ])),
            ],
        )
        .unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(
            std::fs::File::create(&path).unwrap(),
            schema,
            None,
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let got = rows(
            &ctx,
            &format!(
                r#"SELECT a, ts, s FROM extern('{{"type":"local","files":["{}"]}}', '{{"type":"parquet"}}', '[{{"name":"a","type":"long"}},{{"name":"ts","type":"long"}},{{"name":"s","type":"string"}}]') ORDER BY ts"#,
                path.display()
            ),
        )
        .await;
        assert_eq!(got[3], "|   | 2    |   |", "{got:#?}");
        assert_eq!(got[4], "| 5 | 1500 |   |", "{got:#?}");
    }
}
