//! `sqlDatabaseChain`: LangChain's SQL database chain. The model writes one
//! query for the question from the tables' description, weir runs it read
//! only (see [`crate::flow::tools::sql`]), and the model answers from its rows.
//! SQLite (a file in `SQL_DATABASE_DIR`) and PostgreSQL; MySQL and SQL Server
//! are a 400.

use super::{AGENT_IGNORED, K};
use crate::flow::FlowError;
use crate::flow::component::{Component, SqlChainSpec, SqlDatabase, TableFilter};
use crate::flow::node::{
    Build, Category, InputSpec, Node, NodeSpec, concat, input, required, sensitive,
};

pub struct SqlDatabaseChain;

/// LangChain's default `sampleRowsInTableInfo` and `topK`.
const SAMPLE_ROWS: u32 = 3;
const TOP_K: u32 = 5;

const INPUTS: [InputSpec; 9] = concat(
    [
        required("model", K::Anchor(Category::ChatModel)),
        input("database", K::Text),
        // A connection URL holds a password: never from a request.
        InputSpec {
            required: true,
            ..sensitive("url", K::Text)
        },
        input("includesTables", K::Text),
        input("ignoreTables", K::Text),
        input("sampleRowsInTableInfo", K::Integer),
        input("topK", K::Integer),
        input("customPrompt", K::Text),
    ],
    [AGENT_IGNORED[0]],
);

static SPEC: NodeSpec = NodeSpec {
    name: "sqlDatabaseChain",
    category: Category::Chain,
    inputs: &INPUTS,
};

impl Node for SqlDatabaseChain {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let url = node.text("url").unwrap_or_default().to_owned();
        let database = match node.text("database").unwrap_or("sqlite") {
            "sqlite" => SqlDatabase::Sqlite(url),
            "postgres" => SqlDatabase::Postgres(url),
            other => {
                return Err(node.invalid(format_args!(
                    "reads a '{other}' database; weir reads sqlite and postgres"
                )));
            }
        };
        let list = |name: &str| -> Vec<String> {
            node.text(name)
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let tables = TableFilter {
            include: list("includesTables"),
            ignore: list("ignoreTables"),
            sample_rows: node
                .integer("sampleRowsInTableInfo")?
                .map_or(SAMPLE_ROWS, |n| {
                    u32::try_from(n).unwrap_or(u32::MAX).min(100)
                }),
        };
        if !tables.include.is_empty() && !tables.ignore.is_empty() {
            return Err(node.invalid("names both includesTables and ignoreTables; name one"));
        }
        let prompt = node.text("customPrompt").map(str::to_owned);
        if let Some(prompt) = &prompt
            && !["{input}", "{dialect}", "{table_info}"]
                .iter()
                .all(|v| prompt.contains(v))
        {
            return Err(node.invalid(
                "has a customPrompt without {input}, {dialect} and {table_info}, which it must hold",
            ));
        }
        Ok(Component::SqlChain(SqlChainSpec {
            node_id: node.id().to_owned(),
            model: node.required_model("model")?,
            database,
            tables,
            top_k: node.count("topK", TOP_K, 1000)?,
            prompt,
        }))
    }
}
