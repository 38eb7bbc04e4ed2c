use super::*;

fn seq(s: &str) -> KinesisSequence {
    s.parse().unwrap()
}

#[test]
fn sequence_numbers_compare_numerically_not_as_text() {
    assert!(seq("9") < seq("10"));
    assert!(seq("99") < seq("100"));
    assert!(seq("0010") == seq("10"));
    assert!(
        seq("49590338271490256608559692538361571095921575989136588898")
            < seq("49590338271490256608559692540925702759324208523137515618")
    );
    // Longer numbers are larger, whatever their first digit.
    assert!(seq("900000000000000000000") < seq("1000000000000000000000"));
    // The end-of-shard marker is after every number.
    assert!(seq("99999999999999999999999999999999999999999999999") < KinesisSequence::EndOfShard);
    let mut sorted = [seq("100"), seq("EOS"), seq("11"), seq("9"), seq("0")];
    sorted.sort();
    let text: Vec<String> = sorted.iter().map(ToString::to_string).collect();
    assert_eq!(text, ["0", "9", "11", "100", "EOS"]);
}

#[test]
fn successor_and_predecessor_carry_and_borrow() {
    assert_eq!(seq("0").successor(), seq("1"));
    assert_eq!(seq("199").successor(), seq("200"));
    assert_eq!(seq("999").successor(), seq("1000"));
    assert_eq!(seq("1000").predecessor(), Some(seq("999")));
    assert_eq!(seq("200").predecessor(), Some(seq("199")));
    assert_eq!(seq("1").predecessor(), Some(seq("0")));
    assert_eq!(seq("0").predecessor(), None);
    assert_eq!(KinesisSequence::EndOfShard.predecessor(), None);
    assert_eq!(
        KinesisSequence::EndOfShard.successor(),
        KinesisSequence::EndOfShard
    );
    let big = seq("49590338271490256608559692538361571095921575989136588898");
    assert_eq!(big.successor().predecessor(), Some(big.clone()));
    assert!(big.successor() > big);
}

#[test]
fn invalid_sequence_numbers_are_rejected_with_the_text() {
    for bad in ["", "-1", "12a", "1.5", " 1", "eos", &"1".repeat(130)] {
        let err = bad.parse::<KinesisSequence>().unwrap_err();
        assert_eq!(err.0, bad);
    }
    assert_eq!(seq("EOS").to_string(), END_OF_SHARD_MARKER);
    assert_eq!(seq("000").to_string(), "0");
}

#[test]
fn credentials_never_show_in_debug_output() {
    let config = KinesisConfig {
        credentials: Some(StaticCredentials {
            access_key: "AKIDEXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI".into(),
        }),
        ..KinesisConfig::new(Some("http://127.0.0.1:1".into()), None)
    };
    let text = format!("{config:?}");
    assert!(
        !text.contains("AKIDEXAMPLE") && !text.contains("wJalrXUtnFEMI"),
        "{text}"
    );
    let supplier = KinesisRecordSupplier::new(config).unwrap();
    let text = format!("{supplier:?}");
    assert!(!text.contains("wJalrXUtnFEMI"), "{text}");
}

#[test]
fn records_per_fetch_out_of_range_is_invalid_config() {
    for bad in [0, 10_001] {
        let config = KinesisConfig {
            records_per_fetch: bad,
            ..KinesisConfig::new(Some("http://127.0.0.1:1".into()), None)
        };
        let err = KinesisRecordSupplier::new(config).unwrap_err();
        assert!(
            matches!(&err, SupplierError::InvalidConfig(m) if m.contains("recordsPerFetch")),
            "{err}"
        );
    }
}

#[test]
fn an_unreachable_endpoint_is_cannot_connect() {
    let config = KinesisConfig {
        credentials: Some(StaticCredentials {
            access_key: "k".into(),
            secret_key: "s".into(),
        }),
        request_timeout: Duration::from_secs(5),
        ..KinesisConfig::new(Some("http://127.0.0.1:1".into()), Some("us-east-1".into()))
    };
    let supplier = KinesisRecordSupplier::new(config).unwrap();
    let err = supplier.partition_ids("any").unwrap_err();
    assert!(matches!(err, SupplierError::CannotConnect { .. }), "{err}");
}
