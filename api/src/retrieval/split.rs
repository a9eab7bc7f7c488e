//! Text splitters: a document's text → chunks, each chunk a [`Document`] with the
//! source document's metadata plus `metadata.loc.lines {from, to}`. This module
//! owns the four splitters Flowise offers (`recursiveCharacterTextSplitter`,
//! `characterTextSplitter`, `markdownTextSplitter`, `tokenTextSplitter`) as one
//! [`Splitter`] built from a [`SplitterKind`], a chunk size and an overlap; the
//! flow nodes only map their inputs onto it.
//!
//! Chunk boundaries are those of Python's `langchain-text-splitters` for the same
//! settings, so an index built by weir matches one built by LangChain: the same
//! separator search, `_merge_splits` with its overlap popping, the oversized
//! split kept whole (where LangChain logs "Created a chunk of size …"), and
//! `strip()` of every joined chunk. Length is Python's `len`, Unicode code points
//! (LangChain.js, which Flowise runs, counts UTF-16 units, so the two differ only
//! on text with characters outside the Basic Multilingual Plane, such as emoji).
//! `scripts/make-splitter-fixture` records LangChain's chunks for a corpus and the
//! tests below replay it.
//!
//! Two behaviours are copied on purpose although they look like bugs:
//! - Python's `MarkdownTextSplitter` passes its regex-looking separators
//!   (`"\n#{1,6} "`, `"\n\\*\\*\\*+\n"`, …) without `is_separator_regex`, so they
//!   are matched as literal text: a markdown document is in practice split at
//!   code-fence ends, blank lines, lines and spaces. Matching it is the point.
//! - `metadata.loc.lines` is computed as LangChain.js `createDocuments` does it:
//!   each chunk is looked up in the source text from just after the previous
//!   chunk's position, in UTF-16 units, and a chunk that is not found verbatim
//!   (a character splitter joining pieces with its separator across a run of
//!   separators, a token chunk cut inside a character) gets whatever line numbers
//!   that search yields there, exactly as Flowise would store them.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Map, Value};
use tiktoken_rs::{CoreBPE, Rank};

use super::Document;

/// Flowise's default chunk size for every splitter node.
pub const DEFAULT_CHUNK_SIZE: usize = 1000;
/// Flowise's default chunk overlap for every splitter node.
pub const DEFAULT_CHUNK_OVERLAP: usize = 200;
/// `characterTextSplitter`'s separator when the node leaves it empty.
pub const DEFAULT_CHARACTER_SEPARATOR: &str = "\n\n";
/// `tokenTextSplitter`'s encoding when the node leaves it empty.
pub const DEFAULT_TOKEN_ENCODING: &str = "gpt2";
/// The tiktoken encodings `tokenTextSplitter` offers (Flowise's option list).
pub const TOKEN_ENCODINGS: &[&str] =
    &["gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base"];

/// `RecursiveCharacterTextSplitter`'s separators when none (or an empty list)
/// are given: paragraphs, then lines, then words, then characters.
const DEFAULT_RECURSIVE_SEPARATORS: &[&str] = &["\n\n", "\n", " ", ""];

/// `RecursiveCharacterTextSplitter.get_separators_for_language(MARKDOWN)`,
/// character for character; matched literally (see the module docs).
const MARKDOWN_SEPARATORS: &[&str] = &[
    "\n#{1,6} ",
    "```\n",
    "\n\\*\\*\\*+\n",
    "\n---+\n",
    "\n___+\n",
    "\n\n",
    "\n",
    " ",
    "",
];

/// Which splitter, with the settings that are particular to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitterKind {
    /// Tries each separator in turn and splits pieces that are still too long
    /// with the next ones. `None` (or an empty list) means `["\n\n", "\n", " ", ""]`.
    /// Separators are literal text, kept at the start of the piece they precede.
    RecursiveCharacter { separators: Option<Vec<String>> },
    /// Splits on one literal separator (dropped, and put back between merged
    /// pieces); the empty separator splits into characters.
    Character { separator: String },
    /// The recursive splitter with LangChain's markdown separators.
    Markdown,
    /// Cuts the tiktoken token sequence into windows of `chunk_size` tokens
    /// overlapping by `chunk_overlap`, each decoded back to text.
    Token { encoding: String },
}

/// A configured splitter; cheap to clone, immutable, usable from any thread.
/// Splitting is CPU work proportional to the text (the token splitter's first
/// use of an encoding also parses its rank table, about a tenth of a second),
/// so async callers should run it off the reactor for large documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Splitter {
    kind: SplitterKind,
    chunk_size: usize,
    chunk_overlap: usize,
}

