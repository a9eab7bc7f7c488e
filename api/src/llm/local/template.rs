//! SmolLM2's chat template (ChatML), rendered as pieces rather than one string.
//!
//! The GGUF's Jinja template wraps each message as
//! `<|im_start|>{role}\n{content}<|im_end|>\n`, puts a default system turn first
//! when the conversation has none, and ends with `<|im_start|>assistant\n` for the
//! model to continue. [`render`] produces the same sequence, but keeps the control
//! tokens apart from the text so that they are inserted by id and a message can
//! never smuggle one in as text. [`to_text`] joins the pieces into the string the
//! Jinja template would print (for tests and debugging).

use crate::llm::{ChatMessage, Role};

/// The system prompt SmolLM2 was trained with, used when none is given.
pub const DEFAULT_SYSTEM_PROMPT: &str =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// One part of a rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// `<|im_start|>`
    Start,
    /// `<|im_end|>`
    End,
    /// Plain text, tokenized as such.
    Text(String),
}

/// The prompt for `messages`, ready for the assistant's answer.
pub fn render(messages: &[ChatMessage]) -> Vec<Piece> {
    let mut pieces = Vec::with_capacity(messages.len() * 4 + 6);
    let mut turn = |role: &str, content: &str| {
        pieces.push(Piece::Start);
        pieces.push(Piece::Text(format!("{role}\n{content}")));
        pieces.push(Piece::End);
        pieces.push(Piece::Text("\n".to_string()));
    };
    if messages.first().is_some_and(|m| m.role != Role::System) {
        turn(Role::System.as_str(), DEFAULT_SYSTEM_PROMPT);
    }
    for m in messages {
        turn(m.role.as_str(), &m.content);
    }
    pieces.push(Piece::Start);
    pieces.push(Piece::Text("assistant\n".to_string()));
    pieces
}

/// The pieces as the text the GGUF's Jinja template prints.
#[cfg(test)]
pub fn to_text(pieces: &[Piece]) -> String {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Start => "<|im_start|>",
            Piece::End => "<|im_end|>",
            Piece::Text(t) => t.as_str(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_system_turn_is_added_when_missing() {
        let text = to_text(&render(&[ChatMessage::new(Role::User, "Hi")]));
        assert_eq!(
            text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
             <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn given_system_prompt_and_history_are_kept_in_order() {
        let text = to_text(&render(&[
            ChatMessage::new(Role::System, "Be brief."),
            ChatMessage::new(Role::User, "2+2?"),
            ChatMessage::new(Role::Assistant, "4"),
            ChatMessage::new(Role::User, "and 3+3?"),
        ]));
        assert_eq!(
            text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n\
             <|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\nand 3+3?<|im_end|>\n\
             <|im_start|>assistant\n"
        );
    }

    #[test]
    fn control_tokens_in_content_stay_text() {
        let pieces = render(&[ChatMessage::new(Role::User, "<|im_end|>")]);
        let ends = pieces.iter().filter(|p| **p == Piece::End).count();
        assert_eq!(
            ends, 2,
            "only the template's own turn ends are control pieces"
        );
        assert!(pieces.contains(&Piece::Text("user\n<|im_end|>".into())));
    }
}
