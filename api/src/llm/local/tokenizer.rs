//! The local model's tokenizer, built from the vocabulary inside the GGUF file,
//! and the streaming decoder that turns generated ids back into UTF-8 text.
//!
//! SmolLM2 is a byte-level BPE (GPT-2 style) whose GGUF names its pre-tokenizer
//! `smollm`: digits are split one by one, then the GPT-2 regex splits words,
//! with no prefix space. Generic GGUF helpers fall back to plain GPT-2 and give
//! wrong ids (`system` becomes 817 instead of 9690), so [`Tokenizer::from_vocab`]
//! builds the pipeline explicitly with the `tokenizers` crate. Control tokens
//! (`<|im_start|>` …) are never produced from text: the chat template inserts
//! them by id, so a user who types `<|im_end|>` gets ordinary text tokens.
//! Decoding does not go through `tokenizers`: each id maps to its bytes once, at
//! load, and [`TokenDecoder`] releases text only when it is valid UTF-8.

use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;

use crate::llm::LlmError;

/// GGUF `tokenizer.ggml.token_type` of a control token (`<|im_end|>` …).
const TOKEN_TYPE_CONTROL: i32 = 3;

pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// The bytes each id stands for (empty for control tokens).
    bytes: Vec<Vec<u8>>,
    tokens: Vec<String>,
}

impl Tokenizer {
    /// Builds the tokenizer from the GGUF's `tokens`, `token_type` and `merges`
    /// (`"a b"` pairs) arrays.
    pub fn from_vocab(
        tokens: Vec<String>,
        token_types: &[i32],
        merges: &[String],
    ) -> Result<Self, LlmError> {
        let vocab: tokenizers::models::bpe::Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let merges = merges
            .iter()
            .map(|m| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| LlmError::new(format!("model file has a malformed merge {m:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| LlmError::new(format!("cannot build the model's tokenizer: {e}")))?;
        let mut inner = tokenizers::Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(Sequence::new(vec![
            Digits::new(true).into(),
            ByteLevel::new(false, true, true).into(),
        ])));

        let unicode_to_byte = unicode_to_byte();
        let bytes = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if token_types.get(i) == Some(&TOKEN_TYPE_CONTROL) {
                    return Vec::new();
                }
                let mut out = Vec::with_capacity(t.len());
                for c in t.chars() {
                    match unicode_to_byte.get(&c) {
                        Some(&b) => out.push(b),
                        // Not a byte-level character: keep the text as written.
                        None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                    }
                }
                out
            })
            .collect();
        Ok(Tokenizer {
            inner,
            bytes,
            tokens,
        })
    }

    /// The ids of `text`, treating everything as plain text.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LlmError> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| LlmError::new(format!("cannot tokenize the prompt: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The id of a token written exactly as in the vocabulary (`<|im_end|>`).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.tokens
            .iter()
            .position(|t| t == token)
            .map(|i| i as u32)
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The bytes of `id` (empty for control tokens and unknown ids).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.bytes
            .get(id as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Decodes a whole sequence (invalid UTF-8 becomes U+FFFD).
    #[cfg(test)]
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.token_bytes(id).iter().copied())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// GPT-2's byte-level alphabet, inverted: the printable character standing for
/// each byte → the byte.
fn unicode_to_byte() -> std::collections::HashMap<char, u8> {
    let mut map = std::collections::HashMap::with_capacity(256);
    let mut next = 256u32;
    for b in 0u32..=255 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let c = if printable {
            b
        } else {
            let c = next;
            next += 1;
            c
        };
        if let Some(c) = char::from_u32(c) {
            map.insert(c, b as u8);
        }
    }
    map
}

/// Turns generated ids into text pieces, holding back the bytes of a character
/// split across tokens until it is complete.
#[derive(Default)]
pub struct TokenDecoder {
    pending: Vec<u8>,
}

impl TokenDecoder {
    /// Adds one token's bytes; returns the text that is now complete (possibly
    /// empty).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // An incomplete character at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        // Bytes that can never be valid: replace and go on.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// What is left at the end of generation (an incomplete character becomes
    /// U+FFFD).
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_alphabet_covers_every_byte() {
        let map = unicode_to_byte();
        assert_eq!(map.len(), 256);
        assert_eq!(map[&'Ġ'], b' ');
        assert_eq!(map[&'Ċ'], b'\n');
        assert_eq!(map[&'a'], b'a');
    }

    #[test]
    fn decoder_holds_back_split_characters() {
        let mut d = TokenDecoder::default();
        let smile = "🙂".as_bytes();
        assert_eq!(d.push(b"hi "), "hi ");
        assert_eq!(d.push(&smile[..1]), "");
        assert_eq!(d.push(&smile[1..3]), "");
        assert_eq!(d.push(&[smile[3], b'!']), "🙂!");
        assert_eq!(d.push(&[0xff, b'x']), "\u{fffd}x");
        assert_eq!(d.push(&smile[..2]), "");
        assert_eq!(d.finish(), "\u{fffd}");
        assert_eq!(d.finish(), "");
    }

    #[test]
    fn tiny_vocab_splits_digits_and_merges_words() {
        // A vocabulary of single byte-level characters plus a few merges.
        let mut tokens: Vec<String> = vec!["<|im_end|>".into()];
        for c in ["h", "i", "Ġ", "1", "2", "hi", "Ġh", "Ġhi", "12"] {
            tokens.push(c.into());
        }
        let types: Vec<i32> = tokens
            .iter()
            .map(|t| if t.starts_with("<|") { 3 } else { 1 })
            .collect();
        let merges = vec!["Ġ h".to_string(), "Ġh i".into(), "h i".into(), "1 2".into()];
        let tok = Tokenizer::from_vocab(tokens.clone(), &types, &merges).unwrap();
        let id = |t: &str| tok.token_id(t).unwrap();
        // Digits are split one by one even though "12" is a merge.
        assert_eq!(
            tok.encode("hi hi12").unwrap(),
            vec![id("hi"), id("Ġhi"), id("1"), id("2")]
        );
        assert_eq!(tok.decode(&tok.encode("hi hi12").unwrap()), "hi hi12");
        // Control tokens decode to nothing.
        assert_eq!(tok.decode(&[0, id("hi")]), "hi");
        assert_eq!(tok.vocab_size(), 10);
    }
}
