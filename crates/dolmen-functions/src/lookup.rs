//! `LOOKUP(expr, lookupName[, replaceMissingValueWith])`: Druid's query-time lookup function
//! (`docs/querying/sql-scalar.md` "LOOKUP", `docs/querying/lookups.md`; Druid's
//! `QueryLookupOperatorConversion` and `LookupExprMacro`).
//!
//! Semantics, with Druid's SQL-compatible null handling (its default):
//! - VARCHAR: the value `expr` maps to in the lookup table; `replaceMissingValueWith` (default
//!   NULL) when the key is missing or `expr` is NULL (`LOOKUP(x, 'l', 'NA')` equals
//!   `COALESCE(LOOKUP(x, 'l'), 'NA')`). An empty string is a key like any other and an empty
//!   value is returned as it is.
//! - `expr` of another scalar type is looked up as its text (`CAST(expr AS VARCHAR)`); a
//!   multi-value string has each of its values looked up (a multi-value result), as Druid maps
//!   scalar functions over multi-value rows.
//! - `lookupName` and `replaceMissingValueWith` must be literals (Druid's `literalOperands(1,
//!   2)`); `?` parameters bound to a value count as literals. A lookup no tier defines is a
//!   planning error in Druid's words, `Lookup [name] not found` (400 `Plan validation
//!   failed`); so is one whose definition failed to load (the message says why).
//!
//! The function reads the process's [`LookupRegistry`]. Its volatility is
//! [`Volatility::Stable`], not immutable: its result depends on the lookup tables, which change
//! while the process runs, so the plan cache (dolmen-query's `plan_cache`) never keeps a plan calling
//! it and the next query after a lookup change plans against the new table. Within one batch
//! the table is one immutable snapshot ([`dolmen_lookup::LookupMap`]), held in an `Arc`; the
//! result is built in one pass over the input array into one string builder, with no allocation
//! per row.
//!
//! Not done (Druid's planner rewrites; results are the same without them): reversing `LOOKUP`
//! in filters into conditions on the key (`sqlReverseLookup`) and pulling injective lookups up
//! through `GROUP BY` (`sqlPullUpLookup`). Both context keys are accepted and have no effect.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListArray, StringBuilder, new_null_array};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::prelude::SessionContext;
use dolmen_lookup::{LookupMap, LookupRegistry};

use super::arrays::{is_multi_value_field, multi_value_field};

/// The registered (lowercase) name.
pub const NAME: &str = "lookup";

/// `LOOKUP` over a registry (see the module docs).
#[derive(Debug)]
pub struct LookupUdf {
    lookups: Arc<LookupRegistry>,
    signature: Signature,
}

impl LookupUdf {
    /// The function reading `lookups`.
    pub fn new(lookups: Arc<LookupRegistry>) -> LookupUdf {
        LookupUdf {
            lookups,
            signature: Signature::user_defined(Volatility::Stable),
        }
    }
}

/// Two instances are the same function when they read the same registry.
impl PartialEq for LookupUdf {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.lookups, &other.lookups)
    }
}

impl Eq for LookupUdf {}

impl Hash for LookupUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.lookups).hash(state);
    }
}

/// Registers `LOOKUP` over `lookups` in `ctx`.
pub fn register(ctx: &SessionContext, lookups: &Arc<LookupRegistry>) {
    ctx.register_udf(ScalarUDF::new_from_impl(LookupUdf::new(Arc::clone(
        lookups,
    ))));
}

fn check_arity(n: usize) -> Result<()> {
    if !(2..=3).contains(&n) {
        return plan_err!("Function LOOKUP takes 2 to 3 arguments, got {n}");
    }
    Ok(())
}

/// The text of a literal: `Some(None)` for NULL, `None` when it has no text form.
fn literal_text(v: &ScalarValue) -> Option<Option<String>> {
    if v.is_null() {
        return Some(None);
    }
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some(Some(s.clone())),
        other => match other.cast_to(&DataType::Utf8) {
            Ok(ScalarValue::Utf8(Some(s))) => Some(Some(s)),
            _ => None,
        },
    }
}

impl LookupUdf {
    /// Checks a literal lookup name: it must name a lookup queries can read.
    fn check_name(&self, name: &ScalarValue) -> Result<String> {
        match literal_text(name) {
            Some(Some(name)) => {
                self.lookups
                    .map(&name)
                    .map_err(|e| DataFusionError::Plan(e.to_string()))?;
                Ok(name)
            }
            _ => plan_err!(
                "LOOKUP: argument 2 (lookupName) must be a registered lookup name, got [{name}]"
            ),
        }
    }
}