impl Splitter {
    /// A splitter, or a sentence saying what is wrong with the settings.
    ///
    /// Like LangChain.js (and so Flowise), an overlap equal to the chunk size is
    /// refused: windows would not advance.
    pub fn new(
        kind: SplitterKind,
        chunk_size: usize,
        chunk_overlap: usize,
    ) -> Result<Splitter, String> {
        if chunk_size == 0 {
            return Err("The chunk size must be at least 1.".to_string());
        }
        if chunk_overlap >= chunk_size {
            return Err(format!(
                "The chunk overlap ({chunk_overlap}) must be smaller than the chunk size ({chunk_size})."
            ));
        }
        // Checked by name: loading the rank table waits for the first split.
        if let SplitterKind::Token { encoding } = &kind
            && !TOKEN_ENCODINGS.contains(&encoding.as_str())
        {
            return Err(format!(
                "Unknown token encoding \"{encoding}\": use one of {}.",
                TOKEN_ENCODINGS.join(", ")
            ));
        }
        Ok(Splitter {
            kind,
            chunk_size,
            chunk_overlap,
        })
    }

    pub fn kind(&self) -> &SplitterKind {
        &self.kind
    }

    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    pub fn chunk_overlap(&self) -> usize {
        self.chunk_overlap
    }

    /// The chunks of one text, in order; none for an empty or blank text.
    pub fn split_text(&self, text: &str) -> Vec<String> {
        match &self.kind {
            SplitterKind::RecursiveCharacter { separators } => match separators {
                Some(given) if !given.is_empty() => {
                    let given: Vec<&str> = given.iter().map(String::as_str).collect();
                    self.split_recursive(text, &given)
                }
                _ => self.split_recursive(text, DEFAULT_RECURSIVE_SEPARATORS),
            },
            SplitterKind::Markdown => self.split_recursive(text, MARKDOWN_SEPARATORS),
            SplitterKind::Character { separator } => {
                let splits = split_on_separator(text, separator, false);
                self.merge_splits(&splits, separator)
            }
            SplitterKind::Token { encoding } => match tokenizer_for(encoding) {
                Some(tokenizer) => self.split_tokens(text, tokenizer),
                // `new` refused unknown encodings; nothing to split with.
                None => Vec::new(),
            },
        }
    }

    /// Every document's chunks, in order. Each chunk keeps its document's
    /// metadata; `loc` becomes a copy of the document's `loc` object (if it has
    /// one) with `lines: {from, to}`, the 1-based lines the chunk spans.
    pub fn split_documents(&self, docs: &[Document]) -> Vec<Document> {
        let mut out = Vec::new();
        for doc in docs {
            let chunks = self.split_text(&doc.page_content);
            let lines = chunk_line_ranges(&doc.page_content, &chunks);
            for (chunk, (from, to)) in chunks.into_iter().zip(lines) {
                let mut metadata = doc.metadata.clone();
                let mut loc = existing_loc(&doc.metadata);
                let mut range = Map::new();
                range.insert("from".to_string(), Value::from(from));
                range.insert("to".to_string(), Value::from(to));
                loc.insert("lines".to_string(), Value::Object(range));
                metadata.insert("loc".to_string(), Value::Object(loc));
                out.push(Document::new(chunk, metadata));
            }
        }
        out
    }

    /// `RecursiveCharacterTextSplitter._split_text`, with literal separators.
    fn split_recursive(&self, text: &str, separators: &[&str]) -> Vec<String> {
        let mut final_chunks = Vec::new();
        // The first separator present in the text (the empty one always is);
        // pieces still too long are split with the ones after it.
        let mut separator = separators.last().copied().unwrap_or("");
        let mut finer_separators: &[&str] = &[];
        for (i, candidate) in separators.iter().enumerate() {
            if candidate.is_empty() {
                separator = candidate;
                break;
            }
            if text.contains(candidate) {
                separator = candidate;
                finer_separators = &separators[i + 1..];
                break;
            }
        }

        let splits = split_on_separator(text, separator, true);
        let mut short_splits: Vec<&str> = Vec::new();
        for split in splits {
            if char_len(split) < self.chunk_size {
                short_splits.push(split);
                continue;
            }
            if !short_splits.is_empty() {
                // The separator stays on the pieces, so they are joined with "".
                final_chunks.extend(self.merge_splits(&short_splits, ""));
                short_splits.clear();
            }
            if finer_separators.is_empty() {
                // Nothing finer to split with: LangChain keeps the piece whole,
                // unstripped, however long it is.
                final_chunks.push(split.to_string());
            } else {
                final_chunks.extend(self.split_recursive(split, finer_separators));
            }
        }
        if !short_splits.is_empty() {
            final_chunks.extend(self.merge_splits(&short_splits, ""));
        }
        final_chunks
    }

