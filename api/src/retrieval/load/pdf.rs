//! PDF text, page by page, from bytes nobody vouches for. This module owns the
//! `pdfFile` loader's parsing: [`extract_pdf`] on the server side and
//! [`run_extractor_child`] on the other. PDF parsers (pdf-extract and the lopdf
//! under it included) are known to panic, loop or allocate without bound on real
//! and hostile files, and a panic that aborts, a stack overflow or an exhausted
//! heap would take the whole server down; `catch_unwind` alone covers none of
//! those. So the parsing runs in a child process — the same executable started
//! with the hidden first argument [`EXTRACTOR_ARG`] — with an empty environment,
//! no core dumps, and kernel limits on its address space (512 MiB), CPU time
//! (10 s), file writes (none) and open files, while the server waits at most
//! 10 s of wall-clock time and kills it after that. The bytes go in on the
//! child's standard input; one JSON object comes back on its standard output:
//! `{"pages": ["text of page 1", …]}` or `{"error": "why, for the user"}`.
//! Whatever else happens (a signal, a crash, a silent exit) is turned into a
//! [`LoadError`] that names the file and says what the user can do.

use std::fmt;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::{ExitCode, ExitStatus, Stdio};
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

/// The hidden first argument that makes the executable a PDF extractor child.
pub const EXTRACTOR_ARG: &str = "__extract-pdf";

/// Wall-clock limit for one extraction (and the child's CPU-time limit).
const TIME_LIMIT: Duration = Duration::from_secs(10);
/// The child's address-space limit.
const MEMORY_LIMIT_BYTES: u64 = 512 << 20;
/// The child's open-file limit: standard input, output and error, the saved
/// answer descriptor, and a little slack.
const OPEN_FILES_LIMIT: u64 = 8;
/// Most text one PDF may yield (UTF-8 bytes, all pages together).
const MAX_TEXT_BYTES: usize = 64 << 20;
/// Most answer bytes the server keeps: the text JSON-escaped (control characters
/// are removed in the child, so at most two bytes per byte of text) and slack.
const MAX_ANSWER_BYTES: usize = 2 * MAX_TEXT_BYTES + (1 << 20);
/// How much of the child's standard error is kept for the log (its end).
const MAX_STDERR_KEPT: usize = 8 << 10;
/// Extractions running at once; more wait their turn (each child may use up to
/// [`MEMORY_LIMIT_BYTES`] and a core).
const CONCURRENT_EXTRACTIONS: usize = 2;
/// How far into the file the `%PDF-` header may start (as readers accept).
const HEADER_WINDOW: usize = 1024;
/// The child's exit status when it could not set itself up (limits, pipes):
/// a fault of the server, not of the file.
const CHILD_SETUP_FAILED: u8 = 3;

static SLOTS: Semaphore = Semaphore::const_new(CONCURRENT_EXTRACTIONS);

/// The text of each page of a PDF, in page order (page 1 first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdfText {
    pub pages: Vec<String>,
}

/// Why a file could not be loaded: one sentence naming the file, for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError(pub String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

/// What the child writes on its standard output.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
enum Answer {
    Pages { pages: Vec<String> },
    Error { error: String },
}