impl ScalarUDFImpl for LookupUdf {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match arg_types.first() {
            Some(DataType::List(_)) => dolmen_segment::multi_value_string_type(),
            _ => DataType::Utf8,
        })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        check_arity(args.arg_fields.len())?;
        if let Some(Some(name)) = args.scalar_arguments.get(1) {
            self.check_name(name)?;
        }
        if let Some(Some(replace)) = args.scalar_arguments.get(2)
            && literal_text(replace).is_none()
        {
            return plan_err!(
                "LOOKUP: argument 3 (replaceMissingValueWith) must be a string, got [{replace}]"
            );
        }
        let input = &args.arg_fields[0];
        if is_multi_value_field(input) {
            return Ok(Arc::new(multi_value_field(NAME)));
        }
        if matches!(input.data_type(), DataType::List(_)) {
            return plan_err!(
                "LOOKUP: argument 1 must be a string or a multi-value string, got {}",
                input.data_type()
            );
        }
        Ok(Arc::new(Field::new(NAME, DataType::Utf8, true)))
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        check_arity(arg_types.len())?;
        arg_types
            .iter()
            .enumerate()
            .map(|(i, dt)| match dt {
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Ok(dt.clone()),
                DataType::List(item) if i == 0 && super::is_string(item.data_type()) => {
                    Ok(dolmen_segment::multi_value_string_type())
                }
                DataType::List(_)
                | DataType::LargeList(_)
                | DataType::FixedSizeList(..)
                | DataType::Struct(_)
                | DataType::Map(..)
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView => {
                    plan_err!("LOOKUP: argument {} must be a string, got {dt}", i + 1)
                }
                _ => Ok(DataType::Utf8),
            })
            .collect()
    }

    /// Runs after `?` parameters are bound: the name and the replacement must be literals by
    /// now, and the name must name a lookup (see the module docs).
    fn simplify(&self, args: Vec<Expr>, _info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        check_arity(args.len())?;
        match &args[1] {
            Expr::Literal(v, _) => {
                self.check_name(v)?;
            }
            other => {
                return plan_err!(
                    "LOOKUP: argument 2 (lookupName) must be a literal, got [{other}]"
                );
            }
        }
        if let Some(replace) = args.get(2)
            && !matches!(replace, Expr::Literal(..))
        {
            return plan_err!(
                "LOOKUP: argument 3 (replaceMissingValueWith) must be a literal, got [{replace}]"
            );
        }
        Ok(ExprSimplifyResult::Original(args))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        check_arity(args.args.len())?;
        let literal = |i: usize, what: &str| -> Result<Option<String>> {
            match &args.args[i] {
                ColumnarValue::Scalar(v) => literal_text(v).ok_or_else(|| {
                    DataFusionError::Execution(format!("LOOKUP: {what} must be a string"))
                }),
                ColumnarValue::Array(_) => Err(DataFusionError::Execution(format!(
                    "LOOKUP: {what} must be a literal"
                ))),
            }
        };
        let Some(name) = literal(1, "argument 2 (lookupName)")? else {
            return Err(DataFusionError::Execution(
                "LOOKUP: argument 2 (lookupName) must be a registered lookup name, got NULL".into(),
            ));
        };
        let replace = match args.args.len() {
            3 => literal(2, "argument 3 (replaceMissingValueWith)")?,
            _ => None,
        };
        let map = self
            .lookups
            .map(&name)
            .map_err(|e| DataFusionError::Execution(e.to_string()))?;
        match &args.args[0] {
            ColumnarValue::Array(keys) => Ok(ColumnarValue::Array(lookup_array(
                keys,
                &map,
                replace.as_deref(),
            )?)),
            ColumnarValue::Scalar(key) => {
                let out = lookup_array(&key.to_array()?, &map, replace.as_deref())?;
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
            }
        }
    }
}

