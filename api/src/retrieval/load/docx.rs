//! DOCX text for the `docxFile` loader: the paragraphs of a Word document's
//! main part, table cells included, one paragraph per line. A .docx is a ZIP
//! archive of XML parts, parsed here in the server's own process with pure-Rust
//! readers that do not recurse on the input (zip, quick-xml) — unlike PDF, which
//! goes to a child process (see `pdf`). Uploads are untrusted, so the archive
//! is bounded: at most 10,000 entries, and at most 64 MiB decompressed in all
//! (a zip bomb stops there, not in memory); XML entities other than the
//! predefined ones are never expanded.

use std::io::{Cursor, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};

use quick_xml::NsReader;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;

use super::pdf::LoadError;

/// Most entries a .docx may hold (Word writes a few dozen).
const MAX_ENTRIES: usize = 10_000;
/// Most bytes decompressed from one .docx, all parts read together.
const MAX_UNCOMPRESSED_BYTES: u64 = 64 << 20;
/// Where Word keeps the main part when `_rels/.rels` does not say.
const DEFAULT_MAIN_PART: &str = "word/document.xml";

const WORDML: &str = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
const WORDML_STRICT: &str = "http://purl.oclc.org/ooxml/wordprocessingml/main";
const MARKUP_COMPATIBILITY: &str = "http://schemas.openxmlformats.org/markup-compatibility/2006";
const PACKAGE_RELATIONSHIPS: &str = "http://schemas.openxmlformats.org/package/2006/relationships";

/// The text of a .docx: its paragraphs (table cells' included, in document
/// order) joined by `"\n"`. `file_name` is only used in messages.
pub fn docx_text(bytes: &[u8], file_name: &str) -> Result<String, LoadError> {
    let shown = super::pdf::shown_name(file_name);
    // The readers are not expected to panic; if one does, it is this file's
    // fault and the caller gets an error, not a dropped connection.
    match catch_unwind(AssertUnwindSafe(|| read_docx(bytes))) {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(reason)) => Err(LoadError(format!(
            "file '{shown}' is not a readable DOCX: {reason}"
        ))),
        Err(_) => Err(LoadError(format!(
            "file '{shown}' is not a readable DOCX: the reader failed on its content; re-save it (Word or LibreOffice) and upload again"
        ))),
    }
}

/// `Err` is a reason for the user.
fn read_docx(bytes: &[u8]) -> Result<String, String> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| {
        format!(
            "it is not a ZIP archive as .docx files are ({e}); old .doc files and password-protected documents are not supported: save it as .docx without a password"
        )
    })?;
    if archive.len() > MAX_ENTRIES {
        return Err(format!(
            "it holds {} entries, more than the {MAX_ENTRIES} a document may have",
            archive.len()
        ));
    }
    let mut budget = MAX_UNCOMPRESSED_BYTES;
    let main = match read_part(&mut archive, "_rels/.rels", &mut budget)? {
        Some(rels) => main_part_name(&rels).unwrap_or_else(|| DEFAULT_MAIN_PART.to_string()),
        None => DEFAULT_MAIN_PART.to_string(),
    };
    let xml = read_part(&mut archive, &main, &mut budget)?.ok_or_else(|| {
        format!("it has no document part ({main}); is it really a Word document?")
    })?;
    body_text(&xml).map_err(|e| format!("its document part is not well-formed XML ({e})"))
}

/// Reads one part as text, charging its size to `budget`; `None` if absent.
fn read_part(
    archive: &mut zip::ZipArchive<Cursor<&[u8]>>,
    name: &str,
    budget: &mut u64,
) -> Result<Option<String>, String> {
    let entry = match archive.by_name(name) {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(format!("its part {name} cannot be read ({e})")),
    };
    let mut data = Vec::new();
    entry
        .take(budget.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(|e| format!("its part {name} is damaged ({e})"))?;
    let len = data.len() as u64;
    if len > *budget {
        return Err(format!(
            "it expands to more than {} MiB; is it a zip bomb? Split it into smaller documents",
            MAX_UNCOMPRESSED_BYTES >> 20
        ));
    }
    *budget -= len;
    let text = match String::from_utf8(data) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Ok(Some(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    }))
}