/// Extracts the text of every page of `bytes` in a confined child process
/// (see the module documentation). `file_name` is only used in messages.
///
/// Errors are sentences for the user: the file is not a PDF or is damaged, is
/// password-protected, has no readable page, took longer than 10 s, needs more
/// than 512 MiB, or (a server fault, logged as such) the reader could not run.
pub async fn extract_pdf(bytes: Bytes, file_name: &str) -> Result<PdfText, LoadError> {
    let shown = shown_name(file_name);
    if !has_pdf_header(&bytes) {
        return Err(not_readable(
            &shown,
            "it does not start with a PDF header (%PDF-); is it really a PDF?",
        ));
    }
    // The semaphore is never closed, so this only waits.
    let _slot = SLOTS
        .acquire()
        .await
        .map_err(|_| reader_failed(&shown, "the extraction queue is closed"))?;
    let exe = std::env::current_exe()
        .map_err(|e| reader_failed(&shown, &format!("the server's executable: {e}")))?;
    let mut child = tokio::process::Command::new(exe)
        .arg(EXTRACTOR_ARG)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| reader_failed(&shown, &format!("cannot start it: {e}")))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let exchange = async {
        let feed = async move {
            if let Some(mut stdin) = stdin {
                // A child that dies early closes the pipe; its exit status says why.
                let _ = stdin.write_all(&bytes).await;
                let _ = stdin.shutdown().await;
            }
        };
        let ((), answer, errors) = tokio::join!(
            feed,
            drain(stdout, MAX_ANSWER_BYTES, Keep::Head),
            drain(stderr, MAX_STDERR_KEPT, Keep::Tail),
        );
        (child.wait().await, answer, errors)
    };
    let outcome = tokio::time::timeout(TIME_LIMIT, exchange).await;
    let (status, answer, errors) = match outcome {
        Ok(done) => done,
        Err(_elapsed) => {
            // Kill and reap; kill_on_drop is the backstop if this fails.
            let _ = child.kill().await;
            return Err(too_slow(&shown));
        }
    };
    let status = status.map_err(|e| reader_failed(&shown, &format!("cannot wait for it: {e}")))?;
    interpret(&shown, status, &answer, &errors)
}

/// Which part of a stream [`drain`] keeps.
#[derive(Clone, Copy)]
enum Keep {
    Head,
    Tail,
}

/// What [`drain`] kept of a stream.
#[derive(Debug, Default)]
struct Drained {
    bytes: Vec<u8>,
    /// More than the limit arrived (the excess was read and dropped).
    overflowed: bool,
}

/// Reads `stream` to its end (so the child never blocks on a full pipe) and
/// keeps at most `limit` bytes of it.
async fn drain<R: AsyncRead + Unpin>(stream: Option<R>, limit: usize, keep: Keep) -> Drained {
    let mut kept = Drained::default();
    let Some(mut stream) = stream else {
        return kept;
    };
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        match keep {
            Keep::Head => {
                let room = limit.saturating_sub(kept.bytes.len());
                if chunk.len() > room {
                    kept.overflowed = true;
                }
                kept.bytes
                    .extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Keep::Tail => {
                kept.bytes.extend_from_slice(chunk);
                if kept.bytes.len() > limit {
                    kept.overflowed = true;
                    let excess = kept.bytes.len() - limit;
                    kept.bytes.drain(..excess);
                }
            }
        }
    }
    kept
}

/// Turns what the child did into pages or a user-facing error.
fn interpret(
    shown: &str,
    status: ExitStatus,
    answer: &Drained,
    errors: &Drained,
) -> Result<PdfText, LoadError> {
    let stderr = String::from_utf8_lossy(&errors.bytes);
    if status.success() {
        if answer.overflowed {
            return Err(too_much_text(shown));
        }
        return match serde_json::from_slice::<Answer>(&answer.bytes) {
            Ok(Answer::Pages { pages }) => Ok(PdfText { pages }),
            Ok(Answer::Error { error }) => {
                tracing::debug!(file = shown, reason = %error, stderr = %stderr, "PDF not readable");
                Err(not_readable(shown, &error))
            }
            Err(e) => {
                tracing::error!(file = shown, error = %e, stderr = %stderr, "the PDF extractor answered something that is not its protocol");
                Err(reader_failed(shown, "its answer was not understood"))
            }
        };
    }
    if let Some(signal) = status.signal() {
        tracing::warn!(file = shown, signal, stderr = %stderr, "the PDF extractor was killed by a signal");
        return Err(match signal {
            nix::libc::SIGXCPU | nix::libc::SIGKILL => too_slow(shown),
            _ if stderr.contains("memory allocation of") => too_big(shown),
            _ if stderr.contains("overflowed its stack") => not_readable(
                shown,
                "its objects are nested too deeply to be read; re-save it (e.g. print it to a new PDF) and upload that",
            ),
            _ => not_readable(
                shown,
                "the PDF reader crashed on its content; re-save it (e.g. print it to a new PDF) and upload that",
            ),
        });
    }
    let code = status.code().unwrap_or(-1);
    tracing::error!(file = shown, code, stderr = %stderr, "the PDF extractor failed");
    Err(reader_failed(
        shown,
        &format!("it exited with status {code}"),
    ))
}

