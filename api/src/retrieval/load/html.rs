//! Web pages (`cheerioWebScraper`): the text of an HTML page, or of the parts a
//! CSS selector picks, and the page's links to the same site for a crawl.
//! Parsing is html5ever's (through `scraper`), the way browsers recover from
//! broken markup; the page was fetched by the caller through the SSRF guard.
//!
//! Unlike cheerio's `.text()`, the text of `<script>`, `<style>`, `<noscript>`
//! and `<template>` is left out: it is code, not content a question is about.

use reqwest::Url;
use scraper::{ElementRef, Html, Node, Selector};

/// Checks a CSS selector (a bad one is a 400 when the flow is saved).
pub fn check_selector(selector: &str) -> Result<(), String> {
    Selector::parse(selector)
        .map(|_| ())
        .map_err(|e| format!("'{selector}' is not a CSS selector weir can read: {e}"))
}

/// The text of every element `selector` picks (default `body`), in document
/// order, one element's text after another; runs of blank space folded.
pub fn page_text(html: &str, selector: Option<&str>) -> Result<String, String> {
    let selector = Selector::parse(selector.unwrap_or("body"))
        .map_err(|e| format!("the selector is not valid CSS: {e}"))?;
    let document = Html::parse_document(html);
    let mut out = String::new();
    for element in document.select(&selector) {
        collect_text(element, &mut out);
    }
    Ok(fold_space(&out))
}

fn collect_text(element: ElementRef<'_>, out: &mut String) {
    for node in element.descendants() {
        match node.value() {
            Node::Text(text) => {
                let inside = |names: &[&str]| {
                    node.ancestors().any(|a| {
                        a.value()
                            .as_element()
                            .is_some_and(|e| names.contains(&e.name()))
                    })
                };
                if inside(&["script", "style", "noscript", "template"]) {
                    continue;
                }
                if inside(&["pre"]) {
                    out.push_str(text);
                } else {
                    // Line breaks in markup are spaces, as a browser shows them.
                    out.extend(
                        text.chars()
                            .map(|c| if c.is_whitespace() { ' ' } else { c }),
                    );
                }
            }
            // Block boundaries become line breaks, so words of two paragraphs
            // do not run together.
            Node::Element(e) if is_block(e.name()) => out.push('\n'),
            _ => {}
        }
    }
}

fn is_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "br"
            | "li"
            | "ul"
            | "ol"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "tr"
            | "table"
            | "section"
            | "article"
            | "header"
            | "footer"
            | "pre"
            | "blockquote"
            | "dd"
            | "dt"
    )
}

/// Spaces and tabs folded to one space, blank lines to one, ends trimmed.
fn fold_space(text: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let folded = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if folded.is_empty() {
            if lines.last().is_some_and(|l| !l.is_empty()) {
                lines.push(String::new());
            }
        } else {
            lines.push(folded);
        }
    }
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines.join("\n")
}

/// What a scraper tool reports of a page: its title, its description (the
/// `description` meta, else Open Graph's, else Twitter's) and the text of its
/// paragraphs, as Flowise's web scraper tool reads them.
pub struct PageSummary {
    pub title: String,
    pub description: String,
    pub body_text: String,
}

pub fn page_summary(html: &str) -> PageSummary {
    let document = Html::parse_document(html);
    let first_text = |css: &str| {
        Selector::parse(css).ok().and_then(|s| {
            document
                .select(&s)
                .next()
                .map(|e| fold_space(&e.text().collect::<String>()))
        })
    };
    let meta = |css: &str| {
        Selector::parse(css).ok().and_then(|s| {
            document
                .select(&s)
                .find_map(|e| e.value().attr("content"))
                .map(|c| c.trim().to_owned())
                .filter(|c| !c.is_empty())
        })
    };
    let mut paragraphs = Vec::new();
    if let Ok(p) = Selector::parse("p") {
        for element in document.select(&p) {
            let text = fold_space(&element.text().collect::<String>());
            if !text.is_empty() {
                paragraphs.push(text);
            }
        }
    }
    PageSummary {
        title: first_text("title")
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "No title found".to_owned()),
        description: meta(r#"meta[name="description"]"#)
            .or_else(|| meta(r#"meta[property="og:description"]"#))
            .or_else(|| meta(r#"meta[name="twitter:description"]"#))
            .unwrap_or_else(|| "No description found".to_owned()),
        body_text: paragraphs.join(" "),
    }
}

/// The page addresses an XML sitemap lists (`<loc>`), in order.
pub fn sitemap_locations(xml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(open) = rest.find("<loc>") {
        rest = &rest[open + "<loc>".len()..];
        let Some(close) = rest.find("</loc>") else {
            break;
        };
        let location = rest[..close].trim().replace("&amp;", "&");
        if !location.is_empty() {
            out.push(location);
        }
        rest = &rest[close..];
    }
    out
}

/// Links of the page to pages of the same site (scheme, host and port), without
/// their fragment, in document order, each once.
pub fn same_site_links(html: &str, page: &Url) -> Vec<Url> {
    let Ok(anchors) = Selector::parse("a[href]") else {
        return Vec::new();
    };
    let document = Html::parse_document(html);
    let mut out: Vec<Url> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for a in document.select(&anchors) {
        let Some(href) = a.value().attr("href") else {
            continue;
        };
        let Ok(mut url) = page.join(href) else {
            continue;
        };
        url.set_fragment(None);
        if url.scheme() == page.scheme()
            && url.host_str() == page.host_str()
            && url.port_or_known_default() == page.port_or_known_default()
            && seen.insert(url.clone())
        {
            out.push(url);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<html><head><title>T</title><style>p{}</style></head><body>
        <h1>Opening hours</h1><script>var x = 1;</script>
        <p>Monday to   Friday,
        nine to five.</p><div class="note">Closed on holidays.</div>
        <a href="/about#team">About</a> <a href="https://elsewhere.example/x">Other</a>
        <a href="faq">FAQ</a><a href="/about">About again</a></body></html>"#;

    #[test]
    fn text_leaves_code_out_and_folds_space() -> Result<(), String> {
        let text = page_text(PAGE, None)?;
        assert!(text.starts_with("Opening hours\n"), "{text}");
        assert!(text.contains("Monday to Friday, nine to five."), "{text}");
        assert!(!text.contains("var x"), "{text}");
        assert_eq!(page_text(PAGE, Some(".note"))?, "Closed on holidays.");
        assert!(check_selector("div[").is_err());
        Ok(())
    }

    #[test]
    fn links_stay_on_the_site() -> Result<(), String> {
        let page = Url::parse("https://docs.example/guide/start").map_err(|e| e.to_string())?;
        let links: Vec<String> = same_site_links(PAGE, &page)
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(
            links,
            [
                "https://docs.example/about",
                "https://docs.example/guide/faq"
            ]
        );
        Ok(())
    }
}
