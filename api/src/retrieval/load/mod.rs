//! Loaders: the bytes of a file, or a node's own text, into [`Document`]s — the
//! way LangChain's loaders that Flowise's nodes wrap cut them:
//!
//! - text (`textFile`, `plainText`): one document per file;
//! - CSV (`csvFile`): one per row, `column: value` lines (or one column's value);
//! - JSON (`jsonFile`): one per string value, optionally only under the given keys;
//! - JSON Lines (`jsonlinesFile`): one per line, the value at a pointer;
//! - PDF (`pdfFile`, [`pdf`]): one per page or per file, parsed in a child process;
//! - DOCX (`docxFile`, [`docx`]): one per file.
//! - Web pages (`cheerioWebScraper`, [`html`]): one per page, fetched by the
//!   caller through the SSRF guard.
//!
//! Every document's `metadata.source` is the file's name (Flowise writes
//! `"blob"`). A malformed file is a [`LoadError`] naming it.

pub mod docx;
pub mod html;
pub mod pdf;

use bytes::Bytes;
use serde_json::{Map, Value, json};

pub use pdf::LoadError;

use super::Document;

/// A file to load: its name and its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct FileData {
    pub name: String,
    pub bytes: Bytes,
}

/// Which loader, with its own settings.
#[derive(Debug, Clone, PartialEq)]
pub enum LoaderKind {
    /// `plainText`: the node's text, no file.
    PlainText {
        text: String,
    },
    Text,
    Csv {
        column: Option<String>,
    },
    Json {
        pointers: Vec<String>,
    },
    JsonLines {
        pointer: Option<String>,
    },
    Pdf {
        per_page: bool,
    },
    Docx,
    /// `cheerioWebScraper`: the page at `url` (and, with `crawl`, up to that many
    /// pages of the same site it links to); the caller fetches them.
    Web {
        url: String,
        selector: Option<String>,
        crawl: Option<usize>,
    },
    /// `documentStore`: the chunks of a Flowise document store, read from the
    /// store by the caller (they are documents already, split).
    DocumentStore {
        store: uuid::Uuid,
    },
}

impl LoaderKind {
    /// Whether an uploaded file of this name goes to this loader (by extension).
    pub fn accepts(&self, file_name: &str) -> bool {
        let ext = extension(file_name);
        match self {
            LoaderKind::PlainText { .. }
            | LoaderKind::Web { .. }
            | LoaderKind::DocumentStore { .. } => false,
            // Flowise's text loader's types: text, markup and source code.
            LoaderKind::Text => matches!(
                ext.as_str(),
                "txt"
                    | "text"
                    | "log"
                    | "md"
                    | "markdown"
                    | "html"
                    | "htm"
                    | "xml"
                    | "rst"
                    | "tex"
                    | "ltx"
                    | "aspx"
                    | "asp"
                    | "c"
                    | "h"
                    | "cpp"
                    | "cs"
                    | "css"
                    | "less"
                    | "scss"
                    | "go"
                    | "java"
                    | "js"
                    | "ts"
                    | "php"
                    | "proto"
                    | "py"
                    | "python"
                    | "rb"
                    | "ruby"
                    | "rs"
                    | "scala"
                    | "sc"
                    | "sol"
                    | "sql"
                    | "swift"
                    | "vb"
                    | "yaml"
                    | "yml"
            ),
            LoaderKind::Csv { .. } => ext == "csv",
            LoaderKind::Json { .. } => ext == "json",
            LoaderKind::JsonLines { .. } => ext == "jsonl",
            LoaderKind::Pdf { .. } => ext == "pdf",
            LoaderKind::Docx => ext == "docx",
        }
    }
}

/// The lower-cased extension of a file name (`""` when none).
pub fn extension(file_name: &str) -> String {
    file_name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default()
}