    /// `TextSplitter._merge_splits`: packs consecutive pieces into chunks of at
    /// most `chunk_size` (a single longer piece becomes its own oversized chunk),
    /// and starts each next chunk with as many trailing pieces of the previous
    /// one as fit in `chunk_overlap`.
    fn merge_splits(&self, splits: &[&str], separator: &str) -> Vec<String> {
        let separator_len = char_len(separator);
        let mut docs = Vec::new();
        // The pieces of the chunk being built, with their lengths; `total` is
        // their length joined by the separator, as LangChain counts it.
        let mut current: VecDeque<(&str, usize)> = VecDeque::new();
        let mut total: usize = 0;
        for &split in splits {
            let len = char_len(split);
            let joining = |current: &VecDeque<(&str, usize)>| {
                if current.is_empty() { 0 } else { separator_len }
            };
            if total + len + joining(&current) > self.chunk_size && !current.is_empty() {
                if let Some(doc) = join_pieces(&current, separator) {
                    docs.push(doc);
                }
                while total > self.chunk_overlap
                    || (total + len + joining(&current) > self.chunk_size && total > 0)
                {
                    let separator_after_first = if current.len() > 1 { separator_len } else { 0 };
                    let Some((_, first_len)) = current.pop_front() else {
                        break;
                    };
                    total = total.saturating_sub(first_len + separator_after_first);
                }
            }
            current.push_back((split, len));
            total += len + if current.len() > 1 { separator_len } else { 0 };
        }
        if let Some(doc) = join_pieces(&current, separator) {
            docs.push(doc);
        }
        docs
    }

    /// `split_text_on_tokens`: windows of `chunk_size` tokens advancing by
    /// `chunk_size - chunk_overlap`, decoded as Python's `decode` does
    /// (invalid UTF-8 at a cut inside a character becomes U+FFFD).
    fn split_tokens(&self, text: &str, tokenizer: &CoreBPE) -> Vec<String> {
        let tokens = encode_ordinary(tokenizer, text);
        let step = self.chunk_size - self.chunk_overlap;
        let mut chunks = Vec::new();
        let mut start = 0;
        while start < tokens.len() {
            let end = start.saturating_add(self.chunk_size).min(tokens.len());
            // Every token came from this tokenizer, so decoding cannot miss one.
            let bytes = tokenizer
                .decode_bytes(&tokens[start..end])
                .unwrap_or_default();
            let decoded = String::from_utf8_lossy(&bytes);
            if !decoded.is_empty() {
                chunks.push(decoded.into_owned());
            }
            if end == tokens.len() {
                break;
            }
            start += step;
        }
        chunks
    }
}

/// The tokenizer of a tiktoken encoding, loaded once per process. `gpt2` is
/// `r50k_base` under its old name: same ranks, pattern and special token.
fn tokenizer_for(encoding: &str) -> Option<&'static CoreBPE> {
    match encoding {
        "gpt2" | "r50k_base" => Some(tiktoken_rs::r50k_base_singleton()),
        "p50k_base" => Some(tiktoken_rs::p50k_base_singleton()),
        "p50k_edit" => Some(tiktoken_rs::p50k_edit_singleton()),
        "cl100k_base" => Some(tiktoken_rs::cl100k_base_singleton()),
        _ => None,
    }
}

/// How many `cl100k_base` tokens `text` is (what a summary buffer memory measures).
pub fn count_tokens(text: &str) -> usize {
    encode_ordinary(tiktoken_rs::cl100k_base_singleton(), text).len()
}

/// Segments longer than this are cut at the next safe boundary when the
/// whole text could not be encoded at once (see [`encode_ordinary`]).
const ENCODE_SEGMENT_BYTES: usize = 64 * 1024;
/// Where even a segment fails, it is encoded in pieces of this many characters.
const ENCODE_LAST_RESORT_CHARS: usize = 4096;

/// The text's tokens, special-token text such as `<|endoftext|>` encoded as
/// ordinary text (LangChain's default `disallowed_special="all"` raises on it
/// instead; a document that happens to contain it should still be indexed).
///
/// tiktoken's pre-tokenizing regex gives up (and tiktoken-rs panics) on a
/// pathological run such as a million spaces; Python's tiktoken crashes the same
/// way, so there is no reference to match there. Then the text is encoded in
/// segments cut where no regex piece can straddle the cut (tokens identical to
/// the whole-text encoding), and a segment that still fails in fixed-size
/// pieces.
fn encode_ordinary(tokenizer: &CoreBPE, text: &str) -> Vec<Rank> {
    if let Some(tokens) = try_encode(tokenizer, text) {
        return tokens;
    }
    let mut tokens = Vec::new();
    for segment in safe_segments(text, ENCODE_SEGMENT_BYTES) {
        match try_encode(tokenizer, segment) {
            Some(part) => tokens.extend(part),
            None => {
                for piece in char_pieces(segment, ENCODE_LAST_RESORT_CHARS) {
                    tokens.extend(try_encode(tokenizer, piece).unwrap_or_default());
                }
            }
        }
    }
    tokens
}