/// `LOOKUP` over a whole array: the value of each key, else `replace`, else null. Strings are
/// read in place; a multi-value list has its values mapped and keeps its offsets and nulls.
///
/// # Errors
/// When a key type cannot be cast to a string.
pub fn lookup_array(keys: &ArrayRef, map: &LookupMap, replace: Option<&str>) -> Result<ArrayRef> {
    let len = keys.len();
    if map.is_empty() && replace.is_none() && !matches!(keys.data_type(), DataType::List(_)) {
        return Ok(new_null_array(&DataType::Utf8, len));
    }
    Ok(match keys.data_type() {
        DataType::Utf8 => map_keys(keys.as_string::<i32>().iter(), len, map, replace),
        DataType::LargeUtf8 => map_keys(keys.as_string::<i64>().iter(), len, map, replace),
        DataType::Utf8View => map_keys(keys.as_string_view().iter(), len, map, replace),
        DataType::List(_) => {
            let list = keys.as_list::<i32>();
            let values = lookup_array(list.values(), map, replace)?;
            Arc::new(ListArray::try_new(
                Arc::new(Field::new_list_field(DataType::Utf8, true)),
                list.offsets().clone(),
                values,
                list.nulls().cloned(),
            )?)
        }
        _ => {
            let text = cast(keys, &DataType::Utf8)?;
            map_keys(text.as_string::<i32>().iter(), len, map, replace)
        }
    })
}

