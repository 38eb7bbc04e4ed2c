use serde_json::json;

use super::*;

fn t(s: &str) -> i64 {
    dolmen_common::time::parse_iso_instant(s).unwrap()
}

fn seg(s: &str) -> Interval {
    Interval::parse(s).unwrap()
}

fn rule(v: Value) -> Rule {
    parse_rules(&json!([v])).unwrap().remove(0)
}

fn err(v: Value) -> String {
    parse_rules(&v).unwrap_err().0
}

const NOW: &str = "2024-03-31T12:00:00Z";

#[test]
fn forever_rules_match_everything() {
    for ty in ["loadForever", "dropForever", "broadcastForever"] {
        let r = rule(json!({"type": ty}));
        assert!(r.applies_to(&seg("1000-01-01/1000-01-02"), t(NOW)));
        assert!(r.applies_to(&seg("3000-01-01/3000-01-02"), t(NOW)));
    }
}

#[test]
fn interval_rules_overlap_for_load_and_contain_for_drop() {
    let i = "2015-09-12T12:00/2015-09-13";
    for ty in ["loadByInterval", "broadcastByInterval"] {
        let r = rule(json!({"type": ty, "interval": i}));
        assert!(r.applies_to(&seg("2015-09-12T12:00/2015-09-12T13:00"), 0));
        // Partial overlap is enough to load.
        assert!(r.applies_to(&seg("2015-09-12/2015-09-13"), 0));
        // Abutting does not overlap.
        assert!(!r.applies_to(&seg("2015-09-12T11:00/2015-09-12T12:00"), 0));
        assert!(!r.applies_to(&seg("2015-09-13/2015-09-13T01:00"), 0));
    }
    let d = rule(json!({"type": "dropByInterval", "interval": i}));
    assert!(d.applies_to(&seg("2015-09-12T12:00/2015-09-12T13:00"), 0));
    assert!(d.applies_to(&seg(i), 0));
    // Partial overlap is not contained: not dropped.
    assert!(!d.applies_to(&seg("2015-09-12/2015-09-13"), 0));
    assert!(!d.applies_to(&seg("2015-09-11/2015-09-11T01:00"), 0));
}

#[test]
fn load_by_period_with_and_without_future() {
    let now = t(NOW);
    for ty in ["loadByPeriod", "broadcastByPeriod"] {
        let future = rule(json!({"type": ty, "period": "P1M"}));
        let past_only = rule(json!({"type": ty, "period": "P1M", "includeFuture": false}));
        // P1M before 2024-03-31T12:00 is 2024-02-29T12:00 (calendar month, clamped).
        let inside = seg("2024-03-01/2024-03-02");
        let ends_at_start = seg("2024-02-29/2024-02-29T12:00");
        let straddles_start = seg("2024-02-29/2024-03-01");
        let future_seg = seg("2024-04-02/2024-04-03");
        for r in [&future, &past_only] {
            assert!(r.applies_to(&inside, now), "{ty}");
            assert!(r.applies_to(&straddles_start, now), "{ty}");
            assert!(!r.applies_to(&ends_at_start, now), "{ty}");
        }
        assert!(future.applies_to(&future_seg, now));
        assert!(!past_only.applies_to(&future_seg, now));
        // A segment starting exactly at now does not overlap [now-P, now).
        assert!(!past_only.applies_to(&seg("2024-03-31T12:00/2024-03-31T13:00"), now));
        assert!(past_only.applies_to(&seg("2024-03-31T11:00/2024-03-31T13:00"), now));
    }
}

#[test]
fn drop_by_period_with_and_without_future() {
    let now = t(NOW);
    let future = rule(json!({"type": "dropByPeriod", "period": "P1D"}));
    let past_only = rule(json!({"type": "dropByPeriod", "period": "P1D", "includeFuture": false}));
    let recent = seg("2024-03-31/2024-03-31T01:00");
    let starts_before = seg("2024-03-30T11:00/2024-03-30T13:00");
    let at_start = seg("2024-03-30T12:00/2024-03-30T13:00");
    let future_seg = seg("2024-04-01/2024-04-02");
    assert!(future.applies_to(&recent, now));
    assert!(future.applies_to(&at_start, now));
    assert!(!future.applies_to(&starts_before, now));
    assert!(future.applies_to(&future_seg, now));
    assert!(past_only.applies_to(&recent, now));
    assert!(past_only.applies_to(&at_start, now));
    assert!(!past_only.applies_to(&starts_before, now));
    assert!(!past_only.applies_to(&future_seg, now));
    // Ending after now is not contained in [now-P, now).
    assert!(!past_only.applies_to(&seg("2024-03-31T11:00/2024-03-31T13:00"), now));
}

