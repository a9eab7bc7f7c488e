//! `sqlDatabaseChain` run as LangChain's `SqlDatabaseChain`: the tables are
//! described, the model completes `<question>\nSQLQuery:` with one query
//! (cut at `\nSQLResult:`), weir runs it read only, and the model completes
//! the same prompt carried on with `<query>\nSQLResult: <rows as JSON>\nAnswer:`
//! — that second completion, streamed, is the answer. The query and its rows
//! are also the answer's one `usedTools` item (`sql_db_query`), so a client
//! sees what was asked of its database.

use serde_json::{Map, Value, json};

use crate::flow::FlowError;
use crate::flow::component::SqlChainSpec;
use crate::flow::prompt;
use crate::flow::runtime::{
    FlowEvent, RunContext, RunError, RunInput, RunOutput, Tokens, model_step,
};
use crate::llm::{ChatMessage, ChatRequest, Role};

/// LangChain's prompt for a dialect (`SQL_SQLITE_PROMPT`, `SQL_POSTGRES_PROMPT`).
fn default_prompt(dialect: &str) -> String {
    let name = if dialect == "postgres" {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    format!(
        "You are a {name} expert. Given an input question, first create a syntactically \
         correct {name} query to run, then look at the results of the query and return the \
         answer to the input question.\nUnless the user specifies in the question a specific \
         number of examples to obtain, query for at most {{top_k}} results using the LIMIT \
         clause as per {name}. You can order the results to return the most informative data \
         in the database.\nNever query for all columns from a table. You must query only the \
         columns that are needed to answer the question. Wrap each column name in double \
         quotes (\") to denote them as delimited identifiers.\nPay attention to use only the \
         column names you can see in the tables below. Be careful to not query for columns \
         that do not exist. Also, pay attention to which column is in which table.\n\nUse the \
         following format:\n\nQuestion: \"Question here\"\nSQLQuery: \"SQL Query to run\"\n\
         SQLResult: \"Result of the SQLQuery\"\nAnswer: \"Final answer here\"\n\nOnly use the \
         following tables:\n{{table_info}}\n\nQuestion: {{input}}"
    )
}

pub async fn run<E: From<FlowEvent>>(
    spec: &SqlChainSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    let failed = |why: String| {
        RunError::Flow(FlowError::failed(format!(
            "node {} (sqlDatabaseChain) failed: {why}",
            spec.node_id
        )))
    };
    let sql = &ctx.tools.sql;
    let connection = sql.open(&spec.database).await.map_err(failed)?;
    let table_info = sql
        .table_info(&connection, &spec.tables)
        .await
        .map_err(failed)?;
    let dialect = spec.database.dialect();
    let template = spec
        .prompt
        .clone()
        .unwrap_or_else(|| default_prompt(dialect));
    let mut values = Map::with_capacity(4);
    values.insert("top_k".into(), Value::from(spec.top_k.to_string()));
    values.insert("dialect".into(), Value::from(dialect));
    values.insert("table_info".into(), Value::from(table_info));
    let mut carried = format!("{}\nSQLQuery:", input.question);
    let model = ctx.model(&spec.model).await?;
    let ask = |carried: &str| {
        let mut values = values.clone();
        values.insert("input".into(), Value::from(carried));
        let text = prompt::format(&template, &values, &input.question, "", &Map::new());
        ChatRequest::text(
            vec![ChatMessage::new(Role::User, text)],
            spec.model.params.clone(),
        )
    };
    let written = model_step::<E>(
        &spec.model,
        &*model,
        ask(&carried),
        None,
        false,
        &ctx.ledger,
    )
    .await?
    .text;
    let query = query_of(&written);
    let result = match sql.query(&connection, &query).await {
        Ok(rows) => serde_json::to_string(&rows).unwrap_or_default(),
        Err(why) => format!("Error: {why}"),
    };
    carried.push_str(&query);
    carried.push_str("\nSQLResult: ");
    carried.push_str(&result);
    carried.push_str("\nAnswer:");
    let answer = model_step(
        &spec.model,
        &*model,
        ask(&carried),
        Some(tokens),
        false,
        &ctx.ledger,
    )
    .await?
    .text;
    Ok(RunOutput {
        text: answer.trim().to_owned(),
        used_tools: vec![json!({
            "tool": "sql_db_query",
            "toolInput": {"query": query},
            "toolOutput": result,
        })],
        ..RunOutput::default()
    })
}

/// The query in what the model wrote: up to a `SQLResult:` line it may have
/// gone on to, without a Markdown fence, a `SQLQuery:` label or quotes
/// around it (the prompt's format shows it quoted).
fn query_of(written: &str) -> String {
    let cut = written
        .split("SQLResult:")
        .next()
        .unwrap_or_default()
        .trim();
    let cut = cut.strip_prefix("SQLQuery:").unwrap_or(cut).trim();
    let unfenced = cut
        .strip_prefix("```sql")
        .or_else(|| cut.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .unwrap_or(cut)
        .trim();
    let unquoted = unfenced
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or(unfenced);
    unquoted.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::query_of;

    #[test]
    fn the_query_is_read_out_of_what_the_model_wrote() {
        assert_eq!(query_of(" SELECT 1\nSQLResult: [1]"), "SELECT 1");
        assert_eq!(
            query_of("```sql\nSELECT \"a\" FROM t\n```"),
            "SELECT \"a\" FROM t"
        );
        assert_eq!(query_of("SQLQuery: \"SELECT 2\""), "SELECT 2");
        assert_eq!(
            query_of("SELECT \"name\" FROM \"t\""),
            "SELECT \"name\" FROM \"t\""
        );
    }
}