fn try_encode(tokenizer: &CoreBPE, text: &str) -> Option<Vec<Rank>> {
    // The tokenizer's state is a regex cache that a panic cannot leave wrong.
    catch_unwind(AssertUnwindSafe(|| tokenizer.encode_ordinary(text))).ok()
}

/// Cuts `text` into segments of about `min_bytes` or more, each cut just before
/// a whitespace character (other than CR and LF) that follows a non-whitespace
/// one. No piece of the r50k/p50k/cl100k pre-tokenizers contains such a pair
/// and none looks behind, so encoding the segments one by one gives the same
/// tokens as encoding the whole text.
fn safe_segments(text: &str, min_bytes: usize) -> Vec<&str> {
    let mut segments = Vec::new();
    let mut segment_start = 0;
    let mut previous_is_space = true;
    for (at, c) in text.char_indices() {
        let is_space = c.is_whitespace();
        if is_space
            && !previous_is_space
            && c != '\r'
            && c != '\n'
            && at - segment_start >= min_bytes
        {
            segments.push(&text[segment_start..at]);
            segment_start = at;
        }
        previous_is_space = is_space;
    }
    segments.push(&text[segment_start..]);
    segments
}

/// `text` in pieces of at most `chars_per_piece` characters.
fn char_pieces(text: &str, chars_per_piece: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut piece_start = 0;
    for (count, (at, _)) in text.char_indices().enumerate() {
        if count > 0 && count % chars_per_piece == 0 {
            pieces.push(&text[piece_start..at]);
            piece_start = at;
        }
    }
    if piece_start < text.len() {
        pieces.push(&text[piece_start..]);
    }
    pieces
}

/// `_split_text_with_regex` for a literal separator: with `keep_separator`
/// each separator starts the piece after it (LangChain's `True`/`"start"`);
/// otherwise separators are dropped. The empty separator gives characters.
/// Empty pieces are dropped either way.
fn split_on_separator<'t>(text: &'t str, separator: &str, keep_separator: bool) -> Vec<&'t str> {
    if separator.is_empty() {
        return text
            .char_indices()
            .map(|(at, c)| &text[at..at + c.len_utf8()])
            .collect();
    }
    let mut splits = Vec::new();
    if keep_separator {
        let mut piece_start = 0;
        for (at, _) in text.match_indices(separator) {
            splits.push(&text[piece_start..at]);
            piece_start = at;
        }
        splits.push(&text[piece_start..]);
    } else {
        splits.extend(text.split(separator));
    }
    splits.retain(|s| !s.is_empty());
    splits
}

/// `_join_docs` with `strip_whitespace=True`: `None` when nothing is left.
fn join_pieces(pieces: &VecDeque<(&str, usize)>, separator: &str) -> Option<String> {
    let mut joined = String::new();
    for (i, (piece, _)) in pieces.iter().enumerate() {
        if i > 0 {
            joined.push_str(separator);
        }
        joined.push_str(piece);
    }
    let stripped = joined.trim_matches(is_python_whitespace);
    if stripped.is_empty() {
        None
    } else {
        Some(stripped.to_string())
    }
}

/// Python's `str.isspace`, which `str.strip()` uses: Unicode White_Space plus
/// the ASCII information separators U+001C..U+001F.
fn is_python_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `len`: code points.
fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// The document's `loc`, copied as LangChain.js spreads it: an object's keys,
/// an array's indices as keys; anything else (or nothing) gives an empty object.
fn existing_loc(metadata: &Map<String, Value>) -> Map<String, Value> {
    match metadata.get("loc") {
        Some(Value::Object(loc)) => loc.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| (i.to_string(), item.clone()))
            .collect(),
        _ => Map::new(),
    }
}