#[test]
fn drop_before_by_period() {
    let now = t(NOW);
    let r = rule(json!({"type": "dropBeforeByPeriod", "period": "P1Y"}));
    assert!(r.applies_to(&seg("2023-03-30/2023-03-31T12:00"), now));
    assert!(!r.applies_to(&seg("2023-03-31/2023-04-01"), now));
    assert!(!r.applies_to(&seg("2025-01-01/2025-01-02"), now));
}

#[test]
fn load_rule_defaults_and_normal_form() {
    let r = rule(json!({"type": "loadForever"}));
    assert_eq!(
        r.to_json(),
        json!({"tieredReplicants": {"_default_tier": 2}, "useDefaultTierForNull": true, "type": "loadForever"})
    );
    let none = rule(json!({"type": "loadForever", "useDefaultTierForNull": false}));
    assert_eq!(none.total_replicants(), 0);
    assert_eq!(none.to_json()["tieredReplicants"], json!({}));
    let p = rule(json!({"type": "loadByPeriod", "period": "P1M", "tieredReplicants": {"hot": 1}}));
    assert_eq!(
        p.to_json(),
        json!({"period": "P1M", "includeFuture": true, "tieredReplicants": {"hot": 1}, "useDefaultTierForNull": true, "type": "loadByPeriod"})
    );
    assert_eq!(
        rule(json!({"type": "loadByInterval", "interval": "2015-09-12T12:00/2015-09-13"}))
            .to_json()["interval"],
        json!("2015-09-12T12:00:00.000Z/2015-09-13T00:00:00.000Z")
    );
    assert_eq!(
        rules_to_json(&initial_default_rules()),
        json!([r.to_json()])
    );
    // Round trip through the stored form.
    let all = parse_rules(&json!([
        {"type": "dropBeforeByPeriod", "period": "P3M"},
        {"type": "broadcastByPeriod", "period": "PT1H", "includeFuture": false},
        {"type": "dropByInterval", "interval": "2020/2021"},
    ]))
    .unwrap();
    assert_eq!(parse_stored(&rules_to_json(&all)).unwrap(), all);
}

#[test]
fn bad_rules_name_the_rule_and_field() {
    assert_eq!(err(Value::Null), "Rules cannot be null.");
    assert!(err(json!({"type": "loadForever"})).contains("JSON array"));
    let e = err(json!([{"type": "loadForever"}, {"type": "keepForever"}]));
    assert!(
        e.contains("rule [1]") && e.contains("'keepForever'") && e.contains("loadByPeriod"),
        "{e}"
    );
    let e = err(json!([{"period": "P1D"}]));
    assert!(e.contains("rule [0]") && e.contains("'type'"), "{e}");
    let e = err(json!([{"type": "loadForever", "tieredReplicants": {"_default_tier": -1}}]));
    assert!(
        e.contains("rule [0] (loadForever): tieredReplicants")
            && e.contains(
                "Invalid number of replicas for tier [_default_tier]. Value [-1] must be positive."
            ),
        "{e}"
    );
    let e = err(json!([{"type": "loadForever", "tieredReplicants": {"t": null}}]));
    assert!(e.contains("Value must not be null"), "{e}");
    let e = err(json!([{"type": "loadForever", "tieredReplicants": {"t": 1.5}}]));
    assert!(e.contains("must be an integer"), "{e}");
    let e = err(json!([{"type": "loadByPeriod", "period": "P1X"}]));
    assert!(
        e.contains("rule [0] (loadByPeriod): period") && e.contains("P1X"),
        "{e}"
    );
    let e = err(json!([{"type": "dropByPeriod"}]));
    assert!(
        e.contains("rule [0] (dropByPeriod): period: is required"),
        "{e}"
    );
    let e = err(json!([{"type": "dropByInterval", "interval": "foo"}]));
    assert!(
        e.contains("rule [0] (dropByInterval): interval") && e.contains("foo"),
        "{e}"
    );
    let e = err(json!([{"type": "loadByPeriod", "period": "P1D", "includeFuture": "yes"}]));
    assert!(e.contains("includeFuture"), "{e}");
    let e = err(json!([{"type": "dropForever", "tieredReplicants": {}}]));
    assert!(
        e.contains("rule [0] (dropForever): tieredReplicants: unknown property"),
        "{e}"
    );
    let e = err(json!([{"type": "loadForever", "tieredReplicants": [1]}]));
    assert!(e.contains("tieredReplicants: must be an object"), "{e}");
    assert!(err(json!(["loadForever"])).contains("rule [0] must be a JSON object"));
}