/// Loads documents from the node's text or from files.
pub async fn load(kind: &LoaderKind, files: &[FileData]) -> Result<Vec<Document>, LoadError> {
    if let LoaderKind::PlainText { text } = kind {
        return Ok(vec![Document::new(text.clone(), Map::new())]);
    }
    if let LoaderKind::DocumentStore { store } = kind {
        return Err(LoadError(format!(
            "document store {store} is read from weir's store, not from files"
        )));
    }
    let mut out = Vec::new();
    for file in files {
        match kind {
            LoaderKind::PlainText { .. } | LoaderKind::DocumentStore { .. } => {}
            LoaderKind::Text
            | LoaderKind::Csv { .. }
            | LoaderKind::Json { .. }
            | LoaderKind::JsonLines { .. } => {
                // Parsing a large file is CPU work: off the async threads.
                let (kind, file) = (kind.clone(), file.clone());
                let name = file.name.clone();
                out.extend(
                    tokio::task::spawn_blocking(move || parse_text_file(&kind, &file))
                        .await
                        .map_err(|e| LoadError(format!("reading '{name}' failed: {e}")))??,
                );
            }
            LoaderKind::Web { selector, .. } => {
                let (html, selector) = (file.bytes.clone(), selector.clone());
                let text = tokio::task::spawn_blocking(move || {
                    html::page_text(&String::from_utf8_lossy(&html), selector.as_deref())
                })
                .await
                .map_err(|e| LoadError(format!("reading '{}' failed: {e}", file.name)))?
                .map_err(|e| LoadError(format!("page '{}': {e}", file.name)))?;
                out.push(Document::new(text, source(&file.name)));
            }
            LoaderKind::Pdf { per_page } => {
                let pdf = pdf::extract_pdf(file.bytes.clone(), &file.name).await?;
                let total = pdf.pages.len();
                if *per_page {
                    for (i, page) in pdf.pages.into_iter().enumerate() {
                        let mut metadata = source(&file.name);
                        metadata.insert("pdf".into(), json!({"totalPages": total}));
                        metadata.insert("loc".into(), json!({"pageNumber": i + 1}));
                        out.push(Document::new(page, metadata));
                    }
                } else {
                    let mut metadata = source(&file.name);
                    metadata.insert("pdf".into(), json!({"totalPages": total}));
                    out.push(Document::new(pdf.pages.join("\n\n"), metadata));
                }
            }
            LoaderKind::Docx => {
                // Inflating and parsing a large document is CPU work: off the async threads.
                let (bytes, name) = (file.bytes.clone(), file.name.clone());
                let text = tokio::task::spawn_blocking(move || docx::docx_text(&bytes, &name))
                    .await
                    .map_err(|e| LoadError(format!("reading '{}' failed: {e}", file.name)))??;
                out.push(Document::new(text, source(&file.name)));
            }
        }
    }
    Ok(out)
}

/// The loaders of text formats, on one file.
fn parse_text_file(kind: &LoaderKind, file: &FileData) -> Result<Vec<Document>, LoadError> {
    match kind {
        LoaderKind::Text => Ok(vec![Document::new(text_of(file)?, source(&file.name))]),
        LoaderKind::Csv { column } => csv_rows(file, column.as_deref()),
        LoaderKind::Json { pointers } => json_strings(file, pointers),
        LoaderKind::JsonLines { pointer } => json_lines(file, pointer.as_deref()),
        _ => Ok(Vec::new()),
    }
}

fn source(name: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("source".into(), Value::from(name));
    m
}

fn text_of(file: &FileData) -> Result<String, LoadError> {
    let text = std::str::from_utf8(&file.bytes).map_err(|_| {
        LoadError(format!(
            "file '{}' is not UTF-8 text (convert it or use the loader for its type)",
            file.name
        ))
    })?;
    // A byte-order mark is not content.
    Ok(text.strip_prefix('\u{feff}').unwrap_or(text).to_owned())
}

