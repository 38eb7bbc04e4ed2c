//! Tests of catalogue functions whose results are checked as Druid's result writers render
//! them ([`crate::writer`]): they need this crate's writers, so they live here rather than
//! beside the functions in dolmen-functions.

/// Scalar functions (`dolmen_functions::scalar`), each value rendered as Druid's JSON.
mod scalar {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field};

    use arrow::array::RecordBatch;
    use arrow::datatypes::Schema;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};
    use dolmen_common::zone::Zone;
    use dolmen_functions::scalar::is_json_field;

    fn ctx() -> SessionContext {
        let config = SessionConfig::new()
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false);
        let ctx = SessionContext::new_with_config(config);
        crate::functions::register_druid_functions(&ctx);
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("i", DataType::Int64, true),
            Field::new("d", DataType::Float64, true),
            Field::new("j", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(StringArray::from(vec![Some("Hello"), None, Some("a.b")])),
                Arc::new(Int64Array::from(vec![Some(10), None, Some(-7)])),
                Arc::new(Float64Array::from(vec![Some(1.5), None, Some(-2.25)])),
                Arc::new(StringArray::from(vec![
                    Some(r#"{"a":{"b":[1,{"c":"x"}]},"d":true}"#),
                    None,
                    Some("[1,2]"),
                ])),
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

    /// Column 0 of every row, rendered as JSON (`"text"`, `1`, `1.0`, `true`, `null`, `[..]`).
    async fn col(ctx: &SessionContext, sql: &str) -> Vec<String> {
        let batches = super::batches(ctx, sql).await;
        let mut out = Vec::new();
        for b in batches {
            for r in 0..b.num_rows() {
                let mut buf = Vec::new();
                crate::writer::render_value_json(b.column(0), r, &Zone::Utc, &mut buf).unwrap();
                out.push(String::from_utf8(buf).unwrap());
            }
        }
        out
    }

    async fn one(ctx: &SessionContext, sql: &str) -> String {
        col(ctx, sql).await.remove(0)
    }

    /// Asserts each `(sql, json)`: the first value of `SELECT sql`.
    async fn check(ctx: &SessionContext, cases: &[(&str, &str)]) {
        for (expr, want) in cases {
            let got = one(ctx, &format!("SELECT {expr}")).await;
            assert_eq!(got, *want, "{expr}");
        }
    }

    async fn result_field(ctx: &SessionContext, sql: &str) -> Field {
        let df = ctx.sql(sql).await.unwrap();
        df.schema().field(0).as_ref().clone()
    }

    async fn fails(ctx: &SessionContext, sql: &str) -> String {
        match ctx.sql(sql).await {
            Err(e) => e.to_string(),
            Ok(df) => match df.collect().await {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{sql} should fail"),
            },
        }
    }

    async fn plan_fails(ctx: &SessionContext, sql: &str) -> String {
        match ctx.sql(sql).await.and_then(|df| df.into_optimized_plan()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{sql} should fail at planning"),
        }
    }

    #[tokio::test]
    async fn concat_textcat_length() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("CONCAT('a', 'b', 'c')", r#""abc""#),
                ("CONCAT('a', NULL, 'b')", "null"),
                ("CONCAT('x', 1, 2.5, TRUE)", r#""x12.5true""#),
                ("CONCAT('x', CAST(1 AS DOUBLE))", r#""x1.0""#),
                (
                    "CONCAT('t', MILLIS_TO_TIMESTAMP(1442018818771))",
                    r#""t1442018818771""#,
                ),
                ("TEXTCAT('a', 'b')", r#""ab""#),
                ("TEXTCAT('a', NULL)", "null"),
                ("STRLEN('héllo')", "5"),
                ("LENGTH('a😀')", "3"),
                ("CHAR_LENGTH('abc')", "3"),
                ("CHAR_LENGTH('a😀')", "3"),
                ("CHARACTER_LENGTH('😀😀')", "4"),
                ("STRLEN(12345)", "5"),
                ("CHARACTER_LENGTH('')", "0"),
                ("LENGTH(NULL)", "null"),
            ],
        )
        .await;
        assert_eq!(
            col(&ctx, "SELECT CONCAT(s, '-', i) FROM t").await,
            [r#""Hello-10""#, "null", r#""a.b--7""#]
        );
        assert_eq!(
            result_field(&ctx, "SELECT STRLEN(s) FROM t")
                .await
                .data_type(),
            &DataType::Int64
        );
        plan_fails(&ctx, "SELECT TEXTCAT('a')").await;
    }

    /// String views and large strings (as scans may produce) are accepted everywhere.
    #[tokio::test]
    async fn string_views() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("CONCAT(arrow_cast('a', 'Utf8View'), 'b')", r#""ab""#),
                ("STRLEN(arrow_cast('abc', 'LargeUtf8'))", "3"),
                ("LPAD(arrow_cast('a', 'Utf8View'), 3, 'x')", r#""xxa""#),
                (
                    "JSON_VALUE(arrow_cast('{\"a\":1}', 'Utf8View'), '$.a')",
                    r#""1""#,
                ),
                ("TO_JSON_STRING(arrow_cast('x', 'Utf8View'))", r#""\"x\"""#),
                (
                    "REGEXP_EXTRACT(arrow_cast('a1', 'LargeUtf8'), '[0-9]')",
                    r#""1""#,
                ),
                ("IPV4_PARSE(arrow_cast('1.2.3.4', 'Utf8View'))", "16909060"),
                (
                    "IPV4_STRINGIFY(arrow_cast('1.2.3.4', 'Utf8View'))",
                    r#""1.2.3.4""#,
                ),
            ],
        )
        .await;
    }

    #[tokio::test]
    async fn string_format() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("STRING_FORMAT('%s-%d', 'a', 42)", r#""a-42""#),
                (
                    "STRING_FORMAT('%.2f|%f', 3.14159, 2.5)",
                    r#""3.14|2.500000""#,
                ),
                ("STRING_FORMAT('%.1f', 0.25)", r#""0.3""#),
                ("STRING_FORMAT('%x %X %o', 255, 255, 8)", r#""ff FF 10""#),
                ("STRING_FORMAT('%x', -1)", r#""ffffffffffffffff""#),
                (
                    "STRING_FORMAT('%5d|%-5d|%05d|%+d', 42, 42, -42, 42)",
                    r#""   42|42   |-0042|+42""#,
                ),
                (
                    "STRING_FORMAT('%,d %,.2f', 1234567, 1234.5)",
                    r#""1,234,567 1,234.50""#,
                ),
                ("STRING_FORMAT('%2$s %1$s %<s', 'a', 'b')", r#""b a a""#),
                (
                    "STRING_FORMAT('100%% %s %b', NULL, NULL)",
                    r#""100% null false""#,
                ),
                ("STRING_FORMAT('%s', 1.0)", r#""1.0""#),
                ("STRING_FORMAT('%S %.2s', 'abc', 'xyz')", r#""ABC xy""#),
                ("STRING_FORMAT('no args %d')", r#""no args %d""#),
                ("STRING_FORMAT('%d', 1.5)", r#""%d; 1.5""#),
                ("STRING_FORMAT('%s %s', 'a')", r#""%s %s; a""#),
                (
                    "STRING_FORMAT('%e|%.2E', 12.345, 0.000123456)",
                    r#""1.234500e+01|1.23E-04""#,
                ),
                ("STRING_FORMAT('%.1e', 9.96)", r#""1.0e+01""#),
                ("STRING_FORMAT(NULL, 1)", "null"),
            ],
        )
        .await;
        assert_eq!(
            col(&ctx, "SELECT STRING_FORMAT('%s=%d', s, i) FROM t").await,
            [r#""Hello=10""#, r#""null=null""#, r#""a.b=-7""#]
        );
    }

    #[tokio::test]
    async fn parse_long_contains() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("PARSE_LONG('123')", "123"),
                ("PARSE_LONG('-42')", "-42"),
                ("PARSE_LONG('ff', 16)", "255"),
                ("PARSE_LONG('0xFF', 16)", "255"),
                ("PARSE_LONG('101', 2)", "5"),
                ("PARSE_LONG('12x')", "null"),
                ("PARSE_LONG('1.5')", "null"),
                ("PARSE_LONG(NULL)", "null"),
                ("CONTAINS_STRING('Hello', 'ell')", "true"),
                ("CONTAINS_STRING('Hello', 'ELL')", "false"),
                ("ICONTAINS_STRING('Hello', 'ELL')", "true"),
                ("ICONTAINS_STRING('Hello', 'xyz')", "false"),
                ("CONTAINS_STRING(NULL, 'a')", "null"),
                ("ICONTAINS_STRING(NULL, 'a')", "null"),
                ("CONTAINS_STRING('abc', NULL)", "true"),
            ],
        )
        .await;
        // As Java's Long.parseLong: an invalid radix is a failed parse.
        assert_eq!(one(&ctx, "SELECT PARSE_LONG('1', 40)").await, "null");
        assert_eq!(
            col(&ctx, "SELECT PARSE_LONG(CAST(i AS VARCHAR), 16) FROM t").await,
            ["16", "null", "-7"]
        );
        assert_eq!(
            col(
                &ctx,
                "SELECT COUNT(*) FROM t WHERE CONTAINS_STRING(s, 'ell')"
            )
            .await,
            ["1"]
        );
    }

    #[tokio::test]
    async fn regexps_and_base64() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("REGEXP_EXTRACT('foo123bar456', '[0-9]+')", r#""123""#),
                (
                    "REGEXP_EXTRACT('foo123bar', '([a-z]+)([0-9]+)', 2)",
                    r#""123""#,
                ),
                ("REGEXP_EXTRACT('foo', '[0-9]+')", "null"),
                ("REGEXP_EXTRACT('ab', 'a(x)?', 1)", "null"),
                ("REGEXP_EXTRACT(NULL, 'a')", "null"),
                ("REGEXP_REPLACE('abab', 'a', 'c')", r#""cbcb""#),
                ("REGEXP_REPLACE('abab', 'a(b)', '$1x')", r#""bxbx""#),
                ("REGEXP_REPLACE('a.b', '\\.', '\\$')", r#""a$b""#),
                (
                    "REGEXP_REPLACE('2024-01', '(?<y>\\d+)-(\\d+)', '${y}/$2')",
                    r#""2024/01""#,
                ),
                ("REGEXP_REPLACE(NULL, 'a', 'b')", "null"),
                ("REGEXP_LIKE('abc', 'b')", "true"),
                ("REGEXP_LIKE('abc', '^b')", "false"),
                ("REGEXP_LIKE(NULL, 'b')", "null"),
                ("REGEXP_LIKE('abc', NULL)", "true"),
                ("DECODE_BASE64_UTF8('aGVsbG8=')", r#""hello""#),
                ("DECODE_BASE64_UTF8('aGVsbG8')", r#""hello""#),
                ("DECODE_BASE64_UTF8(NULL)", "null"),
            ],
        )
        .await;
        assert!(
            plan_fails(&ctx, "SELECT REGEXP_EXTRACT(s, '(a') FROM t")
                .await
                .contains("invalid regular expression")
        );
        assert!(
            plan_fails(&ctx, "SELECT REGEXP_EXTRACT(s, '(a)', 2) FROM t")
                .await
                .contains("out of range")
        );
        assert!(
            plan_fails(&ctx, "SELECT REGEXP_REPLACE(s, 'a', '$1') FROM t")
                .await
                .contains("No group 1")
        );
        assert!(
            fails(&ctx, "SELECT DECODE_BASE64_UTF8('!!!')")
                .await
                .contains("invalid base64")
        );
        assert_eq!(
            col(&ctx, "SELECT REGEXP_EXTRACT(s, '^(.)', 1) FROM t").await,
            [r#""H""#, "null", r#""a""#]
        );
    }

    /// DataFusion built-ins kept because they already behave as Druid's.
    #[tokio::test]
    async fn kept_builtins() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("REPLACE('aXbXc', 'X', 'yy')", r#""ayybyyc""#),
                ("REVERSE('abc')", r#""cba""#),
                ("STRPOS('hello', 'l')", "3"),
                ("STRPOS('hello', 'z')", "0"),
                ("POSITION('l' IN 'hello')", "3"),
                ("TRIM('  a  ')", r#""a""#),
                ("TRIM(BOTH 'x' FROM 'xax')", r#""a""#),
                ("TRIM(LEADING 'x' FROM 'xax')", r#""ax""#),
                ("TRIM(TRAILING 'x' FROM 'xax')", r#""xa""#),
                ("BTRIM('xxaxx', 'x')", r#""a""#),
                ("LTRIM('xxa', 'x')", r#""a""#),
                ("RTRIM('axx', 'x')", r#""a""#),
                ("LOWER('AbC')", r#""abc""#),
                ("UPPER('abc')", r#""ABC""#),
                ("UPPER(NULL)", "null"),
                ("'a' || NULL", "null"),
                ("NVL(NULL, 'x')", r#""x""#),
                ("NVL('a', 'b')", r#""a""#),
                ("PI()", "3.141592653589793"),
                ("COT(1.0)", "0.6420926159343306"),
                ("LOG10(100)", "2.0"),
                ("LN(1)", "0.0"),
                ("ABS(-3)", "3"),
                ("CEIL(1.2)", "2.0"),
                ("FLOOR(1.8)", "1.0"),
                ("POWER(2, 10)", "1024.0"),
                ("SQRT(4)", "2.0"),
                ("EXP(0)", "1.0"),
            ],
        )
        .await;
    }

    /// Druid's `substring(expr, start - 1, length)` expression, in every SQL spelling.
    #[tokio::test]
    async fn substring_has_druid_semantics() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("SUBSTRING('hello', 2, 3)", r#""ell""#),
                ("SUBSTR('hello', 2)", r#""ello""#),
                ("SUBSTRING('hello' FROM 2 FOR 2)", r#""el""#),
                ("SUBSTRING('hello' FROM 2)", r#""ello""#),
                ("SUBSTRING('hello' FOR 2)", r#""he""#),
                // Past the end: null (DataFusion and Postgres give ''), in all three forms.
                ("SUBSTRING('abc' FROM 5)", "null"),
                ("SUBSTRING('abc', 5)", "null"),
                ("SUBSTR('abc', 5, 1)", "null"),
                ("SUBSTRING('abc' FROM 4 FOR 1)", "null"),
                ("SUBSTRING('abc', 3)", r#""c""#),
                // Any start on '' is past its end.
                ("SUBSTRING('', 1)", "null"),
                // A length past the end stops at the end; 0 is ''; a negative one takes the rest.
                ("SUBSTRING('abc', 2, 10)", r#""bc""#),
                ("SUBSTRING('abc', 2, 0)", r#""""#),
                ("SUBSTRING('abc', 2, -1)", r#""bc""#),
                ("SUBSTR('abc', 1, -5)", r#""abc""#),
                // Nulls: a null string is null; a null start or length reads as 0 (Druid's
                // `asInt`), so start NULL is the first character and length NULL is ''.
                ("SUBSTRING(CAST(NULL AS VARCHAR), 1)", "null"),
                ("SUBSTRING('abc', CAST(NULL AS INT))", r#""abc""#),
                ("SUBSTRING('abc', 2, CAST(NULL AS INT))", r#""""#),
                // UTF-16 code units, as Java's String.
                ("SUBSTRING('a😀b', 2, 2)", r#""😀""#),
                ("SUBSTRING('a😀b', 4)", r#""b""#),
                ("SUBSTRING('a😀b', 5)", "null"),
            ],
        )
        .await;
        assert_eq!(
            col(&ctx, "SELECT SUBSTRING(s, LENGTH(s) - 1, 1) FROM t").await,
            [r#""l""#, "null", r#"".""#]
        );
        assert_eq!(
            col(&ctx, "SELECT SUBSTRING(s, 5) FROM t").await,
            [r#""o""#, "null", "null"]
        );
        assert_eq!(
            col(&ctx, "SELECT SUBSTR(s FROM 2) FROM t").await,
            [r#""ello""#, "null", r#"".b""#]
        );
        // A start below 1 fails in Druid (Java's substring throws): at planning for a literal,
        // per row otherwise.
        for sql in [
            "SELECT SUBSTRING(s, 0) FROM t",
            "SELECT SUBSTR(s FROM -1 FOR 2) FROM t",
        ] {
            let e = plan_fails(&ctx, sql).await;
            assert!(
                e.contains("SUBSTR") && e.contains("start must be at least 1"),
                "{e}"
            );
        }
        let e = fails(&ctx, "SELECT SUBSTRING(s, i) FROM t").await;
        assert!(e.contains("start must be at least 1, got [-7]"), "{e}");
    }

    /// Replaced built-ins whose edge cases differ in DataFusion.
    #[tokio::test]
    async fn pad_left_right_repeat() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("LPAD('abc', 5, 'x')", r#""xxabc""#),
                ("LPAD('abc', 2, 'x')", r#""ab""#),
                ("LPAD('abc', 5)", r#""  abc""#),
                ("RPAD('abc', 6, 'xy')", r#""abcxyx""#),
                ("RPAD('abc', 2, 'x')", r#""ab""#),
                ("LPAD('abc', 5, '')", r#""abc""#),
                ("RPAD('abcdef', 4, '')", r#""abcd""#),
                ("LPAD('abc', 0, 'x')", "null"),
                ("RPAD('abc', -1, 'x')", "null"),
                ("LPAD(NULL, 5, 'x')", "null"),
                ("LPAD('abc', 5, NULL)", "null"),
                ("LEFT('hello', 2)", r#""he""#),
                ("LEFT('hello', 9)", r#""hello""#),
                ("LEFT('hello', 0)", "\"\""),
                ("RIGHT('hello', 2)", r#""lo""#),
                ("RIGHT('hello', 9)", r#""hello""#),
                ("LEFT(NULL, 2)", "null"),
                ("REPEAT('ab', 3)", r#""ababab""#),
                ("REPEAT('ab', 0)", "null"),
                ("REPEAT(NULL, 2)", "null"),
            ],
        )
        .await;
        assert_eq!(
            col(&ctx, "SELECT RPAD(s, 7, '.') FROM t").await,
            [r#""Hello..""#, "null", r#""a.b....""#]
        );
        assert!(
            plan_fails(&ctx, "SELECT LEFT(s, -1) FROM t")
                .await
                .contains("positive integer")
        );
        assert!(
            fails(&ctx, "SELECT RIGHT(s, i - 20) FROM t")
                .await
                .contains("positive integer")
        );
        // Absurd sizes are errors, not allocations.
        assert!(
            fails(&ctx, "SELECT LPAD(s, 2000000000, 'x') FROM t")
                .await
                .contains("too large")
        );
        assert!(
            fails(&ctx, "SELECT REPEAT(s, 2000000000) FROM t")
                .await
                .contains("too large")
        );
        assert_eq!(
            one(&ctx, "SELECT STRING_FORMAT('%999999999999d', 1)").await,
            r#""%999999999999d; 1""#
        );
    }

    #[tokio::test]
    async fn truncate_round_mod_div() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("TRUNCATE(12.345, 2)", "12.34"),
                ("TRUNC(12.345)", "12.0"),
                ("TRUNC(-12.345, 1)", "-12.3"),
                ("TRUNCATE(-17.5, -1)", "-10.0"),
                ("TRUNCATE(1234, -2)", "1200"),
                ("TRUNCATE(1234)", "1234"),
                ("TRUNCATE(5700, -2)", "5700"),
                ("TRUNCATE(-1234, -2)", "-1200"),
                ("TRUNCATE(NULL, 1)", "null"),
                ("ROUND(2.5)", "3.0"),
                ("ROUND(-2.5)", "-3.0"),
                ("ROUND(12.345, 2)", "12.35"),
                ("ROUND(1.005, 2)", "1.01"),
                ("ROUND(15, -1)", "20"),
                ("ROUND(-15, -1)", "-20"),
                ("ROUND(1234.5, -2)", "1200.0"),
                ("ROUND(14)", "14"),
                ("ROUND(CAST('NaN' AS DOUBLE))", "0.0"),
                ("ROUND(-0.4)", "0.0"),
                ("ROUND(-0.45, 1)", "-0.5"),
                ("MOD(7, 3)", "1"),
                ("MOD(-7, 3)", "-1"),
                ("MOD(7.5, 2)", "1.5"),
                ("MOD(NULL, 2)", "null"),
                ("DIV(7, 2)", "3"),
                ("DIV(-7, 2)", "-3"),
                ("DIV(7.9, 2)", "3"),
                ("SAFE_DIVIDE(7, 2)", "3"),
                ("SAFE_DIVIDE(7, 0)", "null"),
                ("SAFE_DIVIDE(7.0, 2)", "3.5"),
                ("SAFE_DIVIDE(7.0, 0.0)", "null"),
                ("SAFE_DIVIDE(0.0, 0.0)", "0.0"),
            ],
        )
        .await;
        assert_eq!(
            result_field(&ctx, "SELECT ROUND(i, -1) FROM t")
                .await
                .data_type(),
            &DataType::Int64
        );
        assert_eq!(
            col(&ctx, "SELECT TRUNCATE(d, 0) FROM t").await,
            ["1.0", "null", "-2.0"]
        );
        assert_eq!(
            col(&ctx, "SELECT MOD(i, 3) FROM t").await,
            ["1", "null", "-1"]
        );
        assert!(
            fails(&ctx, "SELECT DIV(i, 0) FROM t")
                .await
                .contains("division by zero")
        );
        assert!(
            fails(&ctx, "SELECT MOD(i, 0) FROM t")
                .await
                .contains("division by zero")
        );
        plan_fails(&ctx, "SELECT MOD('a', 2)").await;
    }

    #[tokio::test]
    async fn bitwise() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("BITWISE_AND(12, 10)", "8"),
                ("BITWISE_OR(12, 10)", "14"),
                ("BITWISE_XOR(12, 10)", "6"),
                ("BITWISE_COMPLEMENT(0)", "-1"),
                ("BITWISE_SHIFT_LEFT(1, 4)", "16"),
                ("BITWISE_SHIFT_LEFT(1, 64)", "1"),
                ("BITWISE_SHIFT_RIGHT(-16, 2)", "-4"),
                ("BITWISE_AND(12.9, 10)", "8"),
                ("BITWISE_AND(NULL, 1)", "null"),
                (
                    "BITWISE_CONVERT_DOUBLE_TO_LONG_BITS(1.0)",
                    "4607182418800017408",
                ),
                (
                    "BITWISE_CONVERT_LONG_BITS_TO_DOUBLE(4607182418800017408)",
                    "1.0",
                ),
                (
                    "BITWISE_CONVERT_LONG_BITS_TO_DOUBLE(BITWISE_CONVERT_DOUBLE_TO_LONG_BITS(2.5))",
                    "2.5",
                ),
            ],
        )
        .await;
        plan_fails(&ctx, "SELECT BITWISE_AND(1)").await;
    }

    #[tokio::test]
    async fn human_readable() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("HUMAN_READABLE_BINARY_BYTE_FORMAT(1024)", r#""1.00 KiB""#),
                (
                    "HUMAN_READABLE_BINARY_BYTE_FORMAT(1048576)",
                    r#""1.00 MiB""#,
                ),
                ("HUMAN_READABLE_BINARY_BYTE_FORMAT(1023)", r#""1023 B""#),
                (
                    "HUMAN_READABLE_BINARY_BYTE_FORMAT(1000000, 3)",
                    r#""976.563 KiB""#,
                ),
                ("HUMAN_READABLE_BINARY_BYTE_FORMAT(-1536, 0)", r#""-2 KiB""#),
                (
                    "HUMAN_READABLE_BINARY_BYTE_FORMAT(-9223372036854775807 - 1)",
                    r#""-8.00 EiB""#,
                ),
                ("HUMAN_READABLE_DECIMAL_BYTE_FORMAT(1024)", r#""1.02 KB""#),
                ("HUMAN_READABLE_DECIMAL_BYTE_FORMAT(999)", r#""999 B""#),
                ("HUMAN_READABLE_DECIMAL_BYTE_FORMAT(-1000)", r#""-1.00 KB""#),
                (
                    "HUMAN_READABLE_DECIMAL_BYTE_FORMAT(1000000)",
                    r#""1.00 MB""#,
                ),
                ("HUMAN_READABLE_DECIMAL_FORMAT(1024)", r#""1.02 K""#),
                ("HUMAN_READABLE_DECIMAL_FORMAT(999)", r#""999""#),
                ("HUMAN_READABLE_DECIMAL_FORMAT(1234567, 1)", r#""1.2 M""#),
                ("HUMAN_READABLE_DECIMAL_FORMAT(NULL)", "null"),
            ],
        )
        .await;
        assert!(
            plan_fails(&ctx, "SELECT HUMAN_READABLE_BINARY_BYTE_FORMAT(1, 4)")
                .await
                .contains("[0,3]")
        );
    }

    #[tokio::test]
    async fn ip_functions() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("IPV4_MATCH('192.168.1.5', '192.168.0.0/16')", "true"),
                ("IPV4_MATCH('10.0.0.1', '192.168.0.0/16')", "false"),
                ("IPV4_MATCH(3232235777, '192.168.1.0/24')", "true"),
                ("IPV4_MATCH('not an ip', '192.168.0.0/16')", "false"),
                ("IPV4_MATCH(NULL, '192.168.0.0/16')", "false"),
                ("IPV4_MATCH('1.2.3.4', '0.0.0.0/0')", "true"),
                ("IPV4_PARSE('192.168.1.1')", "3232235777"),
                ("IPV4_PARSE(3232235777)", "3232235777"),
                ("IPV4_PARSE(4294967296)", "null"),
                ("IPV4_PARSE('192.168.1')", "null"),
                ("IPV4_STRINGIFY(3232235777)", r#""192.168.1.1""#),
                ("IPV4_STRINGIFY('192.168.1.1')", r#""192.168.1.1""#),
                ("IPV4_STRINGIFY(-1)", "null"),
                ("IPV4_STRINGIFY('x')", "null"),
                ("IPV6_MATCH('2001:db8::1', '2001:db8::/32')", "true"),
                ("IPV6_MATCH('2001:db9::1', '2001:db8::/32')", "false"),
                ("IPV6_MATCH('bad', '2001:db8::/32')", "false"),
            ],
        )
        .await;
        assert!(
            plan_fails(&ctx, "SELECT IPV4_MATCH(s, '1.2.3.4/33') FROM t")
                .await
                .contains("prefix")
        );
        assert!(
            plan_fails(&ctx, "SELECT IPV6_MATCH(s, 'zz/8') FROM t")
                .await
                .contains("IPv6")
        );
    }

    #[tokio::test]
    async fn json_functions() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                (
                    "PARSE_JSON('{\"a\": [1, 2.5, \"x\"]}')",
                    r#""{\"a\":[1,2.5,\"x\"]}""#,
                ),
                ("TRY_PARSE_JSON('{bad')", "null"),
                ("TO_JSON_STRING('abc')", r#""\"abc\"""#),
                ("TO_JSON_STRING(12)", r#""12""#),
                ("TO_JSON_STRING(1e10)", r#""1.0E10""#),
                ("PARSE_JSON('[1e10, 2.50, 3]')", r#""[1.0E10,2.5,3]""#),
                ("JSON_VALUE('{\"a\":1e-5}', '$.a')", r#""1.0E-5""#),
                (
                    "TO_JSON_STRING(PARSE_JSON('{\"a\" : 1}'))",
                    r#""{\"a\":1}""#,
                ),
                ("TO_JSON_STRING(NULL)", "null"),
                ("JSON_VALUE('{\"a\":{\"b\":[7,8]}}', '$.a.b[1]')", r#""8""#),
                ("JSON_VALUE('{\"a\":{\"b\":[7,8]}}', '$.a.b[-1]')", r#""8""#),
                ("JSON_VALUE('{\"a\":{\"b\":[7,8]}}', '$.a.b')", "null"),
                ("JSON_VALUE('{\"a\":\"x\"}', '$[''a'']')", r#""x""#),
                ("JSON_VALUE('{\"a\":true}', '$.a')", r#""true""#),
                ("JSON_VALUE('{\"a\":null}', '$.a')", "null"),
                ("JSON_VALUE('{\"a\":1}', '$.missing')", "null"),
                (
                    "JSON_QUERY('{\"a\":{\"b\":[7,8]}}', '$.a')",
                    r#""{\"b\":[7,8]}""#,
                ),
                ("JSON_QUERY('{\"a\":1}', '$.b')", "null"),
                ("JSON_QUERY('{\"a\":null}', '$.a')", "null"),
                ("JSON_QUERY_ARRAY('{\"a\":null}', '$.a')", "null"),
                ("PARSE_JSON('null')", "null"),
                (
                    "JSON_QUERY_ARRAY('{\"a\":[{\"x\":1},2]}', '$.a')",
                    r#"[{"x":1},2]"#,
                ),
                (
                    "JSON_QUERY_ARRAY('{\"a\":{\"x\":1}}', '$.a')",
                    r#"[{"x":1}]"#,
                ),
                (
                    "JSON_KEYS('{\"a\":{\"x\":1,\"y\":2}}', '$.a')",
                    r#"["x","y"]"#,
                ),
                ("JSON_KEYS('{\"a\":[5,6]}', '$.a')", r#"["0","1"]"#),
                ("JSON_KEYS('{\"a\":1}', '$.a')", "null"),
                (
                    "JSON_PATHS('{\"a\":{\"b\":1,\"c\":[1,2]},\"x.y\":null,\"o\":[{\"p\":1}]}')",
                    r#"["$.a.b","$.a.c","$['x.y']","$.o[0].p"]"#,
                ),
                ("JSON_PATHS('3')", r#"["$"]"#),
                ("JSON_PATHS('[{\"a\":1},2]')", r#"["$[0].a","$[1]"]"#),
                ("JSON_VALUE('5', '$')", r#""5""#),
                (
                    "JSON_MERGE('{\"a\":{\"x\":1,\"l\":[1]},\"b\":1}', '{\"a\":{\"y\":2,\"l\":[2]},\"b\":{\"z\":0}}')",
                    r#""{\"a\":{\"x\":1,\"l\":[1,2],\"y\":2},\"b\":{\"z\":0}}""#,
                ),
                ("JSON_MERGE('[1]', '[2]', '[3]')", r#""[1,2,3]""#),
                ("JSON_OBJECT('age', 1, 'name', 'x')", r#""{\"name\":\"x\",\"age\":1}""#),
                ("JSON_OBJECT('a', 1, 'a', 2)", r#""{\"a\":2}""#),
                (
                    "JSON_MERGE('{\"a\":1,\"b\":2}', PARSE_JSON('{\"b\":3,\"c\":4}'))",
                    r#""{\"a\":1,\"b\":3,\"c\":4}""#,
                ),
                ("JSON_MERGE('{\"a\":1}', NULL)", "null"),
                (
                    "JSON_OBJECT('a', 1, 'b', 'x', 'c', PARSE_JSON('[1]'), 'd', NULL)",
                    r#""{\"a\":1,\"b\":\"x\",\"c\":[1],\"d\":null}""#,
                ),
            ],
        )
        .await;
        assert_eq!(
            col(&ctx, "SELECT JSON_VALUE(j, '$.a.b[1].c') FROM t").await,
            [r#""x""#, "null", "null"]
        );
        assert_eq!(
            col(&ctx, "SELECT JSON_VALUE(j, '$[0]') FROM t").await,
            ["null", "null", r#""1""#]
        );
        // A path per row.
        assert_eq!(
            col(
                &ctx,
                "SELECT JSON_VALUE(j, CASE WHEN i > 0 THEN '$.d' ELSE '$[1]' END) FROM t"
            )
            .await,
            [r#""true""#, "null", r#""2""#]
        );
        // JSON results carry the COMPLEX<json> marker, also through aliases and subqueries.
        for sql in [
            "SELECT PARSE_JSON(j) FROM t",
            "SELECT JSON_QUERY(j, '$.a') AS q FROM t",
            "SELECT x FROM (SELECT JSON_OBJECT('k', s) AS x FROM t)",
            "SELECT p, COUNT(*) FROM (SELECT PARSE_JSON(j) AS p FROM t) GROUP BY p",
            "SELECT PARSE_JSON(j) AS p FROM t ORDER BY s",
            "SELECT PARSE_JSON(j) AS p FROM t UNION ALL SELECT PARSE_JSON('1')",
        ] {
            assert!(is_json_field(&result_field(&ctx, sql).await), "{sql}");
        }
        assert!(!is_json_field(
            &result_field(&ctx, "SELECT JSON_VALUE(j, '$.d') FROM t").await
        ));
        assert!(
            plan_fails(&ctx, "SELECT JSON_VALUE(j, 'a.b') FROM t")
                .await
                .contains("must start with '$'")
        );
        assert!(
            plan_fails(&ctx, "SELECT JSON_QUERY(j, '$[x]') FROM t")
                .await
                .contains("array index")
        );
        assert!(
            fails(&ctx, "SELECT PARSE_JSON('{bad')")
                .await
                .contains("cannot parse")
        );
        assert!(
            fails(&ctx, "SELECT JSON_MERGE('{}', '[1]')")
                .await
                .contains("cannot merge")
        );
        plan_fails(&ctx, "SELECT JSON_OBJECT('a')").await;
        plan_fails(&ctx, "SELECT JSON_MERGE('{}')").await;
        assert!(
            plan_fails(&ctx, "SELECT PARSE_JSON(5)")
                .await
                .contains("Cannot apply 'PARSE_JSON' to arguments of type 'PARSE_JSON(<BIGINT>)'")
        );
        // Calcite refuses TRY_PARSE_JSON of a non-string too (Druid's quidem
        // `qaJsonCols/funcs_and_sql_func_try_parse_json`).
        assert!(
            plan_fails(&ctx, "SELECT TRY_PARSE_JSON(5)")
                .await
                .contains("Cannot apply 'TRY_PARSE_JSON'")
        );
        assert!(
            fails(&ctx, "SELECT JSON_OBJECT(1, 2)")
                .await
                .contains("field name must be a STRING")
        );
        // `JSON_VALUE(.. RETURNING type)` parses but DataFusion's planner rejects the clause.
        assert!(
            ctx.sql("SELECT JSON_VALUE(j, '$.d' RETURNING BIGINT) FROM t")
                .await
                .is_err()
        );
        // Nor does the `key: value` form.
        assert!(ctx.sql("SELECT JSON_OBJECT('a': 1)").await.is_err());
        // The SQL-standard `KEY .. VALUE ..` form does not get through the parser.
        assert!(
            ctx.sql("SELECT JSON_OBJECT(KEY 'a' VALUE 1)")
                .await
                .is_err()
        );
    }

    /// Text that is not JSON is a string value to the JSON functions, as Druid's
    /// `NestedDataExpressions.unwrap` reads a `VARCHAR` (a string primitive), never an error;
    /// `'$.'` is the root.
    #[tokio::test]
    async fn json_functions_read_text_that_is_not_json_as_a_string() {
        let ctx = ctx();
        check(
            &ctx,
            &[
                ("JSON_VALUE('ABCD', '$')", r#""ABCD""#),
                ("JSON_VALUE('ABCD', '$.x')", "null"),
                ("JSON_QUERY('ABCD', '$')", r#""\"ABCD\"""#),
                ("JSON_VALUE('{\"a\":1}', '$.')", "null"),
                ("JSON_QUERY('{\"a\":1}', '$.')", r#""{\"a\":1}""#),
                ("JSON_VALUE('{\"a\":1}', '$.a')", r#""1""#),
            ],
        )
        .await;
        // A primitive at the root is Druid's path `$` (`NestedPathFinder.toNormalizedJsonPath`).
        assert_eq!(
            col(&ctx, "SELECT JSON_PATHS('not json')").await,
            [r#"["$"]"#]
        );
    }

    #[tokio::test]
    async fn json_columns_render_as_druid_complex_json() {
        use crate::writer::{ResultFormat, ResultWriter, column_infos, render_all};
        let ctx = ctx();
        let df = ctx
            .sql("SELECT PARSE_JSON(j) AS p, JSON_QUERY_ARRAY(j, '$.a.b') AS qa FROM t")
            .await
            .unwrap();
        let schema = df.schema().as_arrow().clone();
        let batches = df.collect().await.unwrap();
        let cols = column_infos(&schema);
        assert_eq!(cols[0].native_type, "COMPLEX<json>");
        assert_eq!(cols[0].sql_type, "OTHER");
        assert_eq!(cols[1].native_type, "ARRAY<COMPLEX<json>>");
        assert_eq!(cols[1].sql_type, "ARRAY");
        let render = |format: ResultFormat, stringify: bool| {
            let mut w = ResultWriter::new(format, cols.clone(), true, true, true, Zone::Utc)
                .with_stringify_arrays(stringify);
            String::from_utf8(render_all(&mut w, &batches).unwrap()).unwrap()
        };
        assert_eq!(
            render(ResultFormat::ArrayLines, false),
            concat!(
                "[\"p\",\"qa\"]\n",
                "[\"COMPLEX<json>\",\"ARRAY<COMPLEX<json>>\"]\n",
                "[\"OTHER\",\"ARRAY\"]\n",
                "[{\"a\":{\"b\":[1,{\"c\":\"x\"}]},\"d\":true},[1,{\"c\":\"x\"}]]\n",
                "[null,null]\n",
                "[[1,2],null]\n\n",
            )
        );
        assert_eq!(
            render(ResultFormat::Object, true),
            concat!(
                "[{\"p\":{\"type\":\"COMPLEX<json>\",\"sqlType\":\"OTHER\"},",
                "\"qa\":{\"type\":\"ARRAY<COMPLEX<json>>\",\"sqlType\":\"ARRAY\"}},",
                "{\"p\":{\"a\":{\"b\":[1,{\"c\":\"x\"}]},\"d\":true},\"qa\":\"[1,{\\\"c\\\":\\\"x\\\"}]\"},",
                "{\"p\":null,\"qa\":null},",
                "{\"p\":[1,2],\"qa\":null}]\n",
            )
        );
        assert_eq!(
            render(ResultFormat::Csv, true),
            concat!(
                "p,qa\n",
                "COMPLEX<json>,ARRAY<COMPLEX<json>>\n",
                "OTHER,ARRAY\n",
                "\"{\"\"a\"\":{\"\"b\"\":[1,{\"\"c\"\":\"\"x\"\"}]},\"\"d\"\":true}\",\"[1,{\"\"c\"\":\"\"x\"\"}]\"\n",
                ",\n",
                "\"[1,2]\",\n",
                "\n",
            )
        );
    }
}

/// Sketch functions (`dolmen_functions::sketches`) through the result writers.
mod sketches {
    use arrow::array::RecordBatch;
    use datafusion::prelude::SessionContext;
    use dolmen_functions::test_fixtures::{context, foo};

    async fn run(ctx: &SessionContext, sql: &str) -> RecordBatch {
        let batches = super::batches(ctx, sql).await;
        arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
    }

    #[tokio::test]
    async fn results_render_as_druid_json() {
        // Through the Druid result writer (array format): sketches as base64 strings, arrays
        // stringified, theta bounds as a JSON object; values as in Druid's tests.
        use crate::writer::{ResultFormat, ResultWriter, column_infos};
        let ctx = context();
        foo(&ctx);
        let b = run(
            &ctx,
            "SELECT DS_HLL(dim2), HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_HLL(dim2)), \
             THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_THETA(dim2), 10), \
             DS_QUANTILES_SKETCH(m1) FILTER (WHERE dim1 = 'nonexistent'), \
             DS_HISTOGRAM(DS_QUANTILES_SKETCH(cnt), 0.2, 0.6) FROM foo",
        )
        .await;
        let mut w = ResultWriter::new(
            ResultFormat::Array,
            column_infos(&b.schema()),
            false,
            false,
            false,
            dolmen_common::zone::Zone::Utc,
        );
        let mut out = Vec::new();
        w.start(&mut out);
        w.write_batch(&b, &mut out).unwrap();
        w.finish(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[[\"AgEHDAMIAgDhUv8P63iABQ==\",\"[2.000000004967054,2.0,2.000099863468538]\",\
             {\"estimate\":2.0,\"highBound\":2.0,\"lowBound\":2.0,\"numStdDev\":10},\
             \"AQMIHoAAAAA=\",\"[0.0,0.0,6.0]\"]]\n"
        );
    }
}

/// The batches of `sql` (planned by DataFusion alone); a failure panics naming `sql`.
async fn batches(
    ctx: &datafusion::prelude::SessionContext,
    sql: &str,
) -> Vec<arrow::array::RecordBatch> {
    ctx.sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}
