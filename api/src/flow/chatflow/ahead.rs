//! The steps ahead of a chatflow's answer ([`StepAhead`]): `customFunction`
//! nodes and chained `llmChain` predictions whose results other nodes read.
//! They run one after the other in the plan's order, each seeing the results
//! of those before it, and nothing of theirs streams: only the answer does.

use std::collections::HashMap;

use crate::flow::plan::{StepAhead, fill_chain};
use crate::flow::runtime::{RunContext, RunError, RunInput};

use super::{chain, function};

/// Runs the steps in order: their results (as text) by node id.
pub async fn results(
    steps: &[StepAhead],
    input: &RunInput,
    ctx: &RunContext<'_>,
) -> Result<HashMap<String, String>, RunError> {
    let mut results = HashMap::with_capacity(steps.len());
    for step in steps {
        let text = match step {
            StepAhead::Function(spec) => function::result(spec, input, ctx, &results).await?,
            StepAhead::Chain(spec) if results.is_empty() => {
                chain::prediction(spec, input, ctx).await?
            }
            StepAhead::Chain(spec) => {
                let mut filled = (**spec).clone();
                fill_chain(&mut filled, &results);
                chain::prediction(&filled, input, ctx).await?
            }
        };
        results.insert(step.node_id().to_owned(), text);
    }
    Ok(results)
}