fn not_readable(shown: &str, reason: &str) -> LoadError {
    LoadError(format!("file '{shown}' is not a readable PDF: {reason}"))
}

fn too_slow(shown: &str) -> LoadError {
    LoadError(format!(
        "file '{shown}' could not be read: reading it took longer than {} s; split it into smaller PDFs or re-save it (e.g. print it to a new PDF) and upload again",
        TIME_LIMIT.as_secs()
    ))
}

fn too_big(shown: &str) -> LoadError {
    LoadError(format!(
        "file '{shown}' could not be read: reading it needs more than {} MiB of memory; split it into smaller PDFs and upload again",
        MEMORY_LIMIT_BYTES >> 20
    ))
}

fn too_much_text(shown: &str) -> LoadError {
    LoadError(format!(
        "file '{shown}' could not be read: it holds more than {} MiB of text; split it into smaller files and upload again",
        MAX_TEXT_BYTES >> 20
    ))
}

/// The server could not run the extractor: not the file's fault.
fn reader_failed(shown: &str, detail: &str) -> LoadError {
    tracing::error!(file = shown, detail, "the PDF extractor could not run");
    LoadError(format!(
        "file '{shown}' could not be read: the server's PDF reader failed ({detail}); try again, and report it if it persists"
    ))
}

/// The file name as shown in messages: no control characters, at most 200 characters.
pub(super) fn shown_name(file_name: &str) -> String {
    let mut shown: String = file_name
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(200)
        .collect();
    if file_name.chars().count() > 200 {
        shown.push('…');
    }
    shown
}

fn has_pdf_header(bytes: &[u8]) -> bool {
    let window = &bytes[..bytes.len().min(HEADER_WINDOW)];
    window.windows(5).any(|w| w == b"%PDF-")
}

/// The child side: reads a PDF on standard input and writes one JSON answer on
/// standard output (see the module documentation). `main` calls it, before
/// anything else, when the first argument is [`EXTRACTOR_ARG`].
pub fn run_extractor_child() -> ExitCode {
    if let Err(e) = confine() {
        eprintln!("weir {EXTRACTOR_ARG}: cannot confine this process: {e}");
        return ExitCode::from(CHILD_SETUP_FAILED);
    }
    // The answer goes to a private copy of standard output; whatever the parsing
    // libraries might print goes to standard error, so it cannot corrupt the answer.
    let answer_fd = match nix::unistd::dup(std::io::stdout())
        .and_then(|fd| nix::unistd::dup2_stdout(std::io::stderr()).map(|()| fd))
    {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("weir {EXTRACTOR_ARG}: cannot set up the answer pipe: {e}");
            return ExitCode::from(CHILD_SETUP_FAILED);
        }
    };
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().lock().read_to_end(&mut input) {
        eprintln!("weir {EXTRACTOR_ARG}: cannot read the PDF: {e}");
        return ExitCode::from(CHILD_SETUP_FAILED);
    }
    // Panics inside are caught here (the default hook has already printed the
    // message to standard error, which the server logs).
    let answer = match catch_unwind(|| extract_pages(&input)) {
        Ok(Ok(pages)) => Answer::Pages { pages },
        Ok(Err(reason)) => Answer::Error { error: reason },
        Err(_) => Answer::Error {
            error: PARSER_FAILED.to_string(),
        },
    };
    drop(input);
    let mut out = std::io::BufWriter::new(std::fs::File::from(answer_fd));
    let written = serde_json::to_writer(&mut out, &answer)
        .map_err(std::io::Error::from)
        .and_then(|()| out.flush());
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir {EXTRACTOR_ARG}: cannot write the answer: {e}");
            ExitCode::from(CHILD_SETUP_FAILED)
        }
    }
}

const PARSER_FAILED: &str =
    "the PDF reader failed on its content; re-save it (e.g. print it to a new PDF) and upload that";

