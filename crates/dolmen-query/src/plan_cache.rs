//! The plan cache: optimized logical plans of repeated queries, valid while the segment view
//! they were planned against is unchanged.
//!
//! Dashboards send the same SQL again and again; turning the text into a logical plan and
//! optimizing it (Druid rewrites, SQL-to-relational planning, DataFusion's analyzer and
//! optimizer passes) is most of the cost of a small query: about 0.1-0.3 ms per query here,
//! against ~0.15 ms for the physical planning and execution of `SELECT COUNT(*)`. The cache
//! keeps the *optimized logical* plan only: logical plans are plain values, while physical
//! plans carry execution state (dynamic filters, see DataFusion's `reset_plan_states`), so
//! every query still gets a fresh physical plan and execution.
//!
//! # Validity
//! A logical plan embeds the table providers it was planned with, and those hold the
//! datasource's timeline and hydrant snapshot (and its schema). An entry records
//! [`SegmentView::generation`](dolmen_storage::SegmentView::generation) as read *before*
//! planning and is used only while the view is still at that generation: any publish, mark
//! used/unused, handoff or hydrant change makes every entry stale. (A change during planning
//! can only make the entry stale early, never late.)
//!
//! # What is cached
//! A plain query (not `EXPLAIN`, not SQL-based ingestion) whose plan
//! - reads only Druid datasources (no `sys`, `INFORMATION_SCHEMA` or `lookup` tables, whose
//!   contents are taken when they are planned, and no `EXTERN` files), and
//! - calls only immutable scalar functions: `CURRENT_TIMESTAMP` and friends are stable (the
//!   optimizer folds them into a literal of the query's start time), `LOOKUP` is stable (its
//!   result follows the lookup tables, which change without any segment view change), others
//!   volatile.
//!
//! The key is everything planning reads from the request: the SQL text (with its `SET`
//! statements), the parameters, and the context values that change planning
//! (`sqlTimeZone`, `sqlOuterLimit`, `useApproximateCountDistinct`, `readFromDeepStorage`).
//! At most [`CAPACITY`] entries, least recently used evicted first.

use std::sync::{Arc, Mutex};

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Expr, LogicalPlan, Volatility};
use dolmen_common::zone::Zone;
use hashlink::LruCache;

use crate::table::DatasourceTable;

/// Most plans kept.
pub const CAPACITY: usize = 512;

/// What planning reads from a request (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlanKey {
    /// The request's SQL text, `SET` statements included.
    pub sql: String,
    /// The `parameters` array, as JSON text.
    pub parameters: String,
    /// `sqlTimeZone`.
    pub time_zone: Zone,
    /// `sqlOuterLimit`.
    pub outer_limit: Option<usize>,
    /// `useApproximateCountDistinct`.
    pub approximate_count_distinct: bool,
    /// `readFromDeepStorage`.
    pub read_from_deep_storage: Option<bool>,
}

/// A bounded LRU map from [`PlanKey`] to an optimized logical plan and the view generation it
/// was planned at.
#[derive(Debug)]
pub struct PlanCache {
    entries: Mutex<LruCache<PlanKey, (u64, Arc<LogicalPlan>)>>,
}

impl Default for PlanCache {
    fn default() -> Self {
        PlanCache {
            entries: Mutex::new(LruCache::new(CAPACITY)),
        }
    }
}

impl PlanCache {
    /// The plan cached for `key` if it was planned at `generation`; a stale entry is dropped.
    pub fn get(&self, key: &PlanKey, generation: u64) -> Option<Arc<LogicalPlan>> {
        let mut entries = self.entries.lock().expect("plan cache lock");
        match entries.get(key) {
            Some((g, plan)) if *g == generation => Some(Arc::clone(plan)),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Remembers `optimized` for `key`, planned at `generation`, when `unoptimized` (the same
    /// query before the analyzer and optimizer ran) may be cached at all (see the module docs).
    pub fn insert(
        &self,
        key: PlanKey,
        generation: u64,
        unoptimized: &LogicalPlan,
        optimized: &LogicalPlan,
    ) {
        if !cacheable(unoptimized) {
            return;
        }
        self.entries
            .lock()
            .expect("plan cache lock")
            .insert(key, (generation, Arc::new(optimized.clone())));
    }

    /// How many plans are cached.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("plan cache lock").len()
    }

    /// No plan is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether a plan (before optimization, which folds stable functions into literals) reads
/// only Druid datasources and calls only immutable scalar functions, in every subquery too.
pub fn cacheable(plan: &LogicalPlan) -> bool {
    let mut ok = true;
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            let datasource = source_as_provider(&scan.source)
                .map(|p| p.is::<DatasourceTable>())
                .unwrap_or(false);
            if !datasource {
                ok = false;
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        for e in node.expressions() {
            let _ = e.apply(|e| {
                if let Expr::ScalarFunction(f) = e
                    && f.func.signature().volatility != Volatility::Immutable
                {
                    ok = false;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            });
            if !ok {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    ok
}