/// The main part's name from the package relationships (`_rels/.rels`).
fn main_part_name(rels: &str) -> Option<String> {
    let mut reader = NsReader::from_str(rels);
    loop {
        let (ns, event) = reader.read_resolved_event().ok()?;
        let is_relationships =
            matches!(ns, ResolveResult::Bound(n) if n.0 == PACKAGE_RELATIONSHIPS);
        match event {
            Event::Start(e) | Event::Empty(e)
                if is_relationships && e.local_name().as_ref() == "Relationship" =>
            {
                let mut kind = None;
                let mut target = None;
                for attr in e.attributes().flatten() {
                    let value = attr
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .ok()?;
                    match attr.key.as_ref() {
                        "Type" => kind = Some(value.into_owned()),
                        "Target" => target = Some(value.into_owned()),
                        _ => {}
                    }
                }
                if let (Some(kind), Some(target)) = (kind, target)
                    && kind.ends_with("/officeDocument")
                {
                    let target = target.trim_start_matches('/').trim_start_matches("./");
                    return (!target.is_empty()).then(|| target.to_string());
                }
            }
            Event::Eof => return None,
            _ => {}
        }
    }
}

/// The elements [`body_text`] tells apart; everything else is `Other`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tag {
    /// `w:p`, a paragraph.
    Paragraph,
    /// `w:r`, a run.
    Run,
    /// `w:t`, a run's text.
    Text,
    /// `mc:Fallback`: an older rendering of content already read in `mc:Choice`.
    Fallback,
    Other,
}

fn classify(ns: &ResolveResult<'_>, local: &str) -> Tag {
    match ns {
        ResolveResult::Bound(n) if n.0 == WORDML || n.0 == WORDML_STRICT => match local {
            "p" => Tag::Paragraph,
            "r" => Tag::Run,
            "t" => Tag::Text,
            _ => Tag::Other,
        },
        ResolveResult::Bound(n) if n.0 == MARKUP_COMPATIBILITY && local == "Fallback" => {
            Tag::Fallback
        }
        _ => Tag::Other,
    }
}

/// What a run-level empty element stands for in text (`w:tab`, `w:br`, …).
fn run_mark(ns: &ResolveResult<'_>, local: &str) -> Option<char> {
    match ns {
        ResolveResult::Bound(n) if n.0 == WORDML || n.0 == WORDML_STRICT => match local {
            "tab" | "ptab" => Some('\t'),
            "br" | "cr" => Some('\n'),
            "noBreakHyphen" => Some('-'),
            _ => None,
        },
        _ => None,
    }
}