/// Limits the calling process before it touches the input.
fn confine() -> nix::Result<()> {
    use nix::sys::resource::Resource;
    #[cfg(target_os = "linux")]
    {
        // No core dumps (a 512 MiB one per crash would fill disks), and die with
        // the server.
        // (Linux sends the death signal when the spawning *thread* ends; tokio's
        // worker threads outlive the child, which `extract_pdf` waits for.)
        nix::sys::prctl::set_dumpable(false)?;
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
        nix::sys::prctl::set_no_new_privs()?;
    }
    let cpu = TIME_LIMIT.as_secs();
    lower_limit(Resource::RLIMIT_CORE, 0, 0)?;
    lower_limit(Resource::RLIMIT_AS, MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES)?;
    // SIGXCPU at the soft limit, SIGKILL one second later if it is ignored.
    lower_limit(Resource::RLIMIT_CPU, cpu, cpu + 1)?;
    lower_limit(Resource::RLIMIT_FSIZE, 0, 0)?;
    lower_limit(Resource::RLIMIT_NOFILE, OPEN_FILES_LIMIT, OPEN_FILES_LIMIT)?;
    Ok(())
}

/// Sets a limit no higher than the one already in force (an unprivileged
/// process may lower its hard limits but not raise them).
fn lower_limit(resource: nix::sys::resource::Resource, soft: u64, hard: u64) -> nix::Result<()> {
    let (current_soft, current_hard) = nix::sys::resource::getrlimit(resource)?;
    let hard = hard.min(current_hard);
    let soft = soft.min(current_soft).min(hard);
    nix::sys::resource::setrlimit(resource, soft, hard)
}

/// Parses the document and extracts each page's text; `Err` is a reason for
/// the user. Runs in the child only.
fn extract_pages(input: &[u8]) -> Result<Vec<String>, String> {
    let mut doc = pdf_extract::Document::load_mem(input)
        .map_err(|e| format!("it is damaged or not a PDF ({e}); re-save it and upload again"))?;
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Err("it is protected by a password; upload a copy without the password".into());
    }
    let count = doc.get_pages().len();
    if count == 0 {
        return Err("it has no pages".into());
    }
    // One pass over the document is linear in its pages; page by page costs a
    // walk of the page tree per page (quadratic), so it is only the fallback
    // that keeps the readable pages when one page fails or panics.
    let whole = catch_unwind(AssertUnwindSafe(|| all_pages_text(&doc)));
    let pages = match whole {
        Ok(Ok(pages)) if pages.len() == count => pages,
        Ok(Err(WholeFailure::TooMuchText)) => return Err(too_much_text_reason()),
        _ => each_page_text(&doc)?,
    };
    let mut total = 0usize;
    let mut cleaned = Vec::with_capacity(pages.len());
    for page in pages {
        let text = clean(&page);
        total = total.saturating_add(text.len());
        if total > MAX_TEXT_BYTES {
            return Err(too_much_text_reason());
        }
        cleaned.push(text);
    }
    Ok(cleaned)
}

fn too_much_text_reason() -> String {
    format!(
        "it holds more than {} MiB of text; split it into smaller files and upload again",
        MAX_TEXT_BYTES >> 20
    )
}

/// Why the one-pass extraction stopped.
enum WholeFailure {
    TooMuchText,
    Failed,
}

/// Every page's text in one pass over the document.
fn all_pages_text(doc: &pdf_extract::Document) -> Result<Vec<String>, WholeFailure> {
    let pages = std::cell::RefCell::new(PageTexts::default());
    let mut sink = PageSink(&pages);
    let sink: &mut dyn Write = &mut sink;
    let mut splitter = PageSplitter {
        text: pdf_extract::PlainTextOutput::new(sink),
        pages: &pages,
    };
    let done = pdf_extract::output_doc(doc, &mut splitter);
    let pages = pages.into_inner();
    if pages.over_limit {
        return Err(WholeFailure::TooMuchText);
    }
    done.map_err(|_| WholeFailure::Failed)?;
    Ok(pages
        .pages
        .into_iter()
        .map(|page| String::from_utf8_lossy(&page).into_owned())
        .collect())
}

/// The text written so far, one buffer per page begun.
#[derive(Default)]
struct PageTexts {
    pages: Vec<Vec<u8>>,
    total: usize,
    over_limit: bool,
}

/// Where pdf-extract's plain-text output writes: the current page's buffer.
struct PageSink<'p>(&'p std::cell::RefCell<PageTexts>);