/// One document per CSV row: `header: value` lines, or only `column`'s value.
fn csv_rows(file: &FileData, column: Option<&str>) -> Result<Vec<Document>, LoadError> {
    let text = text_of(file)?;
    let mut records = parse_csv(&text).into_iter();
    let Some(header) = records.next() else {
        return Ok(Vec::new());
    };
    let wanted = match column {
        Some(name) => Some(header.iter().position(|h| h == name).ok_or_else(|| {
            LoadError(format!(
                "file '{}' has no column '{name}' (its columns: {})",
                file.name,
                header.join(", ")
            ))
        })?),
        None => None,
    };
    let mut out = Vec::new();
    for (row, record) in records.enumerate() {
        if record.len() == 1 && record[0].is_empty() {
            continue;
        }
        let content = match wanted {
            Some(i) => record.get(i).cloned().unwrap_or_default(),
            None => header
                .iter()
                .zip(record.iter().chain(std::iter::repeat(&String::new())))
                .map(|(h, v)| format!("{}: {}", h.trim(), v.trim()))
                .collect::<Vec<_>>()
                .join("\n"),
        };
        let mut metadata = source(&file.name);
        metadata.insert("line".into(), Value::from(row + 1));
        out.push(Document::new(content, metadata));
    }
    Ok(out)
}

/// RFC 4180 records: quoted fields may hold commas, quotes (doubled) and line breaks.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    records
}

/// One document per string value of the JSON, in document order; with
/// `pointers`, only values under those keys (LangChain's JSONLoader).
fn json_strings(file: &FileData, pointers: &[String]) -> Result<Vec<Document>, LoadError> {
    use serde::de::DeserializeSeed;
    let keys: Vec<&str> = pointers.iter().map(|p| p.trim_start_matches('/')).collect();
    let mut texts = Vec::new();
    let mut reader = serde_json::Deserializer::from_slice(&file.bytes);
    Strings {
        keys: &keys,
        inside: keys.is_empty(),
        out: &mut texts,
    }
    .deserialize(&mut reader)
    .and_then(|()| reader.end())
    .map_err(|e| LoadError(format!("file '{}' is not valid JSON: {e}", file.name)))?;
    Ok(texts
        .into_iter()
        .enumerate()
        .map(|(i, text)| {
            let mut metadata = source(&file.name);
            metadata.insert("line".into(), Value::from(i + 1));
            Document::new(text, metadata)
        })
        .collect())
}

/// Collects string values while reading the JSON, so they come in the order
/// the file has them (a parsed map would sort its keys).
struct Strings<'a> {
    keys: &'a [&'a str],
    inside: bool,
    out: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Strings<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strings<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        if self.inside {
            self.out.push(v.to_owned());
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(Strings {
                keys: self.keys,
                inside: self.inside,
                out: &mut *self.out,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            let inside = self.inside || self.keys.contains(&key.as_str());
            map.next_value_seed(Strings {
                keys: self.keys,
                inside,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }
}

/// One document per line: the value at `pointer` (`/text`), or the whole line.
fn json_lines(file: &FileData, pointer: Option<&str>) -> Result<Vec<Document>, LoadError> {
    let text = text_of(file)?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            LoadError(format!(
                "file '{}' line {} is not valid JSON: {e}",
                file.name,
                n + 1
            ))
        })?;
        let picked = match pointer {
            Some(p) => {
                let p = if p.starts_with('/') {
                    p.to_owned()
                } else {
                    format!("/{p}")
                };
                match value.pointer(&p) {
                    Some(v) => v.clone(),
                    None => continue,
                }
            }
            None => value,
        };
        let content = match picked {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let mut metadata = source(&file.name);
        metadata.insert("line".into(), Value::from(n + 1));
        out.push(Document::new(content, metadata));
    }
    Ok(out)
}

/// Whether a file input names files kept in a Flowise server's storage
/// (`FILE-STORAGE::["a.pdf"]`), which weir cannot read: they must be uploaded.
pub fn is_flowise_storage(value: &str) -> bool {
    value.trim().starts_with("FILE-STORAGE::")
}

/// Flowise's file inputs: `data:<mime>;base64,<data>,filename:<name>`, or a JSON
/// array text of them. Stored-file references (`FILE-STORAGE::…`) point into a
/// Flowise server's storage and cannot be read here: such a node needs its files
/// sent to the upsert API.
pub fn decode_file_input(value: &str) -> Result<Vec<FileData>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(Vec::new());
    }
    if is_flowise_storage(value) {
        return Ok(Vec::new());
    }
    let items: Vec<String> = if value.starts_with('[') {
        serde_json::from_str(value).map_err(|e| format!("is not a list of files: {e}"))?
    } else {
        vec![value.to_owned()]
    };
    items.iter().map(|item| decode_data_url(item)).collect()
}