/// The paragraphs of a main document part, joined by `"\n"`.
fn body_text(xml: &str) -> Result<String, quick_xml::Error> {
    let mut reader = NsReader::from_str(xml);
    // Open elements, innermost last; the stack never outgrows the input.
    let mut open: Vec<Tag> = Vec::new();
    let mut fallbacks = 0usize;
    // Paragraphs being read (a text box's paragraphs nest inside another's).
    let mut paragraphs: Vec<String> = Vec::new();
    let mut out = Lines::default();
    loop {
        let (ns, event) = reader.read_resolved_event()?;
        let reading = fallbacks == 0;
        let in_text = reading && open.last() == Some(&Tag::Text);
        match event {
            Event::Start(e) => {
                let tag = classify(&ns, e.local_name().as_ref());
                match tag {
                    Tag::Paragraph if reading => paragraphs.push(String::new()),
                    Tag::Fallback => fallbacks += 1,
                    _ => {}
                }
                open.push(tag);
            }
            Event::End(_) => match open.pop() {
                Some(Tag::Paragraph) if reading => {
                    if let Some(done) = paragraphs.pop() {
                        out.push(&done);
                    }
                }
                Some(Tag::Fallback) => fallbacks = fallbacks.saturating_sub(1),
                _ => {}
            },
            Event::Empty(e) => {
                let local = e.local_name();
                if reading && classify(&ns, local.as_ref()) == Tag::Paragraph {
                    out.push("");
                } else if reading
                    && open.last() == Some(&Tag::Run)
                    && let Some(mark) = run_mark(&ns, local.as_ref())
                    && let Some(paragraph) = paragraphs.last_mut()
                {
                    paragraph.push(mark);
                }
            }
            Event::Text(t) if in_text => {
                if let Some(paragraph) = paragraphs.last_mut() {
                    paragraph.push_str(&t.xml10_content());
                }
            }
            Event::CData(t) if in_text => {
                if let Some(paragraph) = paragraphs.last_mut() {
                    paragraph.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) if in_text => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => Some(c.to_string()),
                    Ok(None) => {
                        quick_xml::escape::resolve_predefined_entity(&r).map(str::to_string)
                    }
                    Err(_) => None,
                };
                if let (Some(text), Some(paragraph)) = (resolved, paragraphs.last_mut()) {
                    paragraph.push_str(&text);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    // Paragraphs left open by a truncated part still count.
    for paragraph in paragraphs {
        out.push(&paragraph);
    }
    Ok(out.joined)
}

/// Lines joined by `"\n"` as they come.
#[derive(Default)]
struct Lines {
    joined: String,
    any: bool,
}

impl Lines {
    fn push(&mut self, line: &str) {
        if self.any {
            self.joined.push('\n');
        }
        self.joined.push_str(line);
        self.any = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use zip::write::SimpleFileOptions;

    const RELS: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#;

    fn document(body: &str) -> String {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" xmlns:v="urn:schemas-microsoft-com:vml"><w:body>{body}<w:sectPr/></w:body></w:document>"#
        )
    }

    fn docx(parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, data) in parts {
            zip.start_file(*name, options).unwrap();
            zip.write_all(data).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    fn word(body: &str) -> Vec<u8> {
        let xml = document(body);
        docx(&[
            ("[Content_Types].xml", b"<Types/>"),
            ("_rels/.rels", RELS.as_bytes()),
            ("word/document.xml", xml.as_bytes()),
        ])
    }

    #[test]
    fn paragraphs_and_table_cells_in_order() {
        let body = r#"
<w:p><w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr><w:r><w:t>First paragraph, </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve">in two runs &amp; bold</w:t></w:r></w:p>
<w:p/>
<w:p><w:r><w:t>Name</w:t><w:tab/><w:t>Value</w:t><w:br/><w:t>next line</w:t></w:r></w:p>
<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Part</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>AX-1044</w:t></w:r></w:p></w:tc></w:tr>
<w:tr><w:tc><w:p><w:r><w:t>Price</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>&#8364;12</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
<w:p><w:r><w:delText>deleted</w:delText></w:r><w:r><w:instrText> PAGE </w:instrText></w:r><w:r><w:t>Last</w:t></w:r></w:p>"#;
        let text = docx_text(&word(body), "report.docx").unwrap();
        assert_eq!(
            text,
            "First paragraph, in two runs & bold\n\nName\tValue\nnext line\nPart\nAX-1044\nPrice\n€12\nLast"
        );
    }

    #[test]
    fn a_text_box_is_read_once() {
        let body = r#"<w:p><w:r><w:t>Before</w:t></w:r><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wps:txbx><w:txbxContent><w:p><w:r><w:t>In the box</w:t></w:r></w:p></w:txbxContent></wps:txbx></w:drawing></mc:Choice><mc:Fallback><w:pict><v:textbox><w:txbxContent><w:p><w:r><w:t>In the box</w:t></w:r></w:p></w:txbxContent></v:textbox></w:pict></mc:Fallback></mc:AlternateContent></w:r><w:r><w:t> after</w:t></w:r></w:p>"#;
        let text = docx_text(&word(body), "box.docx").unwrap();
        assert_eq!(text, "In the box\nBefore after");
    }

    #[test]
    fn the_main_part_is_found_through_the_relationships() {
        let rels = RELS.replace("word/document.xml", "/word/main.xml");
        let xml = document("<w:p><w:r><w:t>Moved</w:t></w:r></w:p>");
        let bytes = docx(&[
            ("_rels/.rels", rels.as_bytes()),
            ("word/main.xml", xml.as_bytes()),
        ]);
        assert_eq!(docx_text(&bytes, "moved.docx").unwrap(), "Moved");
        // Without relationships, Word's usual place.
        let bytes = docx(&[("word/document.xml", xml.as_bytes())]);
        assert_eq!(docx_text(&bytes, "plain.docx").unwrap(), "Moved");
    }

    #[test]
    fn not_a_zip_is_an_error_naming_the_file() {
        for bytes in [
            &b""[..],
            b"plain text, not a zip",
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1 old .doc",
        ] {
            let e = docx_text(bytes, "old.doc").unwrap_err();
            assert!(
                e.0.starts_with("file 'old.doc' is not a readable DOCX: it is not a ZIP archive"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_zip_without_a_document_is_an_error() {
        let bytes = docx(&[("hello.txt", b"hello")]);
        let e = docx_text(&bytes, "x.docx").unwrap_err();
        assert!(
            e.0.contains("has no document part (word/document.xml)"),
            "{e}"
        );
    }

    #[test]
    fn broken_xml_is_an_error() {
        let bytes = docx(&[("word/document.xml", b"<w:document><w:body><w:p></w:body>")]);
        let e = docx_text(&bytes, "broken.docx").unwrap_err();
        assert!(e.0.contains("not well-formed XML"), "{e}");
    }

    #[test]
    fn a_zip_bomb_stops_at_the_limit() {
        // 65 MiB of zeros deflate to about 65 KiB.
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        zip.start_file("word/document.xml", options).unwrap();
        let zeros = vec![b' '; 1 << 20];
        for _ in 0..65 {
            zip.write_all(&zeros).unwrap();
        }
        let bytes = zip.finish().unwrap().into_inner();
        assert!(bytes.len() < 1 << 20, "{}", bytes.len());
        let e = docx_text(&bytes, "bomb.docx").unwrap_err();
        assert!(e.0.contains("expands to more than 64 MiB"), "{e}");
    }

    #[test]
    fn the_budget_covers_all_parts_together() {
        let mut budget = 10;
        let bytes = docx(&[("a", b"12345678"), ("b", b"12345678")]);
        let mut archive = zip::ZipArchive::new(Cursor::new(&bytes[..])).unwrap();
        assert_eq!(
            read_part(&mut archive, "a", &mut budget)
                .unwrap()
                .as_deref(),
            Some("12345678")
        );
        assert_eq!(budget, 2);
        assert!(read_part(&mut archive, "b", &mut budget).is_err());
        assert_eq!(
            read_part(&mut archive, "missing", &mut budget).unwrap(),
            None
        );
    }

    #[test]
    fn too_many_entries_is_an_error() {
        let names: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("f{i}")).collect();
        let parts: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        let e = docx_text(&docx(&parts), "many.docx").unwrap_err();
        assert!(e.0.contains("more than the 10000"), "{e}");
    }

    #[test]
    fn custom_entities_are_not_expanded() {
        let xml = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>a&lol2;b</w:t></w:r></w:p></w:body></w:document>"#;
        let bytes = docx(&[("word/document.xml", xml.as_bytes())]);
        assert_eq!(docx_text(&bytes, "lol.docx").unwrap(), "ab");
    }
}
