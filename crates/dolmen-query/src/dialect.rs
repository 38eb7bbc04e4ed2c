//! The SQL dialect Dolmen parses Druid SQL with ([`DruidDialect`]): sqlparser's
//! [`GenericDialect`] (DataFusion's default, so every construct it parses still parses), with
//! the places where Calcite's grammar, as Druid configures it, reads a query differently:
//!
//! - **`IS [NOT] DISTINCT FROM` binds like a comparison.** Calcite's `IS DISTINCT FROM` is a
//!   binary operator of the comparisons' precedence (30, above `AND`/`OR`/`NOT`), so
//!   `a IS NOT DISTINCT FROM b AND c` is `(a IS NOT DISTINCT FROM b) AND c`; sqlparser reads
//!   everything after `FROM` as the right operand. The right operand here is parsed at the
//!   precedence of `=`: arithmetic and `||` belong to it, comparisons and logic do not.
//! - **`USER`, `CURRENT_USER`, `SESSION_USER`, `CURRENT_CATALOG` are identifiers.** Calcite's
//!   parser reads these context variables as identifiers and its validator makes a niladic
//!   call of one only when the operator table has it (`SqlValidatorImpl.makeNullaryCall`);
//!   Druid's `DruidOperatorTable` has none of them (its niladic functions are `PI` and the
//!   `CURRENT_TIMESTAMP` family of `DruidConvertletTable`), so `user` names a column, as in
//!   Druid's own SQL tutorials (`SELECT ..., user, ... FROM ext`). sqlparser makes them
//!   function calls.
//! - **`PI` without parentheses is the constant.** Druid's operator table has Calcite's `PI`
//!   (`DirectOperatorConversion(SqlStdOperatorTable.PI, "pi")`), a function called without
//!   parentheses (`SqlSyntax.FUNCTION_ID`) that the validator resolves before columns.
//!   An unquoted `PI` not followed by `(` or `.` is parsed as `PI()`; `"PI"` is a column.
//!
//! `CURRENT_TIMESTAMP`, `CURRENT_DATE`, `CURRENT_TIME`, `LOCALTIMESTAMP` and `LOCALTIME` parse
//! without parentheses in every sqlparser dialect; [`crate::rewrite`] maps the last two.

use std::any::TypeId;

use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArgumentList, FunctionArguments, Ident, ObjectName,
};
use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect, Precedence};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

/// Druid SQL's dialect: [`GenericDialect`] with Calcite's readings of the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct DruidDialect(GenericDialect);

/// Delegates `fn name(&self) -> bool` to the wrapped [`GenericDialect`].
macro_rules! delegate_flags {
    ($($name:ident),* $(,)?) => {
        $(fn $name(&self) -> bool {
            self.0.$name()
        })*
    };
}

impl Dialect for DruidDialect {
    /// The generic dialect's identity: sqlparser enables some syntax for "generic" by type
    /// (`dialect_of!`), and all of it stays on.
    fn dialect(&self) -> TypeId {
        self.0.dialect()
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.0.is_delimited_identifier_start(ch)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        self.0.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        self.0.is_identifier_part(ch)
    }

