//! The CSV agent (Flowise's `csvAgent`), in three steps: the Python runtime
//! reads the CSV with pandas and reports its columns' types; the model writes
//! pandas code answering the question from them (Flowise's prompt); the
//! runtime runs that code — in the workspace's isolated runtime, with its
//! limits, never in the server — and the value of its last expression is the
//! answer, which the model then words (streamed). Code that fails is the
//! node's failure (a 500 naming the code), as in Flowise.

use base64::Engine;
use serde_json::{Map, Value};

use crate::flow::FlowError;
use crate::flow::component::{CsvAgentSpec, PythonDefinition};
use crate::flow::runtime::{
    FlowEvent, RunContext, RunError, RunInput, RunOutput, Tokens, model_step,
};
use crate::llm::{ChatMessage, ChatRequest, Role};

/// Flowise's prompt asking for the pandas code.
const CODE_PROMPT: &str = "You are working with a pandas dataframe in Python. The name of the \
dataframe is df.

The columns and data types of a dataframe are given below as a Python dictionary with keys \
showing column names and values showing the data types.
{dict}

I will ask question, and you will output the Python code using pandas dataframe to answer my \
question. Do not provide any explanations. Do not respond with anything except the output of the \
code.

Question: {question}
Output Code:";

/// Flowise's prompt wording the answer.
const ANSWER_PROMPT: &str = "You are given the question: {question}. You have an answer to the \
question: {answer}. Rephrase the answer into a standalone answer.
Standalone Answer:";

/// Seconds each of the two Python runs may take.
const PYTHON_TIMEOUT_SECS: f64 = 60.0;

/// Marks a run that succeeded (the runtime reports failures as `Error: …`).
const OK: &str = "OK:";

pub async fn run<E: From<FlowEvent>>(
    spec: &CsvAgentSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    let failed = |why: String| {
        RunError::Flow(FlowError::failed(format!(
            "node {} (csvAgent) {why}",
            spec.node_id
        )))
    };
    let csv = base64::engine::general_purpose::STANDARD.encode(&spec.csv);
    let columns = python(
        ctx,
        &read(
            spec,
            "result = OK + json.dumps(df.dtypes.astype(str).to_dict())",
        ),
        &csv,
        "",
    )
    .await
    .map_err(|why| failed(format!("cannot read its CSV with pandas: {why}")))?;

    let model = ctx.model(&spec.model).await?;
    let ask = CODE_PROMPT
        .replace("{dict}", &columns)
        .replace("{question}", &input.question);
    let request = ChatRequest::text(
        vec![ChatMessage::new(Role::User, ask)],
        spec.model.params.clone(),
    );
    let written = model_step::<E>(&spec.model, &*model, request, None, false, &ctx.ledger)
        .await?
        .text;
    let code = strip_fences(&written);
    if code.trim().is_empty() {
        return Ok(RunOutput {
            text: written,
            ..RunOutput::default()
        });
    }
    let answer = python(ctx, &read(spec, EVALUATE), &csv, code)
        .await
        .map_err(|why| {
            failed(format!(
                "cannot answer \"{}\" with the code \"{code}\": {why}",
                input.question
            ))
        })?;
    if answer.is_empty() {
        return Ok(RunOutput {
            text: code.to_owned(),
            ..RunOutput::default()
        });
    }
    let prompt = ANSWER_PROMPT
        .replace("{question}", &input.question)
        .replace("{answer}", &answer);
    let prompt = if spec.system_message.trim().is_empty() {
        prompt
    } else {
        format!("{}\n{prompt}", spec.system_message)
    };
    let request = ChatRequest::text(
        vec![ChatMessage::new(Role::User, prompt)],
        spec.model.params.clone(),
    );
    let text = model_step(
        &spec.model,
        &*model,
        request,
        Some(tokens),
        false,
        &ctx.ledger,
    )
    .await?
    .text;
    Ok(RunOutput {
        text,
        ..RunOutput::default()
    })
}

/// Runs the model's code after the frame is read; the value of its last
/// expression (if it ends with one) is the answer.
const EVALUATE: &str = r#"import ast
__tree = ast.parse(CODE)
__last = __tree.body.pop() if __tree.body and isinstance(__tree.body[-1], ast.Expr) else None
exec(compile(__tree, "<answer>", "exec"))
result = OK + (str(eval(compile(ast.Expression(__last.value), "<answer>", "eval"))) if __last is not None else "")"#;

/// The Python of one run: the CSV read into `df` with the node's pandas call,
/// then `then`. The CSV and the code come as the runtime's template values
/// (Python literals, never code).
fn read(spec: &CsvAgentSpec, then: &str) -> String {
    format!(
        "import base64\nimport io\nimport json\nimport pandas as pd\n\
         OK = {OK:?}\nCODE = {{{{$code}}}}\n\
         csv_data = io.StringIO(base64.b64decode({{{{$csv}}}}).decode(\"utf-8\"))\n\
         df = pd.{}\n{then}\n",
        spec.read_csv
    )
}

/// One run in the Python runtime; its result without the success mark, or why
/// it failed.
async fn python(
    ctx: &RunContext<'_>,
    code: &str,
    csv: &str,
    model_code: &str,
) -> Result<String, String> {
    let tool = PythonDefinition {
        name: "csv_agent".into(),
        description: "Reads a CSV with pandas".into(),
        schema: Vec::new(),
        code: code.to_owned(),
        requirements: vec!["pandas".into()],
        javascript: false,
    };
    let mut arguments = Map::new();
    arguments.insert("csv".into(), Value::from(csv));
    arguments.insert("code".into(), Value::from(model_code));
    let outcome = ctx
        .tools
        .runtime
        .execute(
            &tool,
            arguments,
            Some(PYTHON_TIMEOUT_SECS),
            &ctx.env,
            &ctx.flow,
        )
        .await;
    match outcome.output.strip_prefix(OK) {
        Some(result) => Ok(result.to_owned()),
        None => Err(outcome
            .output
            .strip_prefix("Error: ")
            .unwrap_or(&outcome.output)
            .to_owned()),
    }
}

/// The code inside the first Markdown fence a model put it in (words around
/// it dropped), or the whole text.
fn strip_fences(text: &str) -> &str {
    let text = text.trim();
    let Some(start) = text.find("```") else {
        return text;
    };
    let rest = &text[start + 3..];
    let rest = rest.split_once('\n').map_or("", |(_, body)| body);
    rest.find("```").map_or(rest, |end| &rest[..end]).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_taken_off() {
        assert_eq!(strip_fences("```python\nlen(df)\n```"), "len(df)");
        assert_eq!(strip_fences("len(df)"), "len(df)");
        assert_eq!(strip_fences("```\ndf.head()\n```"), "df.head()");
        assert_eq!(
            strip_fences("Here:\n```python\nlen(df)\n```\nThat counts rows."),
            "len(df)"
        );
    }

    #[test]
    fn the_frame_is_read_before_the_code() {
        let spec = CsvAgentSpec {
            node_id: "c".into(),
            model: crate::flow::component::ModelSpec {
                node_id: "m".into(),
                node_type: "chatOpenAI",
                provider: crate::flow::component::Provider::Local,
                params: Default::default(),
            },
            csv: bytes::Bytes::from_static(b"a\n1\n"),
            system_message: String::new(),
            read_csv: "read_csv(csv_data)".into(),
        };
        let code = read(&spec, "result = 1");
        assert!(code.contains("CODE = {{$code}}\n"));
        assert!(code.contains("base64.b64decode({{$csv}})"));
        assert!(code.contains("df = pd.read_csv(csv_data)\nresult = 1\n"));
    }
}
