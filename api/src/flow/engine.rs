//! The one place that knows every run kind: a request's question goes through
//! the flow's moderation, then to the chatflow runner or the agentflow executor
//! its plan names. Tokens go to the caller's channel as they come.

use tokio::sync::mpsc;

use super::plan::{Answer, Runnable};
use super::runtime::{FlowEvent, RunContext, RunError, RunInput, RunOutput, Tokens, model_step};
use super::{agentflow, chatflow};
use crate::llm::{ChatMessage, ChatRequest, Role};

/// Runs the flow. Tokens go to `events` as they come, converted into the
/// caller's own event type (no relay between channels).
pub async fn run<E: From<FlowEvent> + Send>(
    runnable: &Runnable,
    input: &RunInput,
    ctx: &RunContext<'_>,
    events: &mpsc::Sender<E>,
) -> Result<RunOutput, RunError> {
    let tokens = Tokens::new(events, ctx.transcript);
    let mut output = answer(runnable, input, ctx, &tokens).await?;
    output.tokens_streamed = tokens.sent();
    output.usage = ctx.ledger.take_usage();
    output.thinking = ctx.ledger.take_thinking();
    Ok(output)
}

async fn answer<E: From<FlowEvent> + Send>(
    runnable: &Runnable,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    if let Some(denied) = moderate(runnable, input, ctx).await? {
        tokens.send(denied.clone()).await?;
        return Ok(RunOutput {
            text: denied,
            ..RunOutput::default()
        });
    }
    let filled;
    let runnable = if runnable.ahead.is_empty() {
        runnable
    } else {
        let results = chatflow::ahead::results(&runnable.ahead, input, ctx).await?;
        filled = runnable.with_results(&results);
        &filled
    };
    match &runnable.answer {
        Answer::Function(function) => chatflow::function::run(function, input, ctx, tokens).await,
        Answer::SqlChain(chain) => chatflow::sql_chain::run(chain, input, ctx, tokens).await,
        Answer::Chain(chain) => chatflow::chain::run(chain, input, ctx, tokens).await,
        Answer::Agent(spec) => chatflow::agent::run(spec, input, ctx, tokens).await,
        Answer::MultiAgent {
            supervisor,
            workers,
        } => chatflow::multiagent::run(supervisor, workers, input, ctx, tokens).await,
        Answer::Sequential(spec) => chatflow::sequential::run(spec, input, ctx, tokens).await,
        Answer::Retrieval(chain) => chatflow::retrieval::run(chain, input, ctx, tokens).await,
        Answer::Agentflow(flow) => agentflow::exec::run(flow, input, ctx, tokens).await,
        Answer::CsvAgent(spec) => chatflow::csv_agent::run(spec, input, ctx, tokens).await,
    }
}

/// The answer to a question the flow's moderation denies (Flowise answers it
/// as the text, 200), or `None` when it passes.
async fn moderate(
    runnable: &Runnable,
    input: &RunInput,
    ctx: &RunContext<'_>,
) -> Result<Option<String>, RunError> {
    let question = input.question.to_lowercase();
    for check in &runnable.moderation {
        match &check.model {
            None => {
                if check
                    .deny
                    .iter()
                    .any(|entry| question.contains(&entry.to_lowercase()))
                {
                    return Ok(Some(check.message.clone()));
                }
            }
            Some(spec) => {
                let model = ctx.model(spec).await?;
                for entry in &check.deny {
                    let ask = format!(
                        "Are these two sentences similar to each other? Only return Yes or No.\n\
                         First sentence: {}\nSecond sentence: {entry}",
                        input.question
                    );
                    let request = ChatRequest::text(
                        vec![ChatMessage::new(Role::User, ask)],
                        spec.params.clone(),
                    );
                    let step =
                        model_step::<FlowEvent>(spec, &*model, request, None, false, &ctx.ledger)
                            .await?;
                    if step.text.to_lowercase().contains("yes") {
                        return Ok(Some(check.message.clone()));
                    }
                }
            }
        }
    }
    Ok(None)
}