    delegate_flags!(
        supports_unicode_string_literal,
        supports_partition_by_after_order_by,
        supports_array_join_syntax,
        supports_group_by_expr,
        supports_group_by_with_modifier,
        supports_left_associative_joins_without_parens,
        supports_connect_by,
        supports_match_recognize,
        supports_pipe_operator,
        supports_start_transaction_modifier,
        supports_window_function_null_treatment_arg,
        supports_dictionary_syntax,
        supports_window_clause_named_window_reference,
        supports_parenthesized_set_variables,
        supports_select_wildcard_except,
        support_map_literal_syntax,
        allow_extract_custom,
        allow_extract_single_quotes,
        supports_extract_comma_syntax,
        supports_create_view_comment_syntax,
        supports_parens_around_table_factor,
        supports_values_as_table_factor,
        supports_create_index_with_clause,
        supports_explain_with_utility_options,
        supports_limit_comma,
        supports_update_order_by,
        supports_from_first_select,
        supports_projection_trailing_commas,
        supports_asc_desc_in_column_definition,
        supports_try_convert,
        supports_bitwise_shift_operators,
        supports_comment_on,
        supports_load_extension,
        supports_named_fn_args_with_assignment_operator,
        supports_struct_literal,
        supports_empty_projections,
        supports_nested_comments,
        supports_multiline_comment_hints,
        supports_user_host_grantee,
        supports_string_escape_constant,
        supports_array_typedef_with_brackets,
        supports_match_against,
        supports_set_names,
        supports_comma_separated_set_assignments,
        supports_filter_during_aggregation,
        supports_select_wildcard_exclude,
        supports_data_type_signed_suffix,
        supports_interval_options,
        supports_quote_delimited_string,
        supports_select_wildcard_replace,
        supports_select_wildcard_ilike,
        supports_select_wildcard_rename,
        supports_optimize_table,
        supports_install,
        supports_detach,
        supports_prewhere,
        supports_with_fill,
        supports_limit_by,
        supports_interpolate,
        supports_settings,
        supports_select_format,
        supports_comment_optimizer_hint,
        supports_constraint_keyword_without_name,
        supports_key_column_option,
        supports_comma_separated_trim,
        supports_cte_without_as,
        supports_select_item_multi_column_alias,
        supports_xml_expressions
    );

    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        let Token::Word(w) = &parser.peek_token_ref().token else {
            return None;
        };
        if w.quote_style.is_some() {
            return None;
        }
        let next = &parser.peek_nth_token_ref(1).token;
        let niladic_variable = matches!(
            w.keyword,
            Keyword::USER
                | Keyword::CURRENT_USER
                | Keyword::SESSION_USER
                | Keyword::CURRENT_CATALOG
        );
        if niladic_variable && *next != Token::LParen {
            let ident = Ident::with_span(parser.peek_token_ref().span, w.value.clone());
            parser.advance_token();
            return Some(Ok(Expr::Identifier(ident)));
        }
        if w.keyword == Keyword::TRIM && *next == Token::LParen {
            return trim_without_characters(parser);
        }
        if w.value.eq_ignore_ascii_case("pi") && !matches!(next, Token::LParen | Token::Period) {
            let ident = Ident::with_span(parser.peek_token_ref().span, w.value.clone());
            parser.advance_token();
            return Some(Ok(Expr::Function(Function {
                name: ObjectName::from(vec![ident]),
                uses_odbc_syntax: false,
                parameters: FunctionArguments::None,
                args: FunctionArguments::List(FunctionArgumentList {
                    duplicate_treatment: None,
                    args: vec![],
                    clauses: vec![],
                }),
                filter: None,
                null_treatment: None,
                over: None,
                within_group: vec![],
            })));
        }
        None
    }

    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        _precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        let is_word = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k);
        if !is_word(&parser.peek_token_ref().token, Keyword::IS) {
            return None;
        }
        let negated = is_word(&parser.peek_nth_token_ref(1).token, Keyword::NOT);
        let at = 1 + usize::from(negated);
        if !(is_word(&parser.peek_nth_token_ref(at).token, Keyword::DISTINCT)
            && is_word(&parser.peek_nth_token_ref(at + 1).token, Keyword::FROM))
        {
            return None;
        }
        for _ in 0..at + 2 {
            parser.advance_token();
        }
        let right = match parser.parse_subexpr(self.prec_value(Precedence::Eq)) {
            Ok(e) => Box::new(e),
            Err(e) => return Some(Err(e)),
        };
        let left = Box::new(expr.clone());
        Some(Ok(if negated {
            Expr::IsNotDistinctFrom(left, right)
        } else {
            Expr::IsDistinctFrom(left, right)
        }))
    }
}