/// One pass over the keys into one builder.
fn map_keys<'a>(
    keys: impl Iterator<Item = Option<&'a str>>,
    len: usize,
    map: &LookupMap,
    replace: Option<&str>,
) -> ArrayRef {
    let mut out = StringBuilder::with_capacity(len, len.saturating_mul(16));
    for key in keys {
        match key.and_then(|k| map.get(k)).or(replace) {
            Some(v) => out.append_value(v),
            None => out.append_null(),
        }
    }
    Arc::new(out.finish())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::Schema;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::SessionConfig;

    use super::*;

    fn registry() -> Arc<LookupRegistry> {
        let map = LookupMap::new(
            HashMap::from([
                ("a".to_string(), "xa".to_string()),
                ("abc".to_string(), "xabc".to_string()),
                ("".to_string(), "empty key".to_string()),
                ("e".to_string(), "".to_string()),
                ("1".to_string(), "one".to_string()),
            ]),
            false,
        );
        Arc::new(LookupRegistry::from_maps([
            ("lookyloo".to_string(), map),
            ("empty".to_string(), LookupMap::default()),
        ]))
    }

    fn ctx(lookups: &Arc<LookupRegistry>) -> SessionContext {
        let config = SessionConfig::new()
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false);
        let ctx = SessionContext::new_with_config(config);
        crate::register_druid_functions(&ctx);
        register(&ctx, lookups);
        let schema = Arc::new(Schema::new(vec![
            Field::new("dim1", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
            multi_value_field("tags"),
        ]));
        // Rows: [a, zz], [] (empty), [abc], null, null.
        let mut tags = arrow::array::ListBuilder::new(StringBuilder::new());
        tags.values().append_value("a");
        tags.values().append_value("zz");
        tags.append(true);
        tags.append(true);
        tags.values().append_value("abc");
        tags.append(true);
        tags.append(false);
        tags.append(false);
        let tags = tags.finish();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("abc"),
                    None,
                    Some(""),
                    Some("nope"),
                ])),
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    None,
                    Some(2),
                    Some(1),
                    None,
                ])),
                Arc::new(tags),
            ],
        )
        .unwrap();
        ctx.register_table(
            "t",
            Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap()),
        )
        .unwrap();
        ctx
    }

    async fn column(ctx: &SessionContext, sql: &str) -> Vec<String> {
        let batches = crate::test_support::batches(ctx, sql).await;
        let mut out = Vec::new();
        for b in batches {
            let c = b.column(0);
            for i in 0..c.len() {
                out.push(if c.is_null(i) {
                    "null".to_string()
                } else {
                    arrow::util::display::array_value_to_string(c, i).unwrap()
                });
            }
        }
        out
    }

    #[tokio::test]
    async fn two_and_three_arguments_with_sql_compatible_nulls() {
        let lookups = registry();
        let ctx = ctx(&lookups);
        assert_eq!(
            column(&ctx, "SELECT LOOKUP(dim1, 'lookyloo') FROM t").await,
            ["xa", "xabc", "null", "empty key", "null"]
        );
        // The replacement stands in for missing keys and null input, like COALESCE.
        assert_eq!(
            column(&ctx, "SELECT LOOKUP(dim1, 'lookyloo', 'NA') FROM t").await,
            ["xa", "xabc", "NA", "empty key", "NA"]
        );
        assert_eq!(
            column(
                &ctx,
                "SELECT COALESCE(LOOKUP(dim1, 'lookyloo'), 'NA') FROM t"
            )
            .await,
            column(&ctx, "SELECT LOOKUP(dim1, 'lookyloo', 'NA') FROM t").await
        );
        // A key mapped to the empty string returns it; a NULL replacement is no replacement.
        assert_eq!(column(&ctx, "SELECT LOOKUP('e', 'lookyloo')").await, [""]);
        assert_eq!(
            column(&ctx, "SELECT LOOKUP('q', 'lookyloo', NULL)").await,
            ["null"]
        );
        // Numbers are looked up as their text.
        assert_eq!(
            column(&ctx, "SELECT LOOKUP(n, 'lookyloo') FROM t").await,
            ["one", "null", "null", "one", "null"]
        );
        assert_eq!(
            column(&ctx, "SELECT LOOKUP(dim1, 'empty') FROM t").await,
            ["null"; 5]
        );
        assert_eq!(
            column(&ctx, "SELECT LOOKUP(dim1, 'empty', 'x') FROM t").await,
            ["x"; 5]
        );
        // Multi-value rows have each value looked up.
        assert_eq!(
            column(&ctx, "SELECT LOOKUP(tags, 'lookyloo', 'NA') FROM t").await,
            ["[xa, NA]", "[]", "[xabc]", "null", "null"]
        );
    }

    #[tokio::test]
    async fn names_must_be_known_literals() {
        let lookups = registry();
        let ctx = ctx(&lookups);
        let err = |sql: &'static str| {
            let ctx = ctx.clone();
            async move {
                let r = match ctx.sql(sql).await {
                    Ok(df) => df.collect().await.map(|_| ()),
                    Err(e) => Err(e),
                };
                r.unwrap_err().find_root().to_string()
            }
        };
        assert!(
            err("SELECT LOOKUP(dim1, 'nope') FROM t")
                .await
                .contains("Lookup [nope] not found")
        );
        assert!(
            err("SELECT LOOKUP(dim1, dim1) FROM t")
                .await
                .contains("argument 2 (lookupName) must be a literal")
        );
        assert!(
            err("SELECT LOOKUP(dim1, 'lookyloo', dim1) FROM t")
                .await
                .contains("argument 3 (replaceMissingValueWith) must be a literal")
        );
        assert!(
            err("SELECT LOOKUP(dim1) FROM t")
                .await
                .contains("takes 2 to 3 arguments")
        );
        assert!(
            err("SELECT LOOKUP(dim1, NULL) FROM t")
                .await
                .contains("must be a registered lookup name")
        );
        assert!(
            err("SELECT LOOKUP(ARRAY['a'], 'lookyloo')")
                .await
                .contains("argument 1 must be a string")
        );
    }

    #[tokio::test]
    async fn a_changed_table_is_read_by_the_next_query() {
        let lookups = registry();
        let ctx = ctx(&lookups);
        let sql = "SELECT LOOKUP(dim1, 'lookyloo') FROM t LIMIT 1";
        assert_eq!(column(&ctx, sql).await, ["xa"]);
        let mut served = (*lookups.snapshot()).clone();
        let next = LookupRegistry::from_maps([(
            "lookyloo".to_string(),
            LookupMap::new(HashMap::from([("a".into(), "changed".into())]), false),
        )]);
        served.insert("lookyloo".into(), next.get("lookyloo").unwrap());
        lookups.replace(served);
        assert_eq!(column(&ctx, sql).await, ["changed"]);
    }

    #[test]
    fn the_kernel_reads_every_string_layout() {
        let map = LookupMap::new(HashMap::from([("k".into(), "v".into())]), false);
        let utf8: ArrayRef = Arc::new(StringArray::from(vec![Some("k"), None, Some("x")]));
        for keys in [
            Arc::clone(&utf8),
            cast(&utf8, &DataType::LargeUtf8).unwrap(),
            cast(&utf8, &DataType::Utf8View).unwrap(),
        ] {
            let out = lookup_array(&keys, &map, Some("r")).unwrap();
            let out = out.as_string::<i32>();
            assert_eq!(
                out.iter().collect::<Vec<_>>(),
                vec![Some("v"), Some("r"), Some("r")]
            );
        }
        let nulls = lookup_array(&utf8, &LookupMap::default(), None).unwrap();
        assert_eq!(nulls.null_count(), 3);
    }
}