fn decode_data_url(item: &str) -> Result<FileData, String> {
    use base64::Engine;
    let bad = || "holds a file that is not a data URL (data:<type>;base64,<data>,filename:<name>)";
    let rest = item.strip_prefix("data:").ok_or_else(bad)?;
    let (_, rest) = rest.split_once(";base64,").ok_or_else(bad)?;
    let (data, name) = match rest.rsplit_once(",filename:") {
        Some((data, name)) => (data, name.to_owned()),
        None => (rest, "file".to_owned()),
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("holds a file '{name}' whose base64 is invalid: {e}"))?;
    Ok(FileData {
        name,
        bytes: Bytes::from(bytes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> FileData {
        FileData {
            name: name.into(),
            bytes: Bytes::from(text.to_owned()),
        }
    }

    #[test]
    fn csv_rows_become_documents() -> Result<(), LoadError> {
        let f = file(
            "p.csv",
            "name,notes\nada,\"likes, commas\"\nbob,\"two\nlines\"\n",
        );
        let docs = csv_rows(&f, None)?;
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].page_content, "name: ada\nnotes: likes, commas");
        assert_eq!(docs[1].page_content, "name: bob\nnotes: two\nlines");
        assert_eq!(docs[1].metadata["source"], "p.csv");
        let only = csv_rows(&f, Some("notes"))?;
        assert_eq!(only[0].page_content, "likes, commas");
        assert!(csv_rows(&f, Some("missing")).is_err());
        Ok(())
    }

    #[test]
    fn json_strings_follow_pointers() -> Result<(), LoadError> {
        let f = file(
            "d.json",
            r#"{"a": "one", "b": {"c": ["two", 3]}, "d": "four"}"#,
        );
        let all: Vec<_> = json_strings(&f, &[])?
            .into_iter()
            .map(|d| d.page_content)
            .collect();
        assert_eq!(all, ["one", "two", "four"]);
        let some: Vec<_> = json_strings(&f, &["b".into()])?
            .into_iter()
            .map(|d| d.page_content)
            .collect();
        assert_eq!(some, ["two"]);
        assert!(json_strings(&file("x.json", "{"), &[]).is_err());
        Ok(())
    }

    #[test]
    fn json_lines_pick_their_pointer() -> Result<(), LoadError> {
        let f = file(
            "l.jsonl",
            "{\"text\": \"a\"}\n\n{\"text\": \"b\", \"n\": 1}\n{\"n\": 2}\n",
        );
        let docs = json_lines(&f, Some("text"))?;
        let texts: Vec<_> = docs.iter().map(|d| d.page_content.as_str()).collect();
        assert_eq!(texts, ["a", "b"]);
        assert_eq!(docs[1].metadata["line"], 3);
        Ok(())
    }

    #[test]
    fn data_urls_decode() -> Result<(), String> {
        let one = decode_file_input("data:text/plain;base64,aGVsbG8=,filename:hello.txt")?;
        assert_eq!(one[0].name, "hello.txt");
        assert_eq!(&one[0].bytes[..], b"hello");
        let many = decode_file_input(
            r#"["data:text/plain;base64,YQ==,filename:a.txt","data:text/plain;base64,Yg==,filename:b.txt"]"#,
        )?;
        assert_eq!(many.len(), 2);
        assert!(decode_file_input("FILE-STORAGE::[\"a.txt\"]")?.is_empty());
        assert!(is_flowise_storage("FILE-STORAGE::[\"a.txt\"]"));
        assert!(decode_file_input("not a url").is_err());
        Ok(())
    }

    #[test]
    fn extensions_route_files() {
        assert!(LoaderKind::Text.accepts("notes.TXT"));
        assert!(LoaderKind::Pdf { per_page: true }.accepts("a.pdf"));
        assert!(!LoaderKind::Csv { column: None }.accepts("a.json"));
        assert_eq!(extension("noext"), "");
    }
}