/// `TRIM([BOTH | LEADING | TRAILING] FROM expr)`: standard SQL (Calcite reads it, trimming
/// spaces) that sqlparser refuses, taking `FROM` for the characters to trim. `None` (the
/// generic parser goes on) for every other `TRIM` form.
fn trim_without_characters(parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
    use datafusion::sql::sqlparser::ast::TrimWhereField;
    let word = |n: usize| match &parser.peek_nth_token_ref(n).token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    };
    let (trim_where, from_at) = match word(2) {
        Some(Keyword::BOTH) => (Some(TrimWhereField::Both), 3),
        Some(Keyword::LEADING) => (Some(TrimWhereField::Leading), 3),
        Some(Keyword::TRAILING) => (Some(TrimWhereField::Trailing), 3),
        Some(Keyword::FROM) => (None, 2),
        _ => return None,
    };
    if word(from_at) != Some(Keyword::FROM) {
        return None;
    }
    for _ in 0..=from_at {
        parser.advance_token();
    }
    Some((|| {
        let expr = parser.parse_expr()?;
        parser.expect_token(&Token::RParen)?;
        Ok(Expr::Trim {
            expr: Box::new(expr),
            trim_where,
            trim_what: None,
            trim_characters: None,
        })
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(sql: &str) -> Expr {
        let dialect = DruidDialect::default();
        let mut p = Parser::new(&dialect).try_with_sql(sql).unwrap();
        p.parse_expr().unwrap()
    }

    fn generic(sql: &str) -> Expr {
        let mut p = Parser::new(&GenericDialect {}).try_with_sql(sql).unwrap();
        p.parse_expr().unwrap()
    }

    /// Druid's quidem `qaAggFuncs` cases: `TRIM(BOTH FROM x)` and the other standard forms
    /// without characters; the forms with characters stay sqlparser's.
    #[test]
    fn trim_from_without_characters() {
        assert_eq!(
            expr("TRIM(BOTH FROM a || 'x')").to_string(),
            "TRIM(BOTH a || 'x')"
        );
        assert_eq!(
            expr("trim(LEADING\n FROM f(a))").to_string(),
            "TRIM(LEADING f(a))"
        );
        assert_eq!(
            expr("TRIM(TRAILING FROM a)").to_string(),
            "TRIM(TRAILING a)"
        );
        assert_eq!(expr("TRIM(FROM a)").to_string(), "TRIM(a)");
        assert_eq!(
            expr("TRIM(BOTH 'x' FROM a)").to_string(),
            "TRIM(BOTH 'x' FROM a)"
        );
        assert_eq!(expr("TRIM(a)").to_string(), "TRIM(a)");
    }

    /// Calcite: `IS [NOT] DISTINCT FROM` has the comparisons' precedence (30), `AND` 24.
    #[test]
    fn is_distinct_from_binds_tighter_than_and() {
        assert_eq!(
            expr("1 IS NOT DISTINCT FROM 1 AND 2 <> 3").to_string(),
            "1 IS NOT DISTINCT FROM 1 AND 2 <> 3"
        );
        let Expr::BinaryOp { left, op, .. } = expr("1 IS NOT DISTINCT FROM 1 AND 2 <> 3") else {
            panic!("not an AND");
        };
        assert_eq!(op.to_string(), "AND");
        assert!(matches!(*left, Expr::IsNotDistinctFrom(..)));
        let Expr::BinaryOp { left, .. } = expr("a IS DISTINCT FROM b OR c") else {
            panic!("not an OR");
        };
        assert!(matches!(*left, Expr::IsDistinctFrom(..)));
        // Arithmetic belongs to the right operand.
        let Expr::IsDistinctFrom(_, right) = expr("a IS DISTINCT FROM b + 1") else {
            panic!("not IS DISTINCT FROM");
        };
        assert_eq!(right.to_string(), "b + 1");
        // The generic dialect reads the rest as the right operand.
        assert!(matches!(
            generic("1 IS NOT DISTINCT FROM 1 AND 2 <> 3"),
            Expr::IsNotDistinctFrom(..)
        ));
        // Other IS forms are unchanged.
        assert_eq!(
            expr("a IS NOT NULL AND b").to_string(),
            "a IS NOT NULL AND b"
        );
        assert!(matches!(expr("a IS NOT NULL AND b"), Expr::BinaryOp { .. }));
    }

    #[test]
    fn user_is_a_column_and_pi_a_constant() {
        assert!(matches!(expr("user"), Expr::Identifier(ref i) if i.value == "user"));
        assert!(matches!(expr("CURRENT_USER"), Expr::Identifier(_)));
        assert!(matches!(expr("t.user"), Expr::CompoundIdentifier(_)));
        assert!(matches!(generic("user"), Expr::Function(_)));
        // Written as a call it is still one (and fails to plan, as in Druid).
        assert!(matches!(expr("user()"), Expr::Function(_)));
        assert!(matches!(expr("PI"), Expr::Function(ref f) if f.name.to_string() == "PI"));
        assert!(matches!(expr("pi()"), Expr::Function(_)));
        assert!(matches!(expr("\"PI\""), Expr::Identifier(_)));
        assert!(matches!(expr("pi.x"), Expr::CompoundIdentifier(_)));
    }
}