impl Write for PageSink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut texts = self.0.borrow_mut();
        texts.total = texts.total.saturating_add(buf.len());
        if texts.total > MAX_TEXT_BYTES {
            texts.over_limit = true;
            return Err(std::io::Error::other("too much text"));
        }
        if let Some(page) = texts.pages.last_mut() {
            page.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// pdf-extract's plain-text output, with a new page buffer at each page.
struct PageSplitter<'p, O> {
    text: O,
    pages: &'p std::cell::RefCell<PageTexts>,
}

impl<O: pdf_extract::OutputDev> pdf_extract::OutputDev for PageSplitter<'_, O> {
    fn begin_page(
        &mut self,
        page_num: u32,
        media_box: &pdf_extract::MediaBox,
        art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), pdf_extract::OutputError> {
        self.pages.borrow_mut().pages.push(Vec::new());
        self.text.begin_page(page_num, media_box, art_box)
    }

    fn end_page(&mut self) -> Result<(), pdf_extract::OutputError> {
        self.text.end_page()
    }

    fn output_character(
        &mut self,
        trm: &pdf_extract::Transform,
        width: f64,
        spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), pdf_extract::OutputError> {
        self.text
            .output_character(trm, width, spacing, font_size, char)
    }

    fn begin_word(&mut self) -> Result<(), pdf_extract::OutputError> {
        self.text.begin_word()
    }

    fn end_word(&mut self) -> Result<(), pdf_extract::OutputError> {
        self.text.end_word()
    }

    fn end_line(&mut self) -> Result<(), pdf_extract::OutputError> {
        self.text.end_line()
    }
}

/// Page by page, each in its own `catch_unwind`: a page the reader cannot
/// handle is left empty rather than failing the whole document, unless no page
/// at all can be read.
fn each_page_text(doc: &pdf_extract::Document) -> Result<Vec<String>, String> {
    let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    let mut pages = Vec::with_capacity(numbers.len());
    let mut total = 0usize;
    let mut unreadable = 0usize;
    let mut first_failure = None;
    for number in numbers {
        let page = catch_unwind(AssertUnwindSafe(|| page_text(doc, number)));
        let text = match page {
            Ok(Ok(text)) => text,
            Ok(Err(e)) => {
                unreadable += 1;
                first_failure.get_or_insert(e);
                String::new()
            }
            Err(_) => {
                unreadable += 1;
                first_failure.get_or_insert_with(|| "the reader failed on it".to_string());
                String::new()
            }
        };
        total = total.saturating_add(text.len());
        if total > MAX_TEXT_BYTES {
            return Err(too_much_text_reason());
        }
        pages.push(text);
    }
    if unreadable == pages.len() {
        let why = first_failure.unwrap_or_default();
        return Err(format!(
            "none of its {} pages could be read ({why}); re-save it (e.g. print it to a new PDF) and upload that",
            pages.len()
        ));
    }
    if unreadable > 0 {
        eprintln!(
            "weir {EXTRACTOR_ARG}: {unreadable} of {} pages unreadable, left empty",
            pages.len()
        );
    }
    Ok(pages)
}

fn page_text(doc: &pdf_extract::Document, number: u32) -> Result<String, String> {
    let mut text = String::new();
    let mut output = pdf_extract::PlainTextOutput::new(&mut text);
    pdf_extract::output_doc_page(doc, &mut output, number).map_err(|e| e.to_string())?;
    Ok(text)
}