/// `(from, to)` line numbers of each chunk, as LangChain.js `createDocuments`
/// computes them: a running line counter moved by the newlines between where
/// the previous chunk ended and where this one is found (back, when they
/// overlap), then by the chunk's own newlines. Positions are UTF-16 units and
/// slices follow JavaScript's `indexOf`/`slice` rules, including a chunk that is
/// not found (position -1).
fn chunk_line_ranges(text: &str, chunks: &[String]) -> Vec<(i64, i64)> {
    let index = TextIndex::new(text);
    let mut search_budget = LINE_SEARCH_BUDGET_BYTES.saturating_add(text.len().saturating_mul(8));
    let mut ranges = Vec::with_capacity(chunks.len());
    let mut line: i64 = 1;
    let mut previous: Option<(i64, i64)> = None; // (position, UTF-16 length)
    for chunk in chunks {
        let search_from = previous.map_or(0, |(position, _)| position + 1);
        let position = index.index_of(chunk, search_from, &mut search_budget);
        match previous {
            None => line += index.newlines_in_slice(0, position),
            Some((previous_position, previous_len)) => {
                let previous_end = previous_position + previous_len;
                if previous_end < position {
                    line += index.newlines_in_slice(previous_end, position);
                } else if previous_end > position {
                    line -= index.newlines_in_slice(position, previous_end);
                }
            }
        }
        let own_newlines = chunk.matches('\n').count() as i64;
        ranges.push((line, line + own_newlines));
        line += own_newlines;
        previous = Some((position, chunk.encode_utf16().count() as i64));
    }
    ranges
}

/// Bytes of source text the chunk searches of one document may scan (plus
/// eight times the text's length). A chunk that is not in the text verbatim
/// costs a scan to the end, so a huge document of such chunks would be
/// quadratic; past the budget a chunk is only looked for near where the
/// previous one was, which finds every chunk a splitter cut from there.
const LINE_SEARCH_BUDGET_BYTES: usize = 256 << 20;
/// How far past the search start a chunk is looked for once over budget.
const LINE_SEARCH_WINDOW_BYTES: usize = 64 << 10;

/// JavaScript's view of a text: UTF-16 offsets, mapped to byte offsets and to
/// the count of newlines before them through a checkpoint every
/// [`CHARS_PER_CHECKPOINT`] characters (memory a sixty-fourth of a per-character
/// table; each lookup a binary search and a short walk).
struct TextIndex<'t> {
    text: &'t str,
    utf16_len: i64,
    checkpoints: Vec<Checkpoint>,
}

const CHARS_PER_CHECKPOINT: usize = 64;

#[derive(Clone, Copy)]
struct Checkpoint {
    utf16: i64,
    byte: usize,
    newlines_before: i64,
}

impl<'t> TextIndex<'t> {
    fn new(text: &'t str) -> Self {
        let mut checkpoints = Vec::with_capacity(text.len() / CHARS_PER_CHECKPOINT + 1);
        let mut utf16: i64 = 0;
        let mut newlines_before: i64 = 0;
        for (count, (byte, c)) in text.char_indices().enumerate() {
            if count % CHARS_PER_CHECKPOINT == 0 {
                checkpoints.push(Checkpoint {
                    utf16,
                    byte,
                    newlines_before,
                });
            }
            utf16 += c.len_utf16() as i64;
            if c == '\n' {
                newlines_before += 1;
            }
        }
        TextIndex {
            text,
            utf16_len: utf16,
            checkpoints,
        }
    }

    /// JavaScript's `text.indexOf(needle, from)`, -1 when absent (or, over
    /// budget, absent from the window after `from`).
    fn index_of(&self, needle: &str, from: i64, budget: &mut usize) -> i64 {
        let start = self.walk_to_utf16(from.clamp(0, self.utf16_len)).byte;
        let Some(rest) = self.text.get(start..) else {
            return -1;
        };
        let found = if *budget >= rest.len() {
            let found = rest.find(needle);
            *budget -= found.map_or(rest.len(), |at| at + needle.len());
            found
        } else {
            let mut window_end = rest.len().min(
                needle
                    .len()
                    .saturating_mul(4)
                    .saturating_add(LINE_SEARCH_WINDOW_BYTES),
            );
            while !rest.is_char_boundary(window_end) {
                window_end -= 1;
            }
            rest[..window_end].find(needle)
        };
        found.map_or(-1, |at| self.utf16_of_byte(start + at))
    }

    /// Newlines in JavaScript's `text.slice(start, end)`: negative offsets
    /// count from the end, and an empty range has none.
    fn newlines_in_slice(&self, start: i64, end: i64) -> i64 {
        let clamp = |offset: i64| {
            if offset < 0 {
                (self.utf16_len + offset).max(0)
            } else {
                offset.min(self.utf16_len)
            }
        };
        let (start, end) = (clamp(start), clamp(end));
        if start >= end {
            return 0;
        }
        self.walk_to_utf16(end).newlines_before - self.walk_to_utf16(start).newlines_before
    }

