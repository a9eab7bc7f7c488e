//! Chains that answer over a vector store's chunks, as Flowise's do:
//!
//! - `retrievalQAChain`: the question finds the chunks; one user message holds
//!   them and the question (LangChain's "stuff" QA prompt).
//! - `conversationalRetrievalQAChain`: with history, the model first rephrases
//!   the question to stand alone (`rephrasePrompt`) and that finds the chunks;
//!   the answer's system message is `responsePrompt` with the chunks, then the
//!   history, then the question as asked.
//!
//! The chunks become the answer's `sourceDocuments` (for the conversational
//! chain unless `returnSourceDocuments` is false).

use crate::flow::component::{RetrievalChainSpec, RetrievalKind};
use crate::flow::prompt::QA_PROMPT;
use crate::flow::runtime::{
    FlowEvent, RunContext, RunError, RunInput, RunOutput, Tokens, model_step,
};
use crate::flow::tools::retriever::context;
use crate::llm::{ChatMessage, ChatRequest, Role};

pub async fn run<E: From<FlowEvent>>(
    chain: &RetrievalChainSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    let spec = &chain.model;
    let model = ctx.model(spec).await?;
    let retriever = &*ctx.tools.retriever;
    let (messages, sources) = match chain.kind {
        RetrievalKind::Qa | RetrievalKind::Query => {
            let documents = retriever
                .retrieve(&chain.store, &input.question, &ctx.flow)
                .await?;
            let (template, keep_sources) = if chain.kind == RetrievalKind::Qa {
                (QA_PROMPT, true)
            } else {
                (chain.response_prompt.as_str(), chain.return_sources)
            };
            let prompt = fill(
                template,
                &[
                    ("context", &context(&documents)),
                    ("question", &input.question),
                ],
            );
            let sources = if keep_sources { documents } else { Vec::new() };
            (vec![ChatMessage::new(Role::User, prompt)], sources)
        }
        RetrievalKind::Conversational | RetrievalKind::Context => {
            // A context chat engine searches with the message as it is.
            let query = if input.history.is_empty() || chain.kind == RetrievalKind::Context {
                input.question.clone()
            } else {
                let prompt = fill(
                    &chain.rephrase_prompt,
                    &[
                        ("chat_history", &input.history_text()),
                        ("question", &input.question),
                    ],
                );
                let request = ChatRequest::text(
                    vec![ChatMessage::new(Role::User, prompt)],
                    spec.params.clone(),
                );
                let standalone = model_step::<E>(spec, &*model, request, None, false, &ctx.ledger)
                    .await?
                    .text;
                match standalone.trim() {
                    "" => input.question.clone(),
                    text => text.to_owned(),
                }
            };
            let documents = retriever.retrieve(&chain.store, &query, &ctx.flow).await?;
            let system = fill(
                &chain.response_prompt,
                &[
                    ("context", &context(&documents)),
                    ("question", &input.question),
                    ("chat_history", &input.history_text()),
                ],
            );
            let mut messages = Vec::with_capacity(input.history.len() + 2);
            messages.push(ChatMessage::new(Role::System, system));
            messages.extend(input.history.iter().cloned());
            messages.push(input.question_turn());
            let sources = if chain.return_sources {
                documents
            } else {
                Vec::new()
            };
            (messages, sources)
        }
    };
    let request = ChatRequest::text(messages, spec.params.clone());
    let text = model_step(spec, &*model, request, Some(tokens), false, &ctx.ledger)
        .await?
        .text;
    Ok(RunOutput {
        text,
        source_documents: sources,
        ..RunOutput::default()
    })
}

/// Fills `{name}` placeholders in one pass (a filled-in chunk that happens to
/// hold `{question}` stays as it is); other braces are left alone.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out =
        String::with_capacity(template.len() + values.iter().map(|v| v.1.len()).sum::<usize>());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let known = after.find('}').and_then(|close| {
            let name = &after[..close];
            values
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (close, *v))
        });
        match known {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_is_one_pass() {
        let out = fill(
            "ctx: {context} / q: {question} / {other}",
            &[("context", "a {question} b"), ("question", "why?")],
        );
        assert_eq!(out, "ctx: a {question} b / q: why? / {other}");
    }
}