/// Page text as stored: no control characters but newlines and tabs (NUL in
/// particular, which PostgreSQL text refuses), no blank lines at either end.
fn clean(text: &str) -> String {
    let kept: String = text
        .chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect();
    kept.trim_matches('\n').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    fn signalled(signal: i32) -> ExitStatus {
        ExitStatus::from_raw(signal)
    }

    fn out(text: &str) -> Drained {
        Drained {
            bytes: text.as_bytes().to_vec(),
            overflowed: false,
        }
    }

    #[test]
    fn answers_round_trip_as_the_protocol_says() {
        let pages = Answer::Pages {
            pages: vec!["one".into(), "two \"quoted\"\n".into()],
        };
        let json = serde_json::to_string(&pages).unwrap();
        assert_eq!(json, r#"{"pages":["one","two \"quoted\"\n"]}"#);
        assert_eq!(serde_json::from_str::<Answer>(&json).unwrap(), pages);
        let error = Answer::Error {
            error: "it is damaged".into(),
        };
        let json = serde_json::to_string(&error).unwrap();
        assert_eq!(json, r#"{"error":"it is damaged"}"#);
        assert_eq!(serde_json::from_str::<Answer>(&json).unwrap(), error);
    }

    #[test]
    fn a_successful_answer_gives_the_pages_in_order() {
        let text = interpret(
            "a.pdf",
            exited(0),
            &out(r#"{"pages":["first","","third"]}"#),
            &out(""),
        )
        .unwrap();
        assert_eq!(text.pages, vec!["first", "", "third"]);
    }

    #[test]
    fn an_error_answer_names_the_file() {
        let e = interpret(
            "bad.pdf",
            exited(0),
            &out(r#"{"error":"it has no pages"}"#),
            &out(""),
        )
        .unwrap_err();
        assert_eq!(e.0, "file 'bad.pdf' is not a readable PDF: it has no pages");
    }

    #[test]
    fn garbage_or_truncated_answers_are_reader_failures() {
        for garbage in [
            "",
            "running 0 tests\n",
            r#"{"pages":["unterminated"#,
            r#"{"x":1}"#,
        ] {
            let e = interpret("a.pdf", exited(0), &out(garbage), &out("")).unwrap_err();
            assert!(
                e.0.starts_with("file 'a.pdf' could not be read: the server's PDF reader failed"),
                "{e}"
            );
        }
    }

    #[test]
    fn an_answer_over_the_limit_is_too_much_text() {
        let answer = Drained {
            bytes: br#"{"pages":["#.to_vec(),
            overflowed: true,
        };
        let e = interpret("big.pdf", exited(0), &answer, &out("")).unwrap_err();
        assert!(e.0.contains("more than 64 MiB of text"), "{e}");
    }

    #[test]
    fn signals_are_told_apart() {
        let time =
            interpret("t.pdf", signalled(nix::libc::SIGXCPU), &out(""), &out("")).unwrap_err();
        assert!(time.0.contains("took longer than 10 s"), "{time}");
        let killed =
            interpret("t.pdf", signalled(nix::libc::SIGKILL), &out(""), &out("")).unwrap_err();
        assert!(killed.0.contains("took longer than 10 s"), "{killed}");
        let memory = interpret(
            "m.pdf",
            signalled(nix::libc::SIGABRT),
            &out(""),
            &out("memory allocation of 1073741824 bytes failed\n"),
        )
        .unwrap_err();
        assert!(memory.0.contains("needs more than 512 MiB"), "{memory}");
        let deep = interpret(
            "d.pdf",
            signalled(nix::libc::SIGSEGV),
            &out(""),
            &out("\nthread 'main' has overflowed its stack\nfatal runtime error: stack overflow\n"),
        )
        .unwrap_err();
        assert!(deep.0.contains("nested too deeply"), "{deep}");
        let crash =
            interpret("c.pdf", signalled(nix::libc::SIGSEGV), &out(""), &out("")).unwrap_err();
        assert!(
            crash
                .0
                .starts_with("file 'c.pdf' is not a readable PDF: the PDF reader crashed"),
            "{crash}"
        );
    }

    #[test]
    fn a_failed_exit_is_the_servers_fault() {
        let e = interpret("a.pdf", exited(3), &out(""), &out("cannot confine")).unwrap_err();
        assert!(e.0.contains("exited with status 3"), "{e}");
    }

    #[test]
    fn the_header_may_follow_some_junk() {
        assert!(has_pdf_header(b"%PDF-1.7\n"));
        assert!(has_pdf_header(b"\xef\xbb\xbfjunk\r\n%PDF-1.4"));
        assert!(!has_pdf_header(b""));
        assert!(!has_pdf_header(b"PK\x03\x04 not a pdf"));
        let mut late = vec![b' '; HEADER_WINDOW];
        late.extend_from_slice(b"%PDF-1.4");
        assert!(!has_pdf_header(&late));
    }

    #[test]
    fn names_are_shown_without_control_characters() {
        assert_eq!(shown_name("a\nb.pdf"), "a?b.pdf");
        let long = "x".repeat(300);
        assert_eq!(shown_name(&long).chars().count(), 201);
    }

    #[test]
    fn page_text_is_cleaned() {
        assert_eq!(
            clean("\n\nHello\u{0}\u{7} world\tok\n\n"),
            "Hello world\tok"
        );
    }

    #[tokio::test]
    async fn drain_keeps_the_head_or_the_tail_and_reads_everything() {
        let data: Vec<u8> = (0..=255u8).cycle().take(200_000).collect();
        let head = drain(Some(&data[..]), 1000, Keep::Head).await;
        assert!(head.overflowed);
        assert_eq!(head.bytes, data[..1000]);
        let tail = drain(Some(&data[..]), 1000, Keep::Tail).await;
        assert!(tail.overflowed);
        assert_eq!(tail.bytes, data[data.len() - 1000..]);
        let all = drain(Some(&data[..]), data.len(), Keep::Head).await;
        assert!(!all.overflowed);
        assert_eq!(all.bytes.len(), data.len());
    }

    /// A minimal PDF, one page per entry (`None`: a page without a media box,
    /// on which pdf-extract panics), with a correct cross-reference table.
    fn pdf(pages: &[Option<&str>]) -> Vec<u8> {
        let kids: Vec<String> = (0..pages.len())
            .map(|i| format!("{} 0 R", 4 + 2 * i))
            .collect();
        let mut objects = vec![
            "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
            format!(
                "<< /Type /Pages /Kids [{}] /Count {} >>",
                kids.join(" "),
                pages.len()
            ),
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_string(),
        ];
        for (i, page) in pages.iter().enumerate() {
            let media_box = if page.is_some() {
                "/MediaBox [0 0 612 792]"
            } else {
                ""
            };
            objects.push(format!(
                "<< /Type /Page /Parent 2 0 R {media_box} /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                5 + 2 * i
            ));
            let text = format!("BT /F1 12 Tf 72 700 Td ({}) Tj ET", page.unwrap_or(""));
            objects.push(format!(
                "<< /Length {} >>\nstream\n{text}\nendstream",
                text.len()
            ));
        }
        let mut out = b"%PDF-1.7\n".to_vec();
        let mut offsets = Vec::new();
        for (i, body) in objects.iter().enumerate() {
            offsets.push(out.len());
            out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
        }
        let xref = out.len();
        out.extend_from_slice(
            format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
        );
        for offset in offsets {
            out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
        }
        out.extend_from_slice(
            format!(
                "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
                objects.len() + 1
            )
            .as_bytes(),
        );
        out
    }

    // The child's parsing, run here in the test process (the test binary cannot
    // be the child; the black-box suite runs the real one).
    #[test]
    fn pages_come_out_in_order() {
        let pages = extract_pages(&pdf(&[
            Some("First page"),
            Some("Second page"),
            Some("Third"),
        ]))
        .unwrap();
        assert_eq!(pages, vec!["First page", "Second page", "Third"]);
    }

    #[test]
    fn a_broken_page_is_left_empty_and_the_others_are_kept() {
        let pages = extract_pages(&pdf(&[Some("one"), None, Some("three")])).unwrap();
        assert_eq!(pages, vec!["one", "", "three"]);
    }

    #[test]
    fn no_readable_page_at_all_is_an_error() {
        let e = extract_pages(&pdf(&[None, None])).unwrap_err();
        assert!(e.starts_with("none of its 2 pages could be read"), "{e}");
    }

    #[test]
    fn truncated_or_empty_documents_are_errors() {
        let whole = pdf(&[Some("text")]);
        for cut in [whole.len() / 2, 20, 0] {
            let e = extract_pages(&whole[..cut]).unwrap_err();
            assert!(e.starts_with("it is damaged or not a PDF"), "{cut}: {e}");
        }
        let e = extract_pages(&pdf(&[])).unwrap_err();
        assert_eq!(e, "it has no pages");
    }

    #[tokio::test]
    async fn a_file_without_a_header_fails_without_a_child() {
        let e = extract_pdf(Bytes::from_static(b"hello, world"), "notes.pdf")
            .await
            .unwrap_err();
        assert!(
            e.0.starts_with("file 'notes.pdf' is not a readable PDF: it does not start"),
            "{e}"
        );
    }
}
