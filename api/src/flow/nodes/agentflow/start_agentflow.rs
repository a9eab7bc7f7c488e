//! `startAgentflow`: where an agentflow begins — from a chat, a form, a
//! schedule or a webhook (their triggers ask as a chat or a form would) — and
//! the flow state every run starts with.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::{Start, StepKind};
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input};

pub struct StartAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "startAgentflow",
    category: Category::Step,
    inputs: &[
        input("startInputType", InputKind::Text),
        input("formTitle", InputKind::Text),
        input("formDescription", InputKind::Text),
        input("formInputTypes", InputKind::Json),
        input("startState", InputKind::Json),
        input("startPersistState", InputKind::Boolean),
        input("startEphemeralMemory", InputKind::Boolean),
        // A schedule start (read by `services::triggers::start_node`).
        input("scheduleType", InputKind::Text),
        input("scheduleCronExpression", InputKind::Text),
        input("scheduleFrequency", InputKind::Text),
        input("scheduleOnMinute", InputKind::Integer),
        input("scheduleOnTime", InputKind::Text),
        input("scheduleOnDayOfWeek", InputKind::Text),
        input("scheduleOnDayOfMonth", InputKind::Text),
        input("scheduleEndDate", InputKind::Text),
        input("scheduleTimezone", InputKind::Text),
        input("scheduleInputMode", InputKind::Text),
        input("scheduleDefaultInput", InputKind::Text),
        input("scheduleFormInputTypes", InputKind::Json),
        input("scheduleFormDefaults", InputKind::Json),
        // A webhook start (read by `services::triggers::start_webhook`).
        input("webhookMethod", InputKind::Text),
        input("webhookContentType", InputKind::Text),
        input("webhookURL", InputKind::Ignored),
        input("webhookInputMode", InputKind::Text),
        input("webhookDefaultInput", InputKind::Text),
        input("webhookEnableAuth", InputKind::Boolean),
        input("webhookSecret", InputKind::Ignored),
        input("webhookSignatureHeader", InputKind::Text),
        input("webhookSignatureType", InputKind::Text),
        input("webhookResponseMode", InputKind::Text),
        input("callbackUrl", InputKind::Text),
        input("callbackSecret", InputKind::Text),
        input("webhookEnableValidation", InputKind::Boolean),
        input("webhookQueryParams", InputKind::Json),
        input("webhookBodyParams", InputKind::Json),
        input("webhookHeaderParams", InputKind::Json),
    ],
};

impl Node for StartAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let read = Read::new(node);
        let form_input = match read.text("startInputType").as_str() {
            // A schedule's or a webhook's trigger asks its question (or fills
            // its form) as a chat or a form would (`services::triggers`).
            "" | "chatInput" | "scheduleInput" | "webhookTrigger" => false,
            "formInput" => true,
            other => {
                return Err(read.invalid(format_args!(
                    "starts on '{other}'; weir starts agentflows from a chat or a form \
                     (its triggers call them by cron or webhook)"
                )));
            }
        };
        step(StepKind::Start(Start {
            form_input,
            state: read.pairs("startState", "key", "value")?,
            persist_state: read.flag("startPersistState"),
            ephemeral_memory: read.flag("startEphemeralMemory"),
        }))
    }
}