    /// Where the first character starting at or after a UTF-16 offset is, with
    /// the newlines before it (an offset inside a surrogate pair moves past the
    /// pair; JavaScript cannot match a string there either).
    fn walk_to_utf16(&self, utf16: i64) -> Checkpoint {
        let nearest = self.checkpoints.partition_point(|c| c.utf16 <= utf16);
        let Some(mut at) = nearest
            .checked_sub(1)
            .and_then(|i| self.checkpoints.get(i).copied())
        else {
            return Checkpoint {
                utf16: 0,
                byte: 0,
                newlines_before: 0,
            };
        };
        for c in self.text.get(at.byte..).unwrap_or("").chars() {
            if at.utf16 >= utf16 {
                break;
            }
            at.utf16 += c.len_utf16() as i64;
            at.byte += c.len_utf8();
            if c == '\n' {
                at.newlines_before += 1;
            }
        }
        at
    }

    /// The UTF-16 offset of a byte offset that starts a character.
    fn utf16_of_byte(&self, byte: usize) -> i64 {
        let nearest = self.checkpoints.partition_point(|c| c.byte <= byte);
        let Some(mut at) = nearest
            .checked_sub(1)
            .and_then(|i| self.checkpoints.get(i).copied())
        else {
            return 0;
        };
        for c in self.text.get(at.byte..).unwrap_or("").chars() {
            if at.byte >= byte {
                break;
            }
            at.utf16 += c.len_utf16() as i64;
            at.byte += c.len_utf8();
        }
        at.utf16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What `scripts/make-splitter-fixture` recorded from LangChain.
    fn fixture() -> Value {
        serde_json::from_str(include_str!("../../tests/fixtures/splitters.json"))
            .expect("fixture parses")
    }

    fn splitter_of(case: &Value) -> Splitter {
        let spec = &case["splitter"];
        let kind = match spec["type"].as_str().expect("type") {
            "recursive" => SplitterKind::RecursiveCharacter {
                separators: spec["separators"].as_array().map(|seps| {
                    seps.iter()
                        .map(|s| s.as_str().expect("separator").to_string())
                        .collect()
                }),
            },
            "character" => SplitterKind::Character {
                separator: spec["separator"].as_str().expect("separator").to_string(),
            },
            "markdown" => SplitterKind::Markdown,
            "token" => SplitterKind::Token {
                encoding: spec["encoding"].as_str().expect("encoding").to_string(),
            },
            other => panic!("unknown splitter type {other}"),
        };
        let size = case["chunkSize"].as_u64().expect("chunkSize") as usize;
        let overlap = case["chunkOverlap"].as_u64().expect("chunkOverlap") as usize;
        Splitter::new(kind, size, overlap).expect("fixture settings are valid")
    }

    fn strings(value: &Value) -> Vec<String> {
        value
            .as_array()
            .expect("array")
            .iter()
            .map(|s| s.as_str().expect("string").to_string())
            .collect()
    }

    fn describe(case: &Value) -> String {
        format!(
            "text {} with {} size {} overlap {}",
            case["text"], case["splitter"], case["chunkSize"], case["chunkOverlap"]
        )
    }

    #[test]
    fn chunks_match_langchain_for_every_fixture_case() {
        let fixture = fixture();
        let cases = fixture["cases"].as_array().expect("cases");
        assert!(cases.len() > 1000, "fixture has {} cases", cases.len());
        let mut failures = Vec::new();
        for case in cases {
            let text = fixture["texts"][case["text"].as_str().expect("text name")]
                .as_str()
                .expect("text");
            let got = splitter_of(case).split_text(text);
            let want = strings(&case["chunks"]);
            if got != want {
                failures.push(format!(
                    "{}:\n  want {want:?}\n  got  {got:?}",
                    describe(case)
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} cases differ from LangChain; first ones:\n{}",
            failures.len(),
            cases.len(),
            failures
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    #[test]
    fn loc_lines_match_langchain_js_for_every_fixture_case() {
        let fixture = fixture();
        let cases = fixture["cases"].as_array().expect("cases");
        let mut failures = Vec::new();
        for case in cases {
            let text = fixture["texts"][case["text"].as_str().expect("text name")]
                .as_str()
                .expect("text");
            // The fixture's lines are LangChain.js's for LangChain's chunks, so
            // compute them from those chunks: a chunk mismatch is the other
            // test's failure, not this one's.
            let chunks = strings(&case["chunks"]);
            let got: Vec<Value> = chunk_line_ranges(text, &chunks)
                .into_iter()
                .map(|(from, to)| json!([from, to]))
                .collect();
            let want = case["lines"].as_array().expect("lines");
            if &got != want {
                failures.push(format!(
                    "{}:\n  want {want:?}\n  got  {got:?}",
                    describe(case)
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "{} cases' lines differ from LangChain.js; first ones:\n{}",
            failures.len(),
            failures
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    #[test]
    fn split_documents_puts_lines_in_loc_and_keeps_metadata() {
        let splitter =
            Splitter::new(SplitterKind::RecursiveCharacter { separators: None }, 12, 0).unwrap();
        let mut metadata = Map::new();
        metadata.insert("source".into(), json!("notes.txt"));
        metadata.insert(
            "loc".into(),
            json!({"pageNumber": 3, "lines": {"from": 99, "to": 99}}),
        );
        let docs = vec![
            Document::new("first line\nsecond line\n\nthird line", metadata),
            Document::new("", Map::new()),
            Document::new("alone", Map::new()),
        ];
        let chunks = splitter.split_documents(&docs);
        let got: Vec<(String, Value)> = chunks
            .into_iter()
            .map(|d| (d.page_content, Value::Object(d.metadata)))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "first line".to_string(),
                    json!({"source": "notes.txt", "loc": {"pageNumber": 3, "lines": {"from": 1, "to": 1}}})
                ),
                (
                    "second line".to_string(),
                    json!({"source": "notes.txt", "loc": {"pageNumber": 3, "lines": {"from": 2, "to": 2}}})
                ),
                (
                    "third line".to_string(),
                    json!({"source": "notes.txt", "loc": {"pageNumber": 3, "lines": {"from": 4, "to": 4}}})
                ),
                // The empty document has no chunk; the next starts again at line 1.
                (
                    "alone".to_string(),
                    json!({"loc": {"lines": {"from": 1, "to": 1}}})
                ),
            ]
        );
    }

    #[test]
    fn lines_count_back_over_overlap_and_span_multiline_chunks() {
        let text = "one\ntwo\nthree\nfour\nfive";
        let splitter = Splitter::new(
            SplitterKind::Character {
                separator: "\n".into(),
            },
            9,
            4,
        )
        .unwrap();
        let chunks = splitter.split_text(text);
        assert_eq!(chunks, ["one\ntwo", "two\nthree", "four\nfive"]);
        assert_eq!(chunk_line_ranges(text, &chunks), [(1, 2), (2, 3), (4, 5)]);
    }

    #[test]
    fn chunk_search_over_budget_looks_near_the_previous_chunk_only() {
        let far = "x".repeat(LINE_SEARCH_WINDOW_BYTES * 2);
        let text = format!("near é😀 {far} needle");
        let index = TextIndex::new(&text);
        let mut ample = usize::MAX;
        let mut spent = 0;
        // UTF-16 offsets: "near " is 5, "é" 1, "😀" 2.
        assert_eq!(index.index_of("😀", 0, &mut ample), 6);
        assert_eq!(index.index_of("😀", 0, &mut spent), 6);
        assert_eq!(
            index.index_of("needle", 0, &mut ample),
            (text.encode_utf16().count() - 6) as i64
        );
        assert_eq!(index.index_of("needle", 0, &mut spent), -1);
        assert_eq!(index.index_of("absent", 3, &mut ample), -1);
    }

    #[test]
    fn javascript_slices_count_newlines_from_the_end_for_negative_offsets() {
        let index = TextIndex::new("a\nb😀\nc\n");
        assert_eq!(index.newlines_in_slice(0, 100), 3);
        assert_eq!(index.newlines_in_slice(0, -1), 2);
        assert_eq!(index.newlines_in_slice(-1, 100), 1);
        assert_eq!(index.newlines_in_slice(4, 2), 0);
        // Offset 4 is inside the emoji's surrogate pair.
        assert_eq!(index.newlines_in_slice(4, 6), 1);
    }

    #[test]
    fn a_non_object_loc_is_replaced_and_an_array_loc_spread_like_javascript() {
        let splitter = Splitter::new(SplitterKind::Markdown, 100, 0).unwrap();
        let with = |loc: Value| {
            let mut metadata = Map::new();
            metadata.insert("loc".into(), loc);
            let chunks = splitter.split_documents(&[Document::new("text", metadata)]);
            Value::Object(chunks[0].metadata.clone())
        };
        assert_eq!(
            with(json!("page 3")),
            json!({"loc": {"lines": {"from": 1, "to": 1}}})
        );
        assert_eq!(
            with(json!(null)),
            json!({"loc": {"lines": {"from": 1, "to": 1}}})
        );
        assert_eq!(
            with(json!(["a"])),
            json!({"loc": {"0": "a", "lines": {"from": 1, "to": 1}}})
        );
    }

    #[test]
    fn settings_that_cannot_split_are_refused_with_a_sentence() {
        let recursive = || SplitterKind::RecursiveCharacter { separators: None };
        assert_eq!(
            Splitter::new(recursive(), 0, 0).unwrap_err(),
            "The chunk size must be at least 1."
        );
        assert_eq!(
            Splitter::new(recursive(), 100, 100).unwrap_err(),
            "The chunk overlap (100) must be smaller than the chunk size (100)."
        );
        assert_eq!(
            Splitter::new(
                SplitterKind::Character {
                    separator: " ".into()
                },
                10,
                20
            )
            .unwrap_err(),
            "The chunk overlap (20) must be smaller than the chunk size (10)."
        );
        assert_eq!(
            Splitter::new(
                SplitterKind::Token {
                    encoding: "o9000k".into()
                },
                10,
                2
            )
            .unwrap_err(),
            "Unknown token encoding \"o9000k\": use one of gpt2, r50k_base, p50k_base, p50k_edit, cl100k_base."
        );
        let ok = Splitter::new(
            SplitterKind::Token {
                encoding: "cl100k_base".into(),
            },
            10,
            9,
        )
        .unwrap();
        assert_eq!((ok.chunk_size(), ok.chunk_overlap()), (10, 9));
    }

    #[test]
    fn every_offered_encoding_has_a_tokenizer() {
        for encoding in TOKEN_ENCODINGS {
            assert!(tokenizer_for(encoding).is_some(), "{encoding}");
        }
    }

    #[test]
    fn an_empty_separator_list_means_the_defaults() {
        let text = "a b c\n\nd e f g h i j k";
        let empty = Splitter::new(
            SplitterKind::RecursiveCharacter {
                separators: Some(vec![]),
            },
            6,
            2,
        )
        .unwrap();
        let none =
            Splitter::new(SplitterKind::RecursiveCharacter { separators: None }, 6, 2).unwrap();
        assert_eq!(empty.split_text(text), none.split_text(text));
    }

    #[test]
    fn segmented_encoding_gives_the_whole_texts_tokens() {
        let fixture = fixture();
        let texts = fixture["texts"].as_object().expect("texts");
        for encoding in TOKEN_ENCODINGS {
            let tokenizer = tokenizer_for(encoding).unwrap();
            for (name, text) in texts {
                let text = text.as_str().unwrap();
                let whole = tokenizer.encode_ordinary(text);
                let mut pieces = Vec::new();
                // Every safe boundary a cut.
                for segment in safe_segments(text, 0) {
                    pieces.extend(tokenizer.encode_ordinary(segment));
                }
                assert_eq!(whole, pieces, "{encoding} on {name}");
            }
        }
    }

    #[test]
    fn text_that_breaks_tiktokens_regex_is_still_split() {
        // A million spaces make tiktoken's pre-tokenizer give up (Python's
        // tiktoken crashes on it); weir falls back to encoding in pieces.
        let text = format!("start{}end", " ".repeat(1_000_000));
        let splitter = Splitter::new(
            SplitterKind::Token {
                encoding: "cl100k_base".into(),
            },
            4000,
            0,
        )
        .unwrap();
        let chunks = splitter.split_text(&text);
        assert!(!chunks.is_empty());
        assert_eq!(chunks.concat(), text);
    }

    /// Deterministic pseudo-random text over an alphabet of separators, blanks,
    /// multi-byte and astral characters: no splitter may panic on any of it.
    #[test]
    fn no_splitter_panics_on_mixed_unicode_text() {
        const ALPHABET: &[&str] = &[
            "a",
            "b",
            " ",
            "\n",
            "\n\n",
            "\r\n",
            "é",
            "日",
            "😀",
            "👨‍👩‍👧",
            "\u{3000}",
            "\u{1f}",
            "|",
            "```\n",
            "#",
            "-",
            "\t",
            "<|endoftext|>",
            "\u{0301}",
            "\u{feff}",
        ];
        let mut state: u64 = 0x5eed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        let kinds = [
            SplitterKind::RecursiveCharacter { separators: None },
            SplitterKind::RecursiveCharacter {
                separators: Some(vec!["😀".into(), "é".into(), "".into()]),
            },
            SplitterKind::Character {
                separator: "日".into(),
            },
            SplitterKind::Character {
                separator: "".into(),
            },
            SplitterKind::Markdown,
            SplitterKind::Token {
                encoding: "cl100k_base".into(),
            },
            SplitterKind::Token {
                encoding: "gpt2".into(),
            },
        ];
        for _ in 0..200 {
            let len = next() % 80;
            let text: String = (0..len)
                .map(|_| ALPHABET[next() % ALPHABET.len()])
                .collect();
            let size = 1 + next() % 12;
            let overlap = next() % size;
            for kind in &kinds {
                let splitter = Splitter::new(kind.clone(), size, overlap).unwrap();
                let docs = splitter.split_documents(&[Document::new(text.clone(), Map::new())]);
                for doc in docs {
                    assert!(!doc.page_content.is_empty());
                    assert!(doc.metadata["loc"]["lines"]["from"].is_i64());
                }
            }
        }
    }
}
