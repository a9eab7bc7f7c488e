//! `httpAgentflow`: one HTTP request (its URL, headers, query and body
//! templated), the response read as JSON or text. Where it may go is the
//! netguard's to say when it runs.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::{HttpBody, HttpStep, StepKind};
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input, required};

pub struct HttpAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "httpAgentflow",
    category: Category::Step,
    inputs: &[
        input("method", InputKind::Text),
        required("url", InputKind::Text),
        input("headers", InputKind::Json),
        input("queryParams", InputKind::Json),
        input("bodyType", InputKind::Text),
        input("body", InputKind::Json),
        input("responseType", InputKind::Text),
        input("httpUpdateState", InputKind::Json),
    ],
};

impl Node for HttpAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let read = Read::new(node);
        let method = match read.text("method").to_ascii_uppercase().as_str() {
            "" | "GET" => reqwest::Method::GET,
            "POST" => reqwest::Method::POST,
            "PUT" => reqwest::Method::PUT,
            "PATCH" => reqwest::Method::PATCH,
            "DELETE" => reqwest::Method::DELETE,
            other => return Err(read.invalid(format_args!("uses an unknown method '{other}'"))),
        };
        let url = read.text("url");
        if url.trim().is_empty() {
            return Err(read.invalid("needs its 'url'"));
        }
        let body = match read.text("bodyType").as_str() {
            _ if method == reqwest::Method::GET => HttpBody::None,
            "" => HttpBody::None,
            "json" => HttpBody::Json(read.text("body")),
            "raw" => HttpBody::Raw(read.text("body")),
            "xWwwFormUrlencoded" => HttpBody::Form(read.pairs("body", "key", "value")?),
            other => {
                return Err(read.invalid(format_args!(
                    "sends a body of type '{other}', which weir does not support (json, raw or \
                     xWwwFormUrlencoded)"
                )));
            }
        };
        let response_json = match read.text("responseType").as_str() {
            "" | "json" => true,
            "text" => false,
            other => {
                return Err(read.invalid(format_args!(
                    "reads a response of type '{other}', which weir does not support (json or text)"
                )));
            }
        };
        step(StepKind::Http(HttpStep {
            method,
            url,
            headers: read.pairs("headers", "key", "value")?,
            query: read.pairs("queryParams", "key", "value")?,
            body,
            response_json,
            update_state: read.update_state("http")?,
        }))
    }
}
