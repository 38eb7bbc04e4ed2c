//! Joins yield to the scheduler between output batches, so that a cancelled or timed-out query
//! stops promptly.
//!
//! Cancelling a query (`DELETE /v2/sql/{id}`, a `timeout`, a client that goes away) drops its
//! execution; DataFusion's spawned partition tasks are aborted, which takes effect the next
//! time a task yields. DataFusion's `EnsureCooperative` rule makes the *leaves* spend tokio's
//! cooperative budget, one unit per batch they produce. A join can produce very many batches
//! from one input batch: a cross join yields one batch per build-side row for each probe
//! batch (39,244 batches per probe batch on the Wikipedia sample joined with itself), and the
//! aggregate above it polls it in a loop without ever returning `Pending`. Such a task did not
//! yield for seconds (tens of seconds in a debug build), and went on burning a core after its
//! query was cancelled.
//!
//! [`CooperativeJoins`] wraps every join in DataFusion's `CooperativeExec`, which spends one
//! unit of budget per *output* batch: after tokio's budget (128 batches) the task yields, and
//! an abort lands. The cost is one budget check per batch.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::joins::{
    CrossJoinExec, HashJoinExec, NestedLoopJoinExec, SortMergeJoinExec, SymmetricHashJoinExec,
};

/// The physical optimizer rule described in the module docs.
#[derive(Debug, Default)]
pub struct CooperativeJoins;

/// Whether `plan` is a join (an operator whose output can be far larger than its input).
fn is_join(plan: &dyn ExecutionPlan) -> bool {
    plan.is::<CrossJoinExec>()
        || plan.is::<NestedLoopJoinExec>()
        || plan.is::<HashJoinExec>()
        || plan.is::<SortMergeJoinExec>()
        || plan.is::<SymmetricHashJoinExec>()
}

impl PhysicalOptimizerRule for CooperativeJoins {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            if is_join(node.as_ref()) {
                Ok(Transformed::yes(
                    Arc::new(CooperativeExec::new(node)) as Arc<dyn ExecutionPlan>
                ))
            } else {
                Ok(Transformed::no(node))
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "CooperativeJoins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn joins_are_wrapped_and_answers_unchanged() {
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_default_features()
            .with_physical_optimizer_rule(Arc::new(CooperativeJoins))
            .build();
        let ctx = SessionContext::new_with_state(state);
        let sql = "SELECT SUM(a.x * b.y) FROM (VALUES (1), (2), (3)) a(x) \
                   CROSS JOIN (VALUES (10), (20)) b(y)";
        let df = ctx.sql(sql).await.unwrap();
        let plan = df.clone().create_physical_plan().await.unwrap();
        let text = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(false)
            .to_string();
        let coop = text.find("CooperativeExec").expect(&text);
        let join = text.find("CrossJoinExec").expect(&text);
        assert!(coop < join, "the join is under a CooperativeExec:\n{text}");
        let batches = df.collect().await.unwrap();
        let out = arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string();
        assert!(out.contains("| 180 "), "{out}");
    }
}
